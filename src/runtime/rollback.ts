import type { ProviderThreadSnapshot, RollbackResult } from "../adapters/contract.js";
import type { ChangedFile } from "../domain/entities.js";
import { canReadConversation, canRollbackProvider } from "../capabilities/predicates.js";
import { ClosedError, ConflictError, NotFoundError, ProviderError } from "../domain/errors.js";
import { redact } from "../domain/redact.js";
import { policyEvent, type Effect } from "../machines/emitted.js";
import type { RollbackRequest } from "../machines/thread.js";
import type { Actors } from "./actors.js";
import type { Checkpoints } from "./checkpoints/checkpoints.js";
import type { LiveSession } from "./targetTypes.js";
import type { Target } from "./targets.js";
import type { DomainEvent, DomainEventOf } from "../domain/events.js";
import {
  isTerminalRunStatus,
  type Projections,
  type ProviderThreadRecord,
  type RunView,
  type ThreadView,
} from "./projections.js";

/**
 * What rollback needs of the runtime: its read models, targets and actors, the checkpoint store, and the write path.
 */
/** What planning a rollback reads (the affordances read it too). */
export type RollbackPlanning = Pick<RollbackHost, "views" | "targets">;

export interface RollbackHost {
  readonly views: Projections;
  readonly targets: ReadonlyMap<string, Target>;
  readonly actors: Actors;
  readonly checkpoints: Checkpoints;
  commit(event: DomainEvent): void;
  commitLate(event: DomainEvent): void;
  act(fn: () => void): void;
  run(fn: () => void): unknown;
  whenDurable(seq?: number): Promise<void>;
}

/**
 * Rollback to run N: the provider's conversation first (when it can, and every later turn
 * ran on the provider thread it would roll back), then the filesystem checkpoint of run N;
 * later runs become `rolled_back`, later checkpoints stale. A provider that cannot follow
 * is marked divergent, and its thread is rebuilt from the app's history on the next run.
 */

export interface RollbackPlan {
  toRun: RunView;
  laterRuns: RunView[];
  /** The provider thread that ran the latest later turn (what a native rollback rolls back). */
  providerThread: ProviderThreadRecord | null;
  laterTurns: number;
  laterElsewhere: boolean;
  /** Every provider thread whose conversation holds a later run. */
  affected: ProviderThreadRecord[];
}

export interface RollbackReceipt {
  threadId: string;
  toRunId: string;
  rolledBackRunIds: string[];
  provider: "rolled_back" | "divergent" | "not_needed";
  checkpointId: string | null;
  filesRestored: boolean;
  files: ChangedFile[];
}

/** Another thread working in the same directory: restoring files now would rewrite its work. */
export function sharedDirectoryBusy(rt: RollbackPlanning, threadId: string): string | null {
  const cwd = rt.views.threads.get(threadId)!.cwd;
  for (const other of rt.views.threads.values()) {
    if (other.threadId !== threadId && other.cwd === cwd && other.runs.some((r) => !isTerminalRunStatus(r.status)))
      return other.threadId;
  }
  return null;
}

export function planRollback(rt: RollbackPlanning, threadId: string, toRunId: string): RollbackPlan {
  const thread = rt.views.threads.get(threadId)!;
  const toRun = thread.runs.find((r) => r.runId === toRunId);
  if (!toRun) throw new NotFoundError("run", toRunId);
  if (!isTerminalRunStatus(toRun.status) || toRun.status === "rolled_back") {
    throw new ConflictError(`run ${toRunId} is ${toRun.status}; a rollback goes to a finished run`, {
      runId: toRunId,
      status: toRun.status,
    });
  }
  const laterRuns = thread.runs.filter((r) => r.ordinal > toRun.ordinal && r.status !== "rolled_back");
  const turns = laterRuns
    .flatMap((r) => r.attempts)
    .filter((a) => a.providerTurnId !== null && a.providerThreadId !== null);
  const lastThreadId = turns.at(-1)?.providerThreadId ?? null;
  const providerThread = lastThreadId ? (rt.views.providerThreadsById.get(lastThreadId) ?? null) : null;
  const later = new Set(laterRuns.map((r) => r.runId));
  const affected = [...rt.views.providerThreadsById.values()].filter(
    (p) => p.threadId === threadId && [...p.seenRunIds].some((id) => later.has(id)),
  );
  return {
    toRun,
    laterRuns,
    providerThread,
    laterTurns: turns.filter((a) => a.providerThreadId === lastThreadId).length,
    laterElsewhere:
      turns.some((a) => a.providerThreadId !== lastThreadId) || affected.some((p) => p !== providerThread),
    affected,
  };
}

