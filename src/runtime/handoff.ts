import type { ProviderCapabilities } from "../capabilities/schema.js";
import type { HandoffContext } from "../adapters/contract.js";
import { CapabilityUnsupportedError } from "../domain/errors.js";
import { redact } from "../domain/redact.js";
import { DEFAULT_HANDOFF_CHARS, decisionsIn, summarizeRuns, type HandoffSummary } from "./handoffSummary.js";
import type { DomainEvent, DomainEventOf } from "../domain/events.js";
import { takesDeltaHandoff, writesSummaries } from "../capabilities/predicates.js";
import { contextDeliveryPolicy, decide, handoffAdmissionPolicy, type HandoffNeed } from "../machines/contextPolicy.js";
import { forksNatively } from "../machines/providerThread.js";
import { forkSituation } from "./forkSituation.js";
import { historyRuns } from "./history.js";
import { policyEvent } from "../machines/emitted.js";
import { DEGRADATIONS, type PolicyName } from "../machines/policies.js";
import { Projections, type HandoffRecord, type ProviderThreadRecord, type RunView } from "./projections.js";

/**
 * Portable context: what a provider thread is told about the app thread's runs it never saw
 * (another provider's runs, or everything, when it replaced a thread that could not be
 * resumed, or a portable fork's parent history). Computed from the log's projection, never
 * from a provider's memory, so a failed send or a crash just computes it again; each handoff
 * is recorded once, explicitly (invariant 8), and reused until a turn consumes it.
 */

type HandoffReason = DomainEventOf<"handoff.created">["reason"];

/** How a provider can receive explicit context (the delivery policy's decision); null when it cannot at all. */
export function contextDelivery(caps: ProviderCapabilities): HandoffContext["delivery"] | null {
  const { decision } = decide(contextDeliveryPolicy, { capabilities: caps });
  return decision === "refused" ? null : (decision as HandoffContext["delivery"]);
}

/** A provider that takes no context at all cannot continue a conversation it has not seen: a typed refusal. */
export function handoffRefusal(target: string): CapabilityUnsupportedError {
  return refusal("handoff_unsupported", target, null);
}

/**
 * What a turn of this app thread on this target would have to be told of runs it never saw:
 * nothing, only what its provider thread missed, or the whole conversation (a fresh or
 * divergent thread, or one that takes no deltas and so is replaced by a fresh one).
 */
export function handoffNeed(
  views: Projections,
  threadId: string,
  providerTarget: string,
  capabilities: ProviderCapabilities,
  adapterForks: boolean,
): HandoffNeed {
  const history = historyRuns(views, threadId);
  const stored = views.providerThreads.get(Projections.providerThreadKey(threadId, providerTarget));
  const transfer = views.pendingTransfer(threadId);
  // A fork that will be realised natively carries its history in the provider's own copy.
  if (
    !stored &&
    transfer &&
    forksNatively(forkSituation(views, providerTarget, transfer, capabilities, adapterForks).situation)
  )
    return "none";
  if (!stored || stored.divergent) return history.length > 0 ? "full" : "none";
  const own = new Set(views.threads.get(threadId)!.runs.map((r) => r.runId));
  const untold = history.some(
    (r) =>
      !stored.seenRunIds.has(r.runId) &&
      !stored.omittedRunIds.has(r.runId) &&
      !(stored.origin === "forked" && !own.has(r.runId)),
  );
  if (!untold) return "none";
  return stored.seenRunIds.size > 0 && takesDeltaHandoff(capabilities) ? "delta" : "full";
}

/** The target the app thread's conversation is on: the one its latest run that reached a provider ran on. */
export function conversationTarget(views: Projections, threadId: string): string | null {
  return historyRuns(views, threadId).at(-1)?.providerTarget ?? null;
}

/** The admission policy's refusal for telling a provider the conversation without a switch, or null. */
function admissionRefusal(to: ProviderCapabilities, need: HandoffNeed, target: string) {
  const { policy } = decide(handoffAdmissionPolicy, { from: null, to, switching: false, need });
  return policy ? refusal(policy, target, null) : null;
}

