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

function runText(run: RunView, threadId: string | null): string {
  const assistant = run.items
    .filter((i) => i.kind === "assistant_message" && i.text)
    .map((i) => i.text)
    .join("");
  // A fork's inherited runs keep their own numbering: say whose they are.
  const label = threadId && run.threadId !== threadId ? `before the fork, run ${run.ordinal}` : `run ${run.ordinal}`;
  return `[${label}, ${run.status}] user: ${run.text}\nassistant: ${assistant || "(no reply)"}`;
}

/**
 * Deterministic and bounded: the oldest runs are dropped first when over the bound, the
 * newest is truncated last. Same runs in, same text out.
 */
export function summarizeRuns(runs: readonly RunView[], maxChars: number | null, threadId: string | null = null): string {
  const limit = maxChars ?? DEFAULT_MAX_CHARS;
  const header = "Context from earlier in this conversation:\n";
  const parts = runs.map((run) => runText(run, threadId));
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

/**
 * Everything the app thread's conversation consists of, oldest first: for a fork, its
 * parent's history up to the fork point, then its own settled runs that reached a provider.
 */
export function historyRuns(views: Projections, threadId: string, upToRunId?: string | null): RunView[] {
  const thread = views.threads.get(threadId)!;
  // A run whose turn never reached a provider (its send failed) is not part of any conversation.
  const settled = thread.runs.filter((r) => isTerminalRunStatus(r.status) && r.attempts.some((a) => a.providerTurnId !== null));
  const cut = upToRunId === undefined ? settled.length : upToRunId === null ? 0 : settled.findIndex((r) => r.runId === upToRunId) + 1;
  const lineage = thread.lineage?.relation === "fork" ? thread.lineage : null;
  const inherited = lineage ? historyRuns(views, lineage.parentThreadId, lineage.forkedFromRunId) : [];
  return [...inherited, ...settled.slice(0, cut)];
}

export interface ContextInput {
  views: Projections;
  threadId: string;
  /** The run whose turn will carry the context. */
  runId: string;
  providerThread: ProviderThreadRecord;
  capabilities: ProviderCapabilities;
  commit: (event: DomainEvent) => void;
  nextHandoffId: () => string;
}

/**
 * The context the next turn of this provider thread must carry, or null when it has seen
 * everything: a delta of what it missed when it has seen some of the thread (and the provider
 * takes deltas), else the whole history. A natively forked thread already holds its parent's.
 */
export function contextForNextTurn(input: ContextInput): RunContext | null {
  const { views, threadId, runId, providerThread, capabilities, commit, nextHandoffId } = input;
  const history = historyRuns(views, threadId);
  const own = new Set(views.threads.get(threadId)!.runs.map((r) => r.runId));
  const known = (r: RunView) => providerThread.seenRunIds.has(r.runId) || (providerThread.origin === "forked" && !own.has(r.runId));
  const unseen = history.filter((r) => !known(r));
  if (unseen.length === 0) return null;
  const fresh = providerThread.seenRunIds.size === 0;
  const delta = !fresh && capabilities.context.supportsDeltaHandoff;
  const covered = delta ? unseen : history;
  const coveredRunIds = covered.map((r) => r.runId);
  // A portable fork's first provider thread hears only inherited history: that is the fork
  // transfer itself. Once the fork has runs of its own, a fresh thread elsewhere is a switch.
  const onlyInherited = unseen.every((r) => !own.has(r.runId));
  const reason = !fresh
    ? "provider_switch"
    : providerThread.origin === "rebuilt"
      ? "resume_failed"
      : providerThread.origin === "replaced"
        ? "thread_broken"
        : onlyInherited && views.transfers.get(threadId)?.resolution === "portable"
          ? "fork"
          : "provider_switch";
  const kind: RunContext["kind"] = reason === "fork" ? "fork" : reason === "provider_switch" ? "handoff" : "rebuild";
  const delivery = requireDelivery(capabilities, "a handoff");
  const pending = views.handoffs
    .get(threadId)
    ?.find((h) => !h.consumed && h.providerThreadId === providerThread.providerThreadId && h.coveredRunIds.join() === coveredRunIds.join());
  if (pending) return { kind, text: pending.text, delivery };
  const text = summarizeRuns(covered, capabilities.context.maxRecommendedHandoffChars, threadId);
  const lastOther = unseen.findLast((r) => r.providerTarget !== providerThread.providerTarget);
  commit({
    type: "handoff.created",
    threadId,
    handoffId: nextHandoffId(),
    providerThreadId: providerThread.providerThreadId,
    runId,
    fromTarget: lastOther?.providerTarget ?? null,
    toTarget: providerThread.providerTarget,
    reason,
    strategy: delta ? "delta_since_last_seen" : "full_thread_summary",
    coveredRunIds,
    coveredRunOrdinals: covered.filter((r) => own.has(r.runId)).map((r) => r.ordinal),
    text,
  });
  return { kind, text, delivery };
}
