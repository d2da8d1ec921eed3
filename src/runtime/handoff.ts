import type { ProviderCapabilities } from "../capabilities/schema.js";
import type { HandoffContext } from "../adapters/contract.js";
import { CapabilityUnsupportedError } from "../domain/errors.js";
import type { DomainEvent, DomainEventOf } from "../domain/events.js";
import { canForkNatively } from "../capabilities/predicates.js";
import { contextDeliveryPolicy, decide } from "../machines/contextPolicy.js";
import { forksNatively, type ForkSituation } from "../machines/providerThread.js";
import { policyEvent } from "../machines/emitted.js";
import { DEGRADATIONS } from "../machines/policies.js";
import {
  isTerminalRunStatus,
  Projections,
  type ProviderThreadRecord,
  type RunView,
  type Transfer,
} from "./projections.js";

/**
 * Portable context: what a provider thread is told about the app thread's runs it never saw
 * (another provider's runs, or everything, when it replaced a thread that could not be
 * resumed, or a portable fork's parent history). Computed from the log's projection, never
 * from a provider's memory, so a failed send or a crash just computes it again; each handoff
 * is recorded once, explicitly (invariant 8), and reused until a turn consumes it.
 */

const DEFAULT_MAX_CHARS = 8_000;

type HandoffReason = DomainEventOf<"handoff.created">["reason"];

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
export function summarizeRuns(
  runs: readonly RunView[],
  maxChars: number | null,
  threadId: string | null = null,
): string {
  const limit = maxChars ?? DEFAULT_MAX_CHARS;
  const header = "Context from earlier in this conversation:\n";
  const parts = runs.map((run) => runText(run, threadId));
  while (parts.length > 1 && header.length + parts.join("\n\n").length > limit) parts.shift();
  const omitted = runs.length - parts.length;
  const body = (omitted > 0 ? `(${omitted} earlier runs omitted)\n\n` : "") + parts.join("\n\n");
  return (header + body).slice(0, limit);
}

/** How a provider can receive explicit context (the delivery policy's decision); null when it cannot at all. */
export function contextDelivery(caps: ProviderCapabilities): HandoffContext["delivery"] | null {
  const { decision } = decide(contextDeliveryPolicy, { capabilities: caps });
  return decision === "refused" ? null : (decision as HandoffContext["delivery"]);
}

/** A provider that takes no context at all cannot continue a conversation it has not seen: a typed refusal. */
export function handoffRefusal(target: string): CapabilityUnsupportedError {
  const capability = DEGRADATIONS.handoff_unsupported.capability;
  return new CapabilityUnsupportedError(
    capability,
    `${target} accepts no explicit context, so it cannot be handed this conversation`,
    { fallback: "refused", policy: "handoff_unsupported" },
  );
}

/**
 * Everything the app thread's conversation consists of, oldest first: for a fork, its
 * parent's history up to the fork point, then its own settled runs that reached a provider.
 */
export function historyRuns(
  views: Projections,
  threadId: string,
  upToRunId?: string | null,
  asOfSeq?: number,
): RunView[] {
  const thread = views.threads.get(threadId)!;
  // A run whose turn never reached a provider (its send failed) is not part of any conversation.
  // Rolled-back runs are no longer part of it either, except for a fork made before the rollback.
  const standing = (r: RunView) =>
    r.status !== "rolled_back" || (asOfSeq !== undefined && (views.rolledBackAt.get(r.runId) ?? 0) > asOfSeq);
  const settled = thread.runs.filter(
    (r) => isTerminalRunStatus(r.status) && standing(r) && r.attempts.some((a) => a.providerTurnId !== null),
  );
  const cut =
    upToRunId === undefined
      ? settled.length
      : upToRunId === null
        ? 0
        : settled.findIndex((r) => r.runId === upToRunId) + 1;
  const lineage = thread.lineage?.relation === "fork" ? thread.lineage : null;
  const inherited = lineage
    ? historyRuns(views, lineage.parentThreadId, lineage.forkedFromRunId, views.transfers.get(threadId)?.seq)
    : [];
  return [...inherited, ...settled.slice(0, cut)];
}