function refusal(policy: PolicyName, to: string, from: string | null): CapabilityUnsupportedError {
  const why: Partial<Record<PolicyName, string>> = {
    provider_switch_unsupported:
      `the conversation cannot move from ${from} to ${to}: ` + "one of them takes no part in provider switching",
    handoff_summary_unsupported: `${to} cannot continue from a summary of a conversation it has not seen`,
    full_handoff_unsupported: `${to} cannot be told a whole conversation, and its thread there has seen none of it`,
    handoff_unsupported: `${to} accepts no explicit context, so it cannot be handed this conversation`,
  };
  return new CapabilityUnsupportedError(DEGRADATIONS[policy].capability, why[policy] ?? DEGRADATIONS[policy].summary, {
    fallback: "refused",
    policy,
  });
}

/**
 * Whether a run may go to `to`, decided before anything is recorded for it (the admission
 * policy, then the delivery policy): null when it may, else the typed refusal and its policy.
 */
export function handoffRefusalFor(
  views: Projections,
  threadId: string,
  to: { id: string; capabilities: ProviderCapabilities; adapterForks: boolean },
  recordOf: (target: string) => ProviderCapabilities | null,
): CapabilityUnsupportedError | null {
  const need = handoffNeed(views, threadId, to.id, to.capabilities, to.adapterForks);
  const fromTarget = conversationTarget(views, threadId);
  const from = fromTarget && fromTarget !== to.id ? recordOf(fromTarget) : null;
  const admission = decide(handoffAdmissionPolicy, {
    from,
    to: to.capabilities,
    switching: fromTarget !== null && fromTarget !== to.id,
    need,
  });
  const policy =
    admission.policy ?? (need !== "none" && !contextDelivery(to.capabilities) ? "handoff_unsupported" : null);
  return policy ? refusal(policy, to.id, fromTarget) : null;
}

export interface ContextInput {
  views: Projections;
  threadId: string;
  /** The run whose turn will carry the context. */
  runId: string;
  providerThread: ProviderThreadRecord;
  capabilities: ProviderCapabilities;
}

/** What the next turn of a provider thread must be told, decided before anything is written or recorded. */
export interface ContextPlan {
  input: ContextInput;
  kind: HandoffContext["kind"];
  reason: HandoffReason;
  delivery: HandoffContext["delivery"];
  delta: boolean;
  /** The runs to tell, oldest first (a delta: those it has not seen; else the whole conversation). */
  candidates: RunView[];
  /** An earlier handoff of the same runs no turn carried yet: carried as it is. */
  reuse: HandoffRecord | null;
  supersedes: string | null;
  /** What the summary is written from: the whole transcript of the candidates, for a provider to condense. */
  transcript: string;
}

/**
 * The context the next turn of this provider thread must carry, or null when it has seen
 * everything: a delta of what it missed when it has seen some of the thread (and the provider
 * takes deltas), else the whole history. A natively forked thread already holds its parent's.
 * Refused (typed) where the provider cannot be told. Nothing is recorded: see `recordContext`.
 */
export function planContext(input: ContextInput): ContextPlan | null {
  const { views, threadId, providerThread, capabilities } = input;
  const history = historyRuns(views, threadId);
  const own = new Set(views.threads.get(threadId)!.runs.map((r) => r.runId));
  const known = (r: RunView) =>
    providerThread.seenRunIds.has(r.runId) || (providerThread.origin === "forked" && !own.has(r.runId));
  // Runs an earlier summary left out for its bound do not call for a handoff on their own, but
  // ride along with the next one when it has room.
  const unseen = history.filter((r) => !known(r));
  if (unseen.every((r) => providerThread.omittedRunIds.has(r.runId))) return null;
  const fresh = providerThread.seenRunIds.size === 0;
  const delta = !fresh && capabilities.context.supportsDeltaHandoff;
  const candidates = delta ? unseen : history;
  const candidateIds = candidates.map((r) => r.runId).join();
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
  // A thread rebuilt or replaced here (no switch: that was admitted before the run was recorded)
  // still needs a provider that can be told the conversation.
  const refused = admissionRefusal(capabilities, delta ? "delta" : "full", providerThread.providerTarget);
  if (refused) throw refused;
  const delivery = contextDelivery(capabilities);
  if (!delivery) throw handoffRefusal(providerThread.providerTarget);
  const unconsumed =
    views.handoffs
      .get(threadId)
      ?.filter((h) => !h.consumed && !h.superseded && h.providerThreadId === providerThread.providerThreadId) ?? [];
  const reuse = unconsumed.find((h) => [...h.omittedRunIds, ...h.coveredRunIds].join() === candidateIds) ?? null;
  const transcript = reuse ? "" : summarizeRuns(candidates, MAX_TRANSCRIPT_CHARS, threadId, decisionsIn(views)).text;
  return {
    input,
    kind,
    reason,
    delivery,
    delta,
    candidates,
    reuse,
    supersedes: unconsumed.at(-1)?.handoffId ?? null,
    transcript,
  };
}