/** What the thread machine's rollback guards read. */
export function rollbackRequest(rt: RollbackPlanning, plan: RollbackPlan): RollbackRequest {
  const targetId = plan.providerThread?.providerTarget ?? plan.toRun.providerTarget;
  const target = rt.targets.get(targetId);
  if (!target) throw new NotFoundError("provider target", targetId);
  return {
    toRunId: plan.toRun.runId,
    capabilities: target.capabilities(),
    hasCheckpoint: rt.views.finalCheckpoint(plan.toRun.runId) !== undefined,
    laterTurns: plan.laterTurns,
    laterElsewhere: plan.laterElsewhere,
  };
}

/** Performs the rollback the thread machine chose; the thread gets ROLLBACK_DONE whatever happens. */
export async function performRollback(
  rt: RollbackHost,
  effect: Extract<Effect, { type: "rollbackThread" }>,
): Promise<RollbackReceipt> {
  const { threadId, toRunId } = effect;
  try {
    const plan = planRollback(rt, threadId, toRunId);
    rt.commit({ type: "rollback.started", threadId, toRunId, via: effect.via });
    let provider: RollbackReceipt["provider"] =
      effect.via === "files_only" ? "not_needed" : effect.via === "divergent" ? "divergent" : "rolled_back";
    if (effect.via === "provider_rollback") {
      try {
        await rollbackProvider(rt, plan);
      } catch (error) {
        provider = "divergent";
        const files = rt.views.finalCheckpoint(toRunId)
          ? "files are restored"
          : "no checkpoint: files are not restored";
        const why = redact(error instanceof Error ? error.message : String(error));
        const what = error instanceof ProviderDeclined ? "no provider rollback" : "provider rollback failed";
        const detail = `${what} (${why}); ${files} and the provider thread is marked divergent`;
        const capability =
          error instanceof ProviderDeclined ? "checkpointing.providerCanRollbackConversation" : undefined;
        rt.commitLate(policyEvent({ threadId, runId: toRunId }, "rollback_divergent", detail, capability));
      }
    }
    const rolledBackRunIds = plan.laterRuns.map((r) => r.runId);
    const native = provider === "rolled_back" ? plan.providerThread : null;
    const divergentProviderThreadIds = plan.affected.filter((p) => p !== native).map((p) => p.providerThreadId);
    const outcome = {
      rolledBackRunIds,
      provider,
      providerThreadId: native?.providerThreadId ?? null,
      divergentProviderThreadIds,
    };
    const checkpoint = rt.views.finalCheckpoint(toRunId);
    const restored = checkpoint
      ? await restoreFiles(rt, { threadId, toRunId, checkpointId: checkpoint.checkpointId, ...outcome })
      : null;
    const files = restored ?? [];
    const filesRestored = restored !== null;
    const checkpointId = filesRestored ? checkpoint!.checkpointId : null;
    // The provider and the files have changed: recorded even while the runtime is closing.
    rt.commitLate({ type: "rollback.applied", threadId, toRunId, ...outcome, checkpointId, files });
    return { threadId, toRunId, rolledBackRunIds, provider, checkpointId, filesRestored, files };
  } finally {
    rt.act(() => rt.actors.threads.get(threadId)?.send({ type: "ROLLBACK_DONE" }));
  }
}

export type RestoreStarted = DomainEventOf<"checkpoint.restore_started">;

/**
 * The file step of a rollback; null when the files were not restored. It is announced
 * (`checkpoint.restore_started`, with the rollback's outcome) and durable before the first
 * file changes, so a runtime that dies in the middle leaves the next one what it needs to
 * finish (finishAnnouncedRestores).
 */
async function restoreFiles(
  rt: RollbackHost,
  announce: Omit<RestoreStarted, "type" | "files">,
): Promise<ChangedFile[] | null> {
  const { threadId, toRunId, checkpointId } = announce;
  let announced: ChangedFile[] | null = null;
  try {
    return await rt.checkpoints.restore(checkpointId, async (files) => {
      rt.run(() => rt.commit({ type: "checkpoint.restore_started", ...announce, files }));
      announced = files;
      await rt.whenDurable();
    });
  } catch (error) {
    // The store closed under the restore (the runtime is closing): left announced, the next runtime finishes it.
    if (announced && error instanceof ClosedError) throw error;
    const reason = redact(error instanceof Error ? error.message : String(error));
    const message = `files were not restored to checkpoint ${checkpointId}: ${reason}`;
    rt.commitLate({ type: "warning", threadId, runId: toRunId, message });
    if (announced)
      rt.commitLate({
        type: "checkpoint.restore_settled",
        threadId,
        toRunId,
        checkpointId,
        outcome: "unknown",
        files: announced,
        message: unknownState(announced, reason),
      });
    return null;
  }
}