/** Would a turn of this app thread on this target have to be told runs it never saw? */
export function needsHandoff(
  views: Projections,
  threadId: string,
  providerTarget: string,
  capabilities: ProviderCapabilities,
  adapterForks: boolean,
): boolean {
  const history = historyRuns(views, threadId);
  const stored = views.providerThreads.get(Projections.providerThreadKey(threadId, providerTarget));
  const transfer = views.pendingTransfer(threadId);
  // A fork that will be realised natively carries its history in the provider's own copy.
  if (
    !stored &&
    transfer &&
    forksNatively(forkSituation(views, providerTarget, transfer, capabilities, adapterForks).situation)
  )
    return false;
  if (!stored || stored.divergent) return history.length > 0;
  const own = new Set(views.threads.get(threadId)!.runs.map((r) => r.runId));
  return history.some((r) => !stored.seenRunIds.has(r.runId) && !(stored.origin === "forked" && !own.has(r.runId)));
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
export function contextForNextTurn(input: ContextInput): HandoffContext | null {
  const { views, threadId, runId, providerThread, capabilities, commit, nextHandoffId } = input;
  const history = historyRuns(views, threadId);
  const own = new Set(views.threads.get(threadId)!.runs.map((r) => r.runId));
  const known = (r: RunView) =>
    providerThread.seenRunIds.has(r.runId) || (providerThread.origin === "forked" && !own.has(r.runId));
  const unseen = history.filter((r) => !known(r));
  if (unseen.length === 0) return null;
  const fresh = providerThread.seenRunIds.size === 0;
  const delta = !fresh && capabilities.context.supportsDeltaHandoff;
  const covered = delta ? unseen : history;
  const coveredRunIds = covered.map((r) => r.runId);
  // A portable fork's first provider thread hears only inherited history: that is the fork
  // transfer itself. Once the fork has runs of its own, a fresh thread elsewhere is a switch.
  const onlyInherited = unseen.every((r) => !own.has(r.runId));
  const byOrigin: Partial<Record<ProviderThreadRecord["origin"], HandoffReason>> = {
    rebuilt: "resume_failed",
    replaced: "thread_broken",
    realigned: "rollback_divergent",
  };
  const reason: HandoffReason = !fresh
    ? "provider_switch"
    : (byOrigin[providerThread.origin] ??
      (onlyInherited && views.transfers.get(threadId)?.resolution === "portable" ? "fork" : "provider_switch"));
  const kind: HandoffContext["kind"] =
    reason === "fork" ? "fork" : reason === "provider_switch" ? "handoff" : "rebuild";
  const delivery = contextDelivery(capabilities);
  if (!delivery) throw handoffRefusal(providerThread.providerTarget);
  const unconsumed =
    views.handoffs
      .get(threadId)
      ?.filter((h) => !h.consumed && !h.superseded && h.providerThreadId === providerThread.providerThreadId) ?? [];
  const pending = unconsumed.find((h) => h.coveredRunIds.join() === coveredRunIds.join());
  if (pending) return { kind, text: pending.text, delivery };
  if (delivery === "synthetic_user") {
    const detail =
      `${providerThread.providerTarget} takes no system or developer context; ` +
      "the handoff goes in as a user message";
    commit(policyEvent({ threadId, runId }, "handoff_as_user_context", detail));
  }
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
    supersedesHandoffId: unconsumed.at(-1)?.handoffId ?? null,
  });
  return { kind, text, delivery };
}

/**
 * What the fork policy reads about a fork point on a target, and why a native fork would
 * not be faithful. Natively only when this provider's parent thread executed every run up
 * to the fork point (and holds whatever the parent inherited, by having been forked itself).
 */
export function forkSituation(
  views: Projections,
  target: string,
  transfer: Pick<Transfer, "parentThreadId" | "forkedFromRunId"> & { seq?: number },
  capabilities: ProviderCapabilities,
  adapterForks: boolean,
) {
  const parentThread = views.providerThreads.get(Projections.providerThreadKey(transfer.parentThreadId, target));
  const runs = historyRuns(views, transfer.parentThreadId, transfer.forkedFromRunId, transfer.seq);
  const parentOwn = runs.filter((r) => r.threadId === transfer.parentThreadId);
  // Inside the thread when any later parent run reached (or may still reach) a provider: a
  // whole-thread fork would copy its turns.
  const forkOrdinal = transfer.forkedFromRunId ? (views.runs.get(transfer.forkedFromRunId)?.ordinal ?? 0) : 0;
  const fromInside = views.threads
    .get(transfer.parentThreadId)!
    .runs.some(
      (r) =>
        r.ordinal > forkOrdinal &&
        r.status !== "rolled_back" &&
        (!isTerminalRunStatus(r.status) || r.attempts.some((a) => a.providerTurnId !== null)),
    );
  const inheritsNatively = parentOwn.length === runs.length || parentThread?.origin === "forked";
  const parentRanHere =
    !!parentThread &&
    !parentThread.divergent &&
    inheritsNatively &&
    // It ran every run up to the fork point, and still holds it (a native rollback drops turns).
    parentOwn.every(
      (r) =>
        r.attempts.at(-1)!.providerThreadId === parentThread.providerThreadId && parentThread.seenRunIds.has(r.runId),
    );
  const afterTurnRef = fromInside ? (runs.at(-1)?.attempts.at(-1)?.nativeTurnRef ?? null) : null;
  const capability = fromInside ? "threads.canForkFromTurn" : "threads.canForkThread";
  const why = !parentThread
    ? "the parent has no thread on this provider"
    : !parentRanHere
      ? "the parent thread's runs up to the fork point did not all run on this provider thread"
      : !(adapterForks && canForkNatively(capabilities, fromInside))
        ? `provider cannot fork natively (${capability})`
        : "the fork point has no native turn id";
  const situation: ForkSituation = {
    capabilities,
    fromInside,
    parentRanHere,
    adapterForks,
    hasForkPointRef: afterTurnRef !== null,
    why,
    capability,
    parentProviderThreadId: parentThread?.providerThreadId ?? null,
    runCount: runs.length,
  };
  return { situation, parentThread, runs, afterTurnRef };
}
