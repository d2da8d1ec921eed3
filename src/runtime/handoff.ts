import type { ProviderCapabilities } from "../capabilities/schema.js";
import type { RunContext } from "../adapters/contract.js";
import { CapabilityUnsupportedError } from "../domain/errors.js";
import type { DomainEvent } from "../domain/events.js";
import { isTerminalRunStatus, type Projections, type ProviderThreadRecord, type RunView } from "./projections.js";

/**
 * Portable context: what a provider thread is told about the app thread's runs it never saw
 * (another provider's runs, or everything, when it replaced a thread that could not be
 * resumed, or a portable fork's parent history). Computed from the log's projection, never
 * from a provider's memory, so a failed send or a crash just computes it again; each handoff
 * is recorded once, explicitly (invariant 8), and reused until a turn consumes it.
 */

const DEFAULT_MAX_CHARS = 8_000;

function runText(run: RunView): string {
  const assistant = run.items
    .filter((i) => i.kind === "assistant_message" && i.text)
    .map((i) => i.text)
    .join("");
  return `[run ${run.ordinal}, ${run.status}] user: ${run.text}\nassistant: ${assistant || "(no reply)"}`;
}

/**
 * Deterministic and bounded: the oldest runs are dropped first when over the bound, the
 * newest is truncated last. Same runs in, same text out.
 */
export function summarizeRuns(runs: readonly RunView[], maxChars: number | null): string {
  const limit = maxChars ?? DEFAULT_MAX_CHARS;
  const header = "Context from earlier in this conversation:\n";
  const parts = runs.map(runText);
  while (parts.length > 1 && header.length + parts.join("\n\n").length > limit) parts.shift();
  const omitted = runs.length - parts.length;
  const body = (omitted > 0 ? `(${omitted} earlier runs omitted)\n\n` : "") + parts.join("\n\n");
  return (header + body).slice(0, limit);
}

/** How a provider can receive explicit context; null when it cannot at all. */
export function contextDelivery(caps: ProviderCapabilities): RunContext["delivery"] | null {
  if (caps.context.acceptsDeveloperContext) return "developer";
  if (caps.context.acceptsSystemContext) return "system";
  if (caps.context.acceptsSyntheticUserContext) return "synthetic_user";
  return null;
}

function requireDelivery(caps: ProviderCapabilities, what: string): RunContext["delivery"] {
  const delivery = contextDelivery(caps);
  if (!delivery) throw new CapabilityUnsupportedError("context.acceptsSyntheticUserContext", `provider accepts no context for ${what}`, { fallback: "refused" });
  return delivery;
}

/** The parent runs a fork carries: up to and including its fork point. */
export function forkPointRuns(views: Projections, parentThreadId: string, forkedFromRunId: string | null): RunView[] {
  const parent = views.threads.get(parentThreadId)!;
  const cut = forkedFromRunId ? parent.runs.findIndex((r) => r.runId === forkedFromRunId) + 1 : parent.runs.length;
  return parent.runs.slice(0, cut);
}

export interface ContextInput {
  views: Projections;
  threadId: string;
  providerThread: ProviderThreadRecord;
  capabilities: ProviderCapabilities;
  commit: (event: DomainEvent) => void;
  nextHandoffId: () => string;
}

/** The context the next turn of this provider thread must carry, or null when it has seen everything. */
export function contextForNextTurn({ views, threadId, providerThread, capabilities, commit, nextHandoffId }: ContextInput): RunContext | null {
  const thread = views.threads.get(threadId)!;
  const fresh = providerThread.lastRunOrdinal === 0;
  const transfer = views.transfers.get(threadId);
  if (fresh && transfer?.resolution === "portable") {
    const runs = forkPointRuns(views, transfer.parentThreadId, transfer.forkedFromRunId);
    const text = summarizeRuns(runs, capabilities.context.maxRecommendedHandoffChars);
    return { kind: "fork", text, delivery: requireDelivery(capabilities, "a portable fork") };
  }
  const settled = thread.runs.filter((r) => isTerminalRunStatus(r.status) && r.attempts.length > 0);
  // A replacement thread starts blank: it must hear every run, not only other providers' runs.
  const rebuilt = providerThread.via === "rebuilt" || providerThread.via === "replaced";
  const missed = settled.filter(
    (r) => r.ordinal > providerThread.lastRunOrdinal && (rebuilt || r.providerTarget !== providerThread.providerTarget),
  );
  if (missed.length === 0) return null;
  const delta = !fresh && capabilities.context.supportsDeltaHandoff;
  const covered = delta ? missed : settled.filter((r) => r.ordinal <= missed.at(-1)!.ordinal);
  const reason = providerThread.via === "rebuilt" ? "resume_failed" : providerThread.via === "replaced" ? "thread_broken" : "provider_switch";
  const ordinals = covered.map((r) => r.ordinal);
  const delivery = requireDelivery(capabilities, "a handoff");
  const prior = views.handoffs
    .get(threadId)
    ?.find((h) => h.providerThreadId === providerThread.providerThreadId && h.coveredRunOrdinals.join() === ordinals.join());
  const kind = reason === "provider_switch" ? "handoff" : "rebuild";
  if (prior) return { kind, text: prior.text, delivery };
  const text = summarizeRuns(covered, capabilities.context.maxRecommendedHandoffChars);
  const lastOther = missed.findLast((r) => r.providerTarget !== providerThread.providerTarget);
  commit({
    type: "handoff.created",
    threadId,
    handoffId: nextHandoffId(),
    providerThreadId: providerThread.providerThreadId,
    fromTarget: lastOther?.providerTarget ?? null,
    toTarget: providerThread.providerTarget,
    reason,
    strategy: delta ? "delta_since_last_seen" : "full_thread_summary",
    coveredRunOrdinals: ordinals,
    text,
  });
  return { kind, text, delivery };
}
