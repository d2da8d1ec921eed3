import type { Projections, RequestView, RunView } from "./projections.js";

/**
 * What a handoff summary says: each run with its messages, the commands it ran, the files it
 * changed and the user's decisions, bounded by dropping the oldest runs first. Deterministic:
 * same runs in, same summary out.
 */

/** The bound of a handoff summary for a provider that recommends none. */
export const DEFAULT_HANDOFF_CHARS = 8_000;

/** What a summary says of a run besides its messages: what ran, what changed, what the user decided. */
function runActions(run: RunView, decisions: readonly RequestView[]): string[] {
  const lines: string[] = [];
  for (const item of run.items) {
    const detail = (item.detail ?? {}) as { command?: string; path?: string; exitCode?: number; status?: string };
    if (item.kind === "command" && detail.command)
      lines.push(`ran: ${detail.command}${detail.exitCode !== undefined ? ` (exit ${detail.exitCode})` : ""}`);
    else if (item.kind === "file_change" && detail.path)
      lines.push(`${detail.status === "declined" ? "did not change" : "changed"}: ${detail.path}`);
  }
  for (const request of decisions) {
    if (request.status !== "resolved" || !request.response) continue;
    const asked = request.payload as { kind: string; command?: string; path?: string };
    const what = [asked.kind.replace("_", " "), asked.command ?? asked.path].filter(Boolean).join(" ");
    const answer = request.response.kind === "decision" ? request.response.decision : "answered";
    lines.push(`user decided: ${what}: ${answer}`);
  }
  return lines;
}

function runText(run: RunView, threadId: string | null, decisions: readonly RequestView[]): string {
  const assistant = run.items
    .filter((i) => i.kind === "assistant_message" && i.text)
    .map((i) => i.text)
    .join("");
  // A fork's inherited runs keep their own numbering: say whose they are.
  const label = threadId && run.threadId !== threadId ? `before the fork, run ${run.ordinal}` : `run ${run.ordinal}`;
  return [
    `[${label}, ${run.status}] user: ${run.text}`,
    ...runActions(run, decisions),
    `assistant: ${assistant || "(no reply)"}`,
  ].join("\n");
}

/** A summary, and exactly which runs it carries and which it left out for the bound. */
export interface HandoffSummary {
  text: string;
  /** Runs the text tells (the oldest of them cut short when even it alone is over the bound). */
  carried: RunView[];
  /** The oldest runs, dropped whole to fit the bound: the text says how many. */
  omitted: RunView[];
}

/**
 * Deterministic and bounded: each run with its commands, file changes and the user's
 * decisions; the oldest runs are dropped first when over the bound, the newest is truncated
 * last. Same runs in, same summary out.
 */
export function summarizeRuns(
  runs: readonly RunView[],
  maxChars: number | null,
  threadId: string | null = null,
  decisionsOf: (runId: string) => readonly RequestView[] = () => [],
): HandoffSummary {
  const limit = maxChars ?? DEFAULT_HANDOFF_CHARS;
  // No header: the adapter kit's context formatter writes it, once, where the context is delivered.
  const parts = runs.map((run) => runText(run, threadId, decisionsOf(run.runId)));
  let dropped = 0;
  const omittedNote = (n: number) => (n > 0 ? `(${n} earlier runs omitted)\n\n` : "");
  const size = () => omittedNote(dropped).length + parts.slice(dropped).join("\n\n").length;
  while (runs.length - dropped > 1 && size() > limit) dropped += 1;
  const text = (omittedNote(dropped) + parts.slice(dropped).join("\n\n")).slice(0, limit);
  return { text, carried: runs.slice(dropped), omitted: runs.slice(0, dropped) };
}

/** The requests of each run, for the decisions a summary tells. */
export function decisionsIn(views: Projections): (runId: string) => RequestView[] {
  const requests = [...views.requests.values()];
  return (runId) => requests.filter((r) => r.runId === runId);
}
