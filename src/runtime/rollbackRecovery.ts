import type { ChangedFile } from "../domain/entities.js";
import type { DomainEvent } from "../domain/events.js";
import { redact } from "../domain/redact.js";
import type { Projections } from "./projections.js";
import { unknownState, type RestoreStarted, type RollbackHost } from "./rollback.js";

/**
 * A rollback the previous runtime started and did not finish, taken up at start-up (before the runtime accepts
 * commands): a file restore it announced is finished, or reported in an unknown state; a rollback never recorded as
 * applied is settled as divergent.
 */

/** What finishing an announced restore at start-up needs. */
export type RestoreFinishing = Pick<RollbackHost, "views" | "checkpoints" | "run" | "commit">;

/**
 * Recovery of a restore the previous runtime announced but did not finish (it died or was
 * closed in the middle): the rollback had been decided, its provider step done, so the files
 * are restored again (a restore is idempotent: it makes the files match the checkpoint) and
 * the rollback is recorded as it would have been. When that fails, the files it names are in
 * an unknown state: reported as such, and the rollback counts as not done (provider threads
 * that may have moved are rebuilt). Runs before the runtime accepts commands.
 */
export async function finishAnnouncedRestores(d: RestoreFinishing, announced: RestoreStarted[]): Promise<void> {
  for (const restore of announced) {
    const { threadId, toRunId, checkpointId } = restore;
    if (d.views.rollbacksInFlight.get(threadId) !== toRunId) continue;
    let changed: ChangedFile[];
    try {
      changed = await d.checkpoints.restore(checkpointId);
    } catch (error) {
      const reason = redact(error instanceof Error ? error.message : String(error));
      const settled: DomainEvent = {
        type: "checkpoint.restore_settled",
        threadId,
        toRunId,
        checkpointId,
        outcome: "unknown",
        files: restore.files,
        message: unknownState(restore.files, `the runtime stopped, and finishing it failed: ${reason}`),
      };
      d.run(() => [settled, ...settleInterruptedRollback(d.views, threadId, toRunId)].forEach((e) => d.commit(e)));
      continue;
    }
    const { rolledBackRunIds, provider, providerThreadId, divergentProviderThreadIds, files } = restore;
    const message = `the runtime stopped during the restore to checkpoint ${checkpointId}; recovery finished it`;
    d.run(() => {
      d.commit({
        type: "checkpoint.restore_settled",
        threadId,
        toRunId,
        checkpointId,
        outcome: "finished",
        files: changed,
        message,
      });
      d.commit({
        type: "rollback.applied",
        threadId,
        toRunId,
        rolledBackRunIds,
        provider,
        providerThreadId,
        divergentProviderThreadIds,
        checkpointId,
        files,
      });
    });
  }
}

/**
 * A rollback that started but was never recorded as applied (the runtime died in between):
 * the provider may already have dropped turns the app still shows, so every provider thread
 * that holds a later run is marked divergent and rebuilt from the app's history on its next run.
 */
export function settleInterruptedRollback(views: Projections, threadId: string, toRunId: string): DomainEvent[] {
  const toRun = views.runs.get(toRunId);
  const later = new Set(
    views.threads
      .get(threadId)!
      .runs.filter((r) => r.ordinal > (toRun?.ordinal ?? 0))
      .map((r) => r.runId),
  );
  const divergentProviderThreadIds = [...views.providerThreadsById.values()]
    .filter((p) => p.threadId === threadId && [...p.seenRunIds].some((id) => later.has(id)))
    .map((p) => p.providerThreadId);
  const message =
    `the rollback to ${toRunId} was interrupted by a restart: nothing was rolled back in the app; ` +
    "provider threads that may have been rolled back are rebuilt on the next run";
  return [
    { type: "warning", threadId, runId: toRunId, message },
    {
      type: "rollback.applied",
      threadId,
      toRunId,
      rolledBackRunIds: [],
      provider: "divergent",
      providerThreadId: null,
      divergentProviderThreadIds,
      checkpointId: null,
      files: [],
    },
  ];
}
