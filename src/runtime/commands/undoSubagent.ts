import type { z } from "zod";
import type { UndoSubagentInputSchema } from "../../domain/commands.js";
import type { ChangedFile } from "../../domain/entities.js";
import { CapabilityUnsupportedError, CheckpointError, ConflictError, NotFoundError } from "../../domain/errors.js";
import type { DomainEvent } from "../../domain/events.js";
import { DEGRADATIONS, type PolicyName } from "../../machines/policies.js";
import { policyEvent } from "../../machines/emitted.js";
import type { Actors } from "../actors.js";
import type { Checkpoints } from "../checkpoints/checkpoints.js";
import { isTerminalRunStatus, type RunView, type ThreadView } from "../projections.js";
import { sharedDirectoryBusy, type RollbackPlanning } from "../rollback.js";
import { findThread } from "./checks.js";

/** What undoing a subagent needs: the read models and targets, the thread actors, the checkpoints, the write path. */
export interface UndoSubagentHost extends RollbackPlanning {
  readonly actors: Pick<Actors, "threads">;
  readonly checkpoints: Pick<Checkpoints, "settled" | "applies" | "revertScope">;
  run(fn: () => void): unknown;
  commit(event: DomainEvent): void;
  commitLate(event: DomainEvent): void;
}

export interface UndoSubagentReceipt {
  threadId: string;
  runId: string;
  /** The subagent's node (its item id). */
  nodeId: string;
  /** The checkpoint that closed the subagent's scope. */
  checkpointId: string;
  /** What changed on disk: the files the subagent's scope changed, back as they were when it opened. */
  files: ChangedFile[];
  /**
   * The provider's conversation still tells of the subagent's edits: no adapter call rolls back a nested
   * conversation, so it is kept (with `supportsNestedCheckpointScopes` false, the `root_checkpoint_only` degradation).
   */
  conversation: "kept";
}

/**
 * Undo one subagent's file edits, leaving the rest of its run's: the files its app-owned nested
 * checkpoint scope changed go back to their state when the scope opened. The scope is the
 * app's, so this works whatever the provider's nested scopes; a file changed again since the
 * subagent ended is a conflict, and nothing is changed then.
 */
export async function undoSubagent(
  d: UndoSubagentHost,
  p: z.output<typeof UndoSubagentInputSchema>,
): Promise<UndoSubagentReceipt> {
  const thread = findThread(d, p.threadId);
  const run = thread.runs.find((r) => r.items.some((i) => i.id === p.nodeId && i.kind === "subagent"));
  if (!run) throw new NotFoundError("subagent", p.nodeId);
  assertIdle(d, thread);
  // The subagent's scope is captured as it ends, its run's final checkpoint after the run: both are worth the wait.
  await d.checkpoints.settled(run.runId);
  assertIdle(d, thread);
  if (run.status === "rolled_back")
    throw new ConflictError(`run ${run.runId} was rolled back: the subagent's edits went with it`, {
      runId: run.runId,
    });
  const scope = scopeOf(d, thread, run, p.nodeId);
  const { files, conflicts } = await d.checkpoints.revertScope(scope.checkpointId);
  if (conflicts.length > 0)
    throw new ConflictError(
      `files the subagent changed have changed since it ended: ${conflicts.map((f) => f.path).join(", ")}`,
      { files: conflicts },
    );
  if (files.length > 0) recordConversationKept(d, thread.threadId, run, p.nodeId, files.length);
  const { threadId } = thread;
  return {
    threadId,
    runId: run.runId,
    nodeId: p.nodeId,
    checkpointId: scope.checkpointId,
    files,
    conversation: "kept",
  };
}

/** Files are not changed under a run, a rollback, or another thread working in the same directory. */
function assertIdle(d: UndoSubagentHost, thread: ThreadView): void {
  const idle =
    d.actors.threads.get(thread.threadId)?.getSnapshot().matches("idle") &&
    thread.runs.every((r) => isTerminalRunStatus(r.status));
  if (!idle) throw new ConflictError("the thread has an active or queued run, or a rollback in progress");
  const busy = sharedDirectoryBusy(d, thread.threadId);
  if (busy)
    throw new ConflictError(
      `thread ${busy} is working in the same directory; restoring files now would rewrite its work`,
      { threadId: busy },
    );
}

/** The subagent's nested scope, or why there is none. */
function scopeOf(d: UndoSubagentHost, thread: ThreadView, run: RunView, nodeId: string) {
  const scope = d.views.checkpointsOf(thread.threadId).find((c) => c.scope === "subagent" && c.nodeId === nodeId);
  if (scope?.status === "ready") return scope;
  if (scope?.status === "error")
    throw new CheckpointError(`the subagent's checkpoint failed: ${scope.message ?? "unknown error"}`, {
      checkpointId: scope.checkpointId,
    });
  const target = d.targets.get(run.providerTarget);
  if (!target) throw new NotFoundError("provider target", run.providerTarget);
  if (!d.checkpoints.applies(target.capabilities())) {
    const detail =
      "the subagent's run has no app checkpoints (checkpoints off, or the provider's record does not let the app " +
      "checkpoint its files): its edits cannot be undone on their own";
    refuse(d, { threadId: thread.threadId, runId: run.runId }, "subagent_undo_unsupported", detail);
  }
  throw new ConflictError(`subagent ${nodeId} has no checkpoint scope: it did not finish while its run went on`, {
    nodeId,
  });
}

function refuse(d: UndoSubagentHost, where: { threadId: string; runId: string }, policy: PolicyName, detail: string) {
  d.run(() => d.commit(policyEvent(where, policy, detail)));
  throw new CapabilityUnsupportedError(DEGRADATIONS[policy].capability, detail, { fallback: "refused" });
}

/**
 * The files changed, the provider's conversation did not: recorded even while the runtime closes. Without nested
 * scopes of its own, that is the provider's limit (a named degradation); with them, it is the adapter contract's,
 * which has no call to roll a nested conversation back.
 */
function recordConversationKept(d: UndoSubagentHost, threadId: string, run: RunView, nodeId: string, count: number) {
  const nested = d.targets.get(run.providerTarget)?.capabilities().checkpointing.supportsNestedCheckpointScopes;
  const undone = `subagent ${nodeId}'s edits to ${count} file(s) were undone`;
  d.commitLate(
    nested
      ? {
          type: "warning",
          threadId,
          runId: run.runId,
          message:
            `${undone}; the provider keeps nested checkpoint scopes, but no adapter call rolls back ` +
            "a subagent's conversation: the provider's conversation still tells of those edits",
        }
      : policyEvent(
          { threadId, runId: run.runId },
          "root_checkpoint_only",
          `${undone}; the provider cannot roll back the subagent's own conversation: it still tells of those edits`,
        ),
  );
}