/** The message names the first files; the event's `files` has them all. */
export function unknownState(files: ChangedFile[], reason: string): string {
  const named =
    files
      .slice(0, 20)
      .map((f) => f.path)
      .join(", ") + (files.length > 20 ? ` and ${files.length - 20} more` : "");
  return (
    `the restore stopped part way (${reason}); ` +
    `each of these files holds either its state before the rollback or the checkpoint's: ${named}`
  );
}

async function rollbackProvider(rt: RollbackHost, plan: RollbackPlan): Promise<void> {
  const record = plan.providerThread!;
  const target = rt.targets.get(record.providerTarget)!;
  const thread = rt.views.threads.get(record.threadId)!;
  const session = await target.ensureSession(thread.threadId, thread.cwd, plan.laterRuns.at(-1)?.model ?? thread.model);
  // Claimed while the provider rolls back: an idle deadline must not stop the session under it.
  rt.act(() => target.claim(session.sessionId));
  try {
    await rollbackIn(rt, plan, target, thread, session);
  } finally {
    rt.act(() => target.release(session.sessionId));
  }
}

async function rollbackIn(
  rt: RollbackHost,
  plan: RollbackPlan,
  target: Target,
  thread: ThreadView,
  session: LiveSession,
): Promise<void> {
  const record = plan.providerThread!;
  const caps = session.capabilities;
  // The record in force decides (it may not be the one the plan read): both flags must say the conversation rolls back.
  if (!canRollbackProvider(caps)) throw new ProviderDeclined(target.id);
  if (!target.adapter.rollbackThread) throw new Error(`${target.id} has no rollbackThread`);
  const loaded = await target.ensureThread(thread.threadId, session);
  const address = { sessionId: session.sessionId, thread: loaded.handle };
  // A provider that can show its conversation is checked: the cut must drop exactly the later turns.
  const read = canReadConversation(caps) ? target.adapter.readThreadSnapshot?.bind(target.adapter) : undefined;
  const before = read ? (await read(address)).turns.length : null;
  const returned: unknown = await target.adapter.rollbackThread({ ...address, turns: plan.laterTurns });
  // Adapters written before `RollbackResult` returned the bare snapshot.
  const result: RollbackResult =
    returned && typeof returned === "object"
      ? "turns" in returned
        ? { snapshot: returned as ProviderThreadSnapshot }
        : (returned as RollbackResult)
      : {};
  if (result.handle) {
    // The cut made a new native thread: the provider thread lives there from now on.
    const { threadRef, resumeCursor } = result.handle;
    const via = "rolled_back" as const;
    rt.commitLate({
      type: "provider_thread.bound",
      threadId: thread.threadId,
      providerThreadId: record.providerThreadId,
      providerTarget: record.providerTarget,
      sessionId: session.sessionId,
      nativeThreadRef: threadRef,
      resumeCursor,
      via,
    });
    target.forgetThread(thread.threadId);
  }
  // Only a record that declares it makes the returned snapshot the conversation after the cut.
  const returnedSnapshot = caps.checkpointing.providerRollbackReturnsSnapshot ? result.snapshot : undefined;
  if (caps.checkpointing.providerRollbackReturnsSnapshot && !returnedSnapshot)
    throw new ProviderError(`${target.id} declares that its rollback returns a snapshot, and returned none`);
  if (returnedSnapshot) keepsNoDroppedTurn(plan, returnedSnapshot);
  if (read && before !== null) {
    const after =
      returnedSnapshot ??
      (await read(result.handle ? { ...address, thread: { ...result.handle, cwd: thread.cwd } } : address));
    const kept = after.turns.length;
    if (kept !== before - plan.laterTurns)
      throw new ProviderError(`the provider kept ${kept} of ${before} turns after dropping ${plan.laterTurns}`);
  }
}

/** The provider's record says it cannot roll its conversation back: it is not asked to. */
class ProviderDeclined extends Error {
  constructor(targetId: string) {
    super(
      `${targetId}'s record says it cannot roll its conversation back (checkpointing.providerCanRollbackConversation)`,
    );
  }
}

/** The conversation after the cut must not hold a turn the rollback dropped (where the app knows its native ref). */
function keepsNoDroppedTurn(plan: RollbackPlan, snapshot: ProviderThreadSnapshot): void {
  const dropped = new Set(
    plan.laterRuns
      .flatMap((r) => r.attempts)
      .filter((a) => a.providerThreadId === plan.providerThread!.providerThreadId && a.nativeTurnRef !== null)
      .map((a) => a.nativeTurnRef),
  );
  const kept = snapshot.turns.find((t) => t.turnRef !== null && dropped.has(t.turnRef));
  if (kept) throw new ProviderError(`the provider's snapshot after the rollback still holds turn ${kept.turnRef}`);
}
