import type { ProviderCapabilities } from "../capabilities/schema.js";
import { canForkNatively } from "../capabilities/predicates.js";
import type { ForkSituation } from "../machines/providerThread.js";
import { historyRuns, subagentRun } from "./history.js";
import {
  isTerminalRunStatus,
  Projections,
  type ProviderThreadRecord,
  type RunView,
  type Transfer,
} from "./projections.js";

/**
 * What the fork policy reads about a fork point, read from the log's projection: whether the provider's parent thread
 * holds every run up to the point (or the subagent's thread is addressable there), and why a native fork would not be
 * faithful. The policy itself is the provider-thread machine's (`forksNatively`).
 */

/**
 * What the fork policy reads about a fork point on a target, and why a native fork would
 * not be faithful. Natively only when this provider's parent thread executed every run up
 * to the fork point (and holds whatever the parent inherited, by having been forked itself).
 */
export function forkSituation(
  views: Projections,
  target: string,
  transfer: Pick<Transfer, "parentThreadId" | "forkedFromRunId"> & {
    seq?: number;
    fromSubagentNodeId?: string | null;
  },
  capabilities: ProviderCapabilities,
  adapterForks: boolean,
): {
  situation: ForkSituation;
  parentThread: ProviderThreadRecord | undefined;
  runs: RunView[];
  afterTurnRef: string | null;
} {
  if (transfer.fromSubagentNodeId)
    return subagentForkSituation(views, target, transfer.forkedFromRunId, transfer.fromSubagentNodeId, capabilities, {
      adapterForks,
    });
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

/**
 * A fork of a subagent's conversation: natively from its child thread (the fork's parent here) where the subagent ran
 * on this provider, its thread is addressable, and the provider forks subagent threads (`forksSubagentThreads`); else
 * from portable context told from the subagent's items (`subagent_fork_synthetic`).
 */
export function subagentForkSituation(
  views: Projections,
  target: string,
  runId: string | null,
  nodeId: string,
  capabilities: ProviderCapabilities,
  { adapterForks }: { adapterForks: boolean },
) {
  const child = views.subagentThreads.get(nodeId);
  const run = subagentRun(views, runId, nodeId);
  const ranHere = !!child && child.providerTarget === target;
  // The child thread, addressed by its ref: a provider thread of the parent app thread.
  const parentThread: ProviderThreadRecord | undefined =
    child && ranHere
      ? {
          providerThreadId: child.providerThreadId,
          threadId: child.threadId,
          providerTarget: target,
          sessionId: child.sessionId,
          nativeThreadRef: child.nativeThreadRef,
          resumeCursor: child.nativeThreadRef,
          origin: "created",
          seenRunIds: new Set(),
          omittedRunIds: new Set(),
          divergent: false,
        }
      : undefined;
  const { threads, subagents } = capabilities;
  const [capability, why] = !child
    ? ["subagents.exposesSubagentThreadIds", "the subagent's child thread is not addressable"]
    : !ranHere
      ? ["subagents.canForkSubagentThread", "the subagent ran on another provider"]
      : !(adapterForks && threads.canForkThread)
        ? ["threads.canForkThread", "provider cannot fork natively"]
        : !subagents.canForkSubagentThread
          ? ["subagents.canForkSubagentThread", "the subagent's thread does not outlive it"]
          : ["threads.canForkFromSubagentThread", "the provider's fork takes no subagent thread"];
  const situation: ForkSituation = {
    capabilities,
    fromInside: false,
    parentRanHere: ranHere,
    adapterForks,
    hasForkPointRef: true,
    why: `${why} (${capability}); the subagent's conversation is told from its items`,
    capability,
    parentProviderThreadId: child?.providerThreadId ?? null,
    runCount: run ? 1 : 0,
    fromSubagent: true,
  };
  return { situation, parentThread, runs: run ? [run] : [], afterTurnRef: null };
}