/** The longest transcript a provider is asked to condense (the newest runs are kept). */
const MAX_TRANSCRIPT_CHARS = 200_000;

/** Where the plan wants a provider-written summary: the receiving provider writes summaries and none is reused. */
export function wantsProviderSummary(plan: ContextPlan): boolean {
  return !plan.reuse && writesSummaries(plan.input.capabilities);
}

/**
 * Records the handoff the plan decided (once, inside the dispatcher) and returns the context
 * the turn carries. `written` is the receiving provider's own summary of the transcript, when it
 * wrote one (bounded here, it carries every run); otherwise the local summariser's, which leaves
 * the oldest runs out to stay within the provider's recommended size.
 */
export function recordContext(
  plan: ContextPlan,
  written: { text: string } | { failed: string } | null,
  commit: (event: DomainEvent) => void,
  nextHandoffId: () => string,
): HandoffContext {
  const { input, kind, reason, delivery, delta, candidates } = plan;
  const { views, threadId, runId, providerThread, capabilities } = input;
  if (plan.reuse) return { kind, text: plan.reuse.text, delivery };
  const where = { threadId, runId };
  const target = providerThread.providerTarget;
  if (delivery === "synthetic_user") {
    const detail = `${target} takes no system or developer context; the handoff goes in as a user message`;
    commit(policyEvent(where, "handoff_as_user_context", detail));
  }
  const bound = capabilities.context.maxRecommendedHandoffChars ?? DEFAULT_HANDOFF_CHARS;
  let summary: HandoffSummary;
  if (written && "text" in written) {
    summary = { text: written.text.slice(0, bound), carried: candidates, omitted: [] };
  } else {
    const why = written ? `${target}'s summary failed (${redact(written.failed)})` : `${target} writes no summaries`;
    commit(policyEvent(where, "summary_by_local_summariser", `${why}: the local summariser writes the handoff`));
    summary = summarizeRuns(candidates, bound, threadId, decisionsIn(views));
  }
  const { text, carried, omitted } = summary;
  if (omitted.length > 0) {
    const detail =
      `${omitted.length} of ${candidates.length} runs left out of the summary to stay within ` +
      `${target}'s ${bound} characters`;
    commit(policyEvent(where, "handoff_runs_omitted", detail));
  }
  const own = new Set(views.threads.get(threadId)!.runs.map((r) => r.runId));
  const lastOther = candidates.findLast((r) => r.providerTarget !== target && !providerThread.seenRunIds.has(r.runId));
  commit({
    type: "handoff.created",
    threadId,
    handoffId: nextHandoffId(),
    providerThreadId: providerThread.providerThreadId,
    runId,
    fromTarget: lastOther?.providerTarget ?? null,
    toTarget: target,
    reason,
    strategy: delta ? "delta_since_last_seen" : "full_thread_summary",
    coveredRunIds: carried.map((r) => r.runId),
    coveredRunOrdinals: carried.filter((r) => own.has(r.runId)).map((r) => r.ordinal),
    omittedRunIds: omitted.map((r) => r.runId),
    summarizedBy: written && "text" in written ? "provider" : "runtime",
    text,
    supersedesHandoffId: plan.supersedes,
  });
  return { kind, text, delivery };
}
