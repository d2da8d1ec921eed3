import type { ProviderAdapter } from "../adapters/contract.js";
import type { LoadSituation } from "../machines/providerThread.js";
import { DEFAULT_HANDOFF_CHARS } from "./handoffSummary.js";
import { forkSituation } from "./forkSituation.js";
import { planContext, wantsProviderSummary, type ContextPlan } from "./handoff.js";
import { historyRuns } from "./history.js";
import { Projections, type ProviderThreadRecord } from "./projections.js";
import type { LiveSession, LoadedThread } from "./targetTypes.js";

/**
 * What a target reads from the log before a turn: how its provider thread is to be loaded (the situation the
 * provider-thread machine decides on), and what the turn must be told (a handoff, a portable fork), with the summary
 * the receiving provider writes where its record says it does.
 */

/** The situation the provider-thread machine decides on, read from the log's projection; and a fork's native inputs. */
export function loadSituation(
  views: Projections,
  target: { id: string; adapter: ProviderAdapter },
  threadId: string,
  session: LiveSession,
) {
  const stored = views.providerThreads.get(Projections.providerThreadKey(threadId, target.id));
  const transfer = views.pendingTransfer(threadId);
  // A fork's first run: the inputs of the decision, and what realising it natively needs (parent, fork point).
  const forking =
    !stored && transfer
      ? forkSituation(views, target.id, transfer, session.capabilities, !!target.adapter.forkThread)
      : null;
  const parent = forking?.parentThread;
  const situation: LoadSituation = {
    sessionId: session.sessionId,
    capabilities: session.capabilities,
    stored: stored ? { providerThreadId: stored.providerThreadId, resumeCursor: stored.resumeCursor } : null,
    divergent: stored?.divergent ?? false,
    missedRuns: !!stored && historyRuns(views, threadId).some((r) => !stored.seenRunIds.has(r.runId)),
    hadBroken: views.hadBrokenProviderThread(threadId, target.id),
    fork: forking && transfer ? { ...forking.situation, transferId: transfer.transferId } : null,
  };
  // Both from the log: after a restart the adapter has never seen the parent, and must not guess where it lives.
  const fork = parent
    ? {
        parent: {
          threadRef: parent.nativeThreadRef,
          resumeCursor: parent.resumeCursor,
          cwd: views.threads.get(parent.threadId)!.cwd,
        },
        afterTurnRef: forking.afterTurnRef,
      }
    : null;
  return { situation, fork };
}

/** What the next turn on this provider thread must be told (a handoff, a portable fork), if anything: unrecorded. */
export function planTurnContext(
  views: Projections,
  providerTarget: string,
  run: { threadId: string; runId: string },
  loaded: LoadedThread,
  session: LiveSession,
): ContextPlan | null {
  const { threadId, runId } = run;
  return planContext({
    views,
    threadId,
    runId,
    providerThread:
      views.providerThreadsById.get(loaded.providerThreadId) ?? unmadeRecord(threadId, providerTarget, loaded),
    capabilities: session.capabilities,
  });
}

/**
 * The summary the receiving provider writes for the plan, where its record says it writes
 * them: its text, or why it failed (the local summariser then writes it); null where it does not.
 */
export async function providerSummary(
  adapter: ProviderAdapter,
  plan: ContextPlan,
  session: LiveSession,
): Promise<{ text: string } | { failed: string } | null> {
  if (!wantsProviderSummary(plan)) return null;
  if (!adapter.summarize) return { failed: "the adapter has no summarize method" };
  const maxChars = session.capabilities.context.maxRecommendedHandoffChars ?? DEFAULT_HANDOFF_CHARS;
  try {
    return { text: await adapter.summarize({ sessionId: session.sessionId, transcript: plan.transcript, maxChars }) };
  } catch (error) {
    return { failed: error instanceof Error ? error.message : String(error) };
  }
}

/** The record of a provider thread its first turn is about to make: nothing seen, nothing bound yet. */
function unmadeRecord(threadId: string, providerTarget: string, loaded: LoadedThread): ProviderThreadRecord {
  return {
    providerThreadId: loaded.providerThreadId,
    threadId,
    providerTarget,
    sessionId: loaded.sessionId,
    nativeThreadRef: null,
    resumeCursor: "",
    origin: loaded.unmade?.via ?? "created",
    seenRunIds: new Set(),
    omittedRunIds: new Set(),
    divergent: false,
  };
}
