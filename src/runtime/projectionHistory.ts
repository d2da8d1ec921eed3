import type { DomainEventOf } from "../domain/events.js";
import type {
  CheckpointView,
  HandoffRecord,
  ProviderThreadRecord,
  RunView,
  ThreadView,
  TurnItem,
} from "./projectionTypes.js";

/**
 * The folds of a thread's history (projections.ts): its checkpoints, and a rollback, which makes later runs
 * `rolled_back`, their checkpoints stale, and tells what each provider thread still holds.
 */

/** The read models these folds read and write (the projections' own maps). */
export interface HistoryModels {
  readonly threads: Map<string, ThreadView>;
  readonly runs: Map<string, RunView>;
  readonly items: Map<string, TurnItem>;
  readonly checkpoints: Map<string, CheckpointView>;
  readonly threadCheckpoints: Map<string, CheckpointView[]>;
  readonly providerThreadsById: Map<string, ProviderThreadRecord>;
  readonly handoffs: Map<string, HandoffRecord[]>;
  readonly rolledBackAt: Map<string, number>;
}

export function foldCheckpoint(
  m: HistoryModels,
  event: DomainEventOf<"checkpoint.captured" | "checkpoint.failed" | "checkpoint.skipped">,
): void {
  if (event.type === "checkpoint.skipped") {
    const item = m.items.get(event.nodeId);
    if (item) item.detail = { ...item.detail, checkpoint: "uncheckpointed" };
    return;
  }
  const { checkpointId, threadId, runId, scope, phase, nodeId } = event;
  const captured = event.type === "checkpoint.captured" ? event : null;
  const view: CheckpointView = {
    ...{ checkpointId, threadId, runId, scope, phase, nodeId },
    parentCheckpointId: captured?.parentCheckpointId ?? null,
    commit: captured?.commit ?? null,
    files: captured?.files ?? [],
    insertions: captured?.insertions ?? 0,
    deletions: captured?.deletions ?? 0,
    status: captured ? "ready" : "error",
    message: event.type === "checkpoint.failed" ? event.message : null,
  };
  m.checkpoints.set(checkpointId, view);
  m.threadCheckpoints.set(threadId, [...(m.threadCheckpoints.get(threadId) ?? []), view]);
}

/** Later runs become `rolled_back`, their checkpoints stale; a provider that could not follow is divergent. */
export function foldRollback(m: HistoryModels, event: DomainEventOf<"rollback.applied">, seq: number): void {
  const rolledBack = new Set(event.rolledBackRunIds);
  for (const runId of rolledBack) {
    const run = m.runs.get(runId);
    if (run) run.status = "rolled_back";
    m.rolledBackAt.set(runId, seq);
  }
  for (const checkpoint of m.threadCheckpoints.get(event.threadId) ?? []) {
    if (rolledBack.has(checkpoint.runId)) checkpoint.status = "stale";
  }
  const native = event.providerThreadId ? m.providerThreadsById.get(event.providerThreadId) : undefined;
  if (native) {
    native.seenRunIds = seenBy(m, native);
    native.omittedRunIds = new Set([...native.omittedRunIds].filter((id) => m.runs.get(id)?.status !== "rolled_back"));
  }
  for (const id of event.divergentProviderThreadIds) {
    const providerThread = m.providerThreadsById.get(id);
    if (providerThread) providerThread.divergent = true;
  }
}

/**
 * What a provider thread still holds after a native rollback: the runs it executed, and the handoffs carried by runs
 * still standing.
 */
function seenBy(m: HistoryModels, providerThread: ProviderThreadRecord): Set<string> {
  const seen = new Set<string>();
  const standing = (runId: string) => m.runs.get(runId)?.status !== "rolled_back";
  for (const run of m.threads.get(providerThread.threadId)?.runs ?? []) {
    if (
      standing(run.runId) &&
      run.attempts.some((a) => a.providerThreadId === providerThread.providerThreadId && a.providerTurnId !== null)
    )
      seen.add(run.runId);
  }
  for (const handoff of m.handoffs.get(providerThread.threadId) ?? []) {
    if (handoff.consumed && handoff.providerThreadId === providerThread.providerThreadId && standing(handoff.runId))
      handoff.coveredRunIds.forEach((id) => seen.add(id));
  }
  return seen;
}
