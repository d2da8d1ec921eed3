import type { DomainEvent } from "../domain/events.js";
import { DEFAULT_RUNTIME_MODE } from "../domain/entities.js";
import { addItem, foldRun, isTerminalRunStatus, type RunModels } from "./projectionRuns.js";
import { foldCheckpoint, foldRollback, type HistoryModels } from "./projectionHistory.js";
import type {
  CheckpointView,
  HandoffRecord,
  ProviderThreadRecord,
  RequestView,
  RunView,
  SubagentThreadRecord,
  ThreadView,
  Transfer,
  TurnItem,
} from "./projectionTypes.js";
import type { LogRecord } from "./store/eventLog.js";
import { trackLiveTurns, type LiveTurns } from "./ingest/liveTurns.js";
import {
  PUBLIC_MAPS,
  projectionStateShape,
  trackAnnouncedRestores,
  type AnnouncedRestores,
  type ProjectionState,
} from "./projectionState.js";

export type * from "./projectionTypes.js";
export { isTerminalRunStatus };

/**
 * Read models folded from the log. The same fold runs live and on reopen, so what a
 * caller reads after a crash is exactly what it could have read before. Runs, their
 * transcript items and requests are folded in projectionRuns.ts; threads, provider threads,
 * handoffs, transfers, sessions, checkpoints and receipts here.
 */

/**
 * The meaning of the fold, for projection snapshots (src/runtime/snapshots/): bump it whenever what `apply` makes of
 * the log changes (a field added to a view, an event folded differently, a tracker added...). A snapshot taken with
 * another fold version is ignored, and the log replayed.
 */
export const FOLD_VERSION = 1;

/** Event fields that carry an allocated app id. */
const ID_FIELDS = [
  "threadId",
  "runId",
  "userMessageId",
  "messageId",
  "sessionId",
  "providerThreadId",
  "handoffId",
  "transferId",
  "checkpointId",
  "commandId",
] as const;
/** Only these events introduce an app id (the rest reference ids already known). */
const INTRODUCES_IDS: ReadonlySet<DomainEvent["type"]> = new Set([
  "thread.created",
  "run.created",
  "steer.applied",
  "session.started",
  "provider_thread.bound",
  "handoff.created",
  "fork.recorded",
  "subagent.thread_bound",
  "checkpoint.captured",
  "checkpoint.failed",
  "command.receipt",
]);

export class Projections {
  readonly threads = new Map<string, ThreadView>();
  readonly runs = new Map<string, RunView>();
  readonly requests = new Map<string, RequestView>();
  /** Latest provider thread per (app thread, target): what a resume starts from. */
  readonly providerThreads = new Map<string, ProviderThreadRecord>();
  readonly providerThreadsById = new Map<string, ProviderThreadRecord>();
  /** Handoffs per app thread, oldest first. */
  readonly handoffs = new Map<string, HandoffRecord[]>();
  #receipts = new Map<string, { command: string; receipt: unknown }>();
  /** Last known status of every provider session (what recovery must mark stopped). */
  readonly sessions = new Map<string, { providerTarget: string; status: string }>();
  /** Fork transfers by forked thread; realised (native or portable) at its first run. */
  readonly transfers = new Map<string, Transfer>();
  /** Addressable subagent threads by their subagent's node id. */
  readonly subagentThreads = new Map<string, SubagentThreadRecord>();
  readonly checkpoints = new Map<string, CheckpointView>();
  /** When each rolled-back run was rolled back (log seq): forks made before keep it in their history. */
  readonly rolledBackAt = new Map<string, number>();
  /** Rollbacks started and not yet applied, by thread (what recovery must settle after a crash). */
  readonly rollbacksInFlight = new Map<string, string>();
  #threadCheckpoints = new Map<string, CheckpointView[]>();
  #items = new Map<string, TurnItem>();
  /** What the run fold (projectionRuns.ts) reads and writes: these maps, and every transcript item by id. */
  #runModels: RunModels = {
    threads: this.threads,
    runs: this.runs,
    requests: this.requests,
    items: this.#items,
  };
  /** Every app id the log has used, so an id source that restarts never reissues one. */
  #knownIds = new Set<string>();

  /** What the history folds (projectionHistory.ts) read and write: these maps, as they are now. */
  get #historyModels(): HistoryModels {
    const { threads, runs, checkpoints, providerThreadsById, handoffs, rolledBackAt } = this;
    const [items, threadCheckpoints] = [this.#items, this.#threadCheckpoints];
    return { threads, runs, items, checkpoints, threadCheckpoints, providerThreadsById, handoffs, rolledBackAt };
  }

  get receipts(): Map<string, { command: string; receipt: unknown }> {
    return this.#receipts;
  }
  /** (app thread, target) pairs whose provider thread was closed as broken. */
  #replaced = new Set<string>();
  /** File restores announced and not finished: what open must finish (rollbackRecovery.ts). */
  #restores: AnnouncedRestores = trackAnnouncedRestores();
  /** The turns the log leaves open: what open takes up where a host outlived the runtime (ingest/liveTurns.ts). */
  #liveTurns: LiveTurns = trackLiveTurns();
  head = 0;

  /** File restores announced and not followed by their rollback, oldest first. */
  announcedRestores(): ReturnType<AnnouncedRestores["pending"]> {
    return this.#restores.pending();
  }

  get liveTurns(): LiveTurns {
    return this.#liveTurns;
  }

  /**
   * Everything the fold made, private maps included, sharing the live objects (nothing is copied): encode it before
   * the next fold. `loadState` takes it back.
   */
  state(): ProjectionState {
    const maps = Object.fromEntries(PUBLIC_MAPS.map((key) => [key, this[key]])) as Pick<
      ProjectionState,
      (typeof PUBLIC_MAPS)[number]
    >;
    return {
      head: this.head,
      ...maps,
      threadCheckpoints: this.#threadCheckpoints,
      items: this.#items,
      knownIds: this.#knownIds,
      receipts: this.#receipts,
      replaced: this.#replaced,
      restores: this.#restores.state,
      liveTurns: this.#liveTurns.state,
    };
  }

  /**
   * Becomes the fold that `state()` described, at record `head` (of an empty projection: at open, before anything
   * is folded); throws, having changed nothing, when `data` is not such a state. The objects are taken as they are,
   * so their sharing is the one they were written with.
   */
  loadState(data: unknown, head: number): void {
    if (this.head !== 0) throw new Error("internal: projections load a state only before they fold");
    const parsed = projectionStateShape.safeParse(data);
    if (!parsed.success) throw new Error(`its state is not a projection state (${parsed.error.issues[0]?.message})`);
    const state = parsed.data as ProjectionState;
    if (state.head !== head) throw new Error(`its state is at record ${state.head}, not ${head}`);
    // The map objects stay (the run fold and others hold them); their entries become the state's, in its order.
    for (const key of PUBLIC_MAPS) refill(this[key] as Map<unknown, unknown>, state[key]);
    this.#items = state.items; // a snapshot's items are read on demand (snapshots/itemIndex.ts)
    this.#runModels = { threads: this.threads, runs: this.runs, requests: this.requests, items: this.#items };
    this.#threadCheckpoints = state.threadCheckpoints;
    this.#knownIds = state.knownIds;
    this.#receipts = state.receipts; // a snapshot's are read on first use (snapshots/lazyCollections.ts)
    this.#replaced = state.replaced;
    this.#restores = trackAnnouncedRestores(state.restores);
    this.#liveTurns = trackLiveTurns(state.liveTurns);
    this.head = state.head;
  }

  isKnownId(id: string): boolean {
    return this.#knownIds.has(id);
  }

  static providerThreadKey(threadId: string, providerTarget: string): string {
    return `${threadId}\u0000${providerTarget}`;
  }

  apply({ seq, event }: LogRecord<DomainEvent>): void {
    this.head = seq;
    this.#restores.fold(event);
    this.#liveTurns.fold(event);
    if (INTRODUCES_IDS.has(event.type)) {
      for (const key of ID_FIELDS) {
        const value = (event as Record<string, unknown>)[key];
        if (typeof value === "string") this.#knownIds.add(value);
      }
    }
    const thread = "threadId" in event && event.threadId ? this.threads.get(event.threadId) : undefined;
    switch (event.type) {
      case "thread.created": {
        const { type: _t, ...fields } = event;
        this.threads.set(event.threadId, { ...fields, runtimeMode: DEFAULT_RUNTIME_MODE, runs: [] });
        return;
      }
      case "run.created":
      case "run.state":
      case "run.terminal":
      case "attempt.started":
      case "attempt.terminal":
      case "node.started":
      case "node.delta":
      case "node.completed":
      case "plan.updated":
      case "todo.updated":
      case "plan.proposed":
      case "request.opened":
      case "request.resolved":
      case "request.closed":
      case "interrupt.requested":
      case "interrupt.failed":
      case "steer.applied":
      case "policy.applied":
        return foldRun(this.#runModels, event, seq, thread);
      case "attempt.turn_bound": {
        foldRun(this.#runModels, event, seq, thread);
        const providerThread = this.providerThreadsById.get(event.providerThreadId);
        if (providerThread) {
          providerThread.seenRunIds.add(event.runId);
          for (const handoff of this.handoffs.get(event.threadId) ?? []) {
            if (handoff.consumed || handoff.providerThreadId !== event.providerThreadId) continue;
            handoff.consumed = true;
            for (const runId of handoff.coveredRunIds) {
              providerThread.seenRunIds.add(runId);
              providerThread.omittedRunIds.delete(runId);
            }
            for (const runId of handoff.omittedRunIds)
              if (!providerThread.seenRunIds.has(runId)) providerThread.omittedRunIds.add(runId);
          }
        }
        return;
      }
      case "provider_thread.bound": {
        const known = this.providerThreadsById.get(event.providerThreadId);
        const { providerThreadId, threadId, providerTarget, sessionId, nativeThreadRef, resumeCursor, via } = event;
        const origin = known?.origin ?? via;
        const record: ProviderThreadRecord = {
          ...{ providerThreadId, threadId, providerTarget, sessionId, nativeThreadRef, resumeCursor, origin },
          seenRunIds: known?.seenRunIds ?? new Set(),
          omittedRunIds: known?.omittedRunIds ?? new Set(),
          divergent: known?.divergent ?? false,
        };
        this.providerThreads.set(Projections.providerThreadKey(threadId, providerTarget), record);
        this.providerThreadsById.set(providerThreadId, record);
        return;
      }
      case "provider_thread.closed": {
        const key = Projections.providerThreadKey(event.threadId, event.providerTarget);
        if (this.providerThreads.get(key)?.providerThreadId === event.providerThreadId)
          this.providerThreads.delete(key);
        this.#replaced.add(key);
        return;
      }
      case "handoff.created": {
        const { handoffId, providerThreadId, reason, coveredRunIds, omittedRunIds, text } = event;
        const earlier = this.handoffs.get(event.threadId) ?? [];
        for (const h of earlier) if (h.handoffId === event.supersedesHandoffId) h.superseded = true;
        this.handoffs.set(event.threadId, [
          ...earlier,
          {
            handoffId,
            providerThreadId,
            runId: event.runId,
            reason,
            coveredRunIds,
            omittedRunIds,
            text,
            consumed: false,
            superseded: false,
          },
        ]);
        const carrier = this.runs.get(event.runId);
        if (carrier)
          addItem(this.#runModels, carrier, {
            id: event.handoffId,
            kind: "handoff",
            status: "complete",
            attemptId: null,
            parentId: null,
            seq,
            text: event.text,
            detail: { strategy: event.strategy, reason: event.reason },
          });
        return;
      }
      case "fork.recorded":
        this.transfers.set(event.threadId, {
          transferId: event.transferId,
          parentThreadId: event.parentThreadId,
          forkedFromRunId: event.forkedFromRunId,
          resolution: null,
          seq,
          fromSubagentNodeId: event.fromSubagentNodeId ?? null,
        });
        return;
      case "subagent.thread_bound": {
        const { nodeId, threadId, runId, providerThreadId, providerTarget, sessionId, nativeThreadRef } = event;
        this.subagentThreads.set(nodeId, {
          ...{ nodeId, threadId, runId, providerThreadId, providerTarget, sessionId, nativeThreadRef },
          closeRequested: false,
        });
        // The subagent's item says it can be addressed (wait, close, fork).
        const item = this.#items.get(nodeId);
        if (item) item.detail = { ...item.detail, providerThreadId, nativeThreadRef };
        return;
      }
      case "subagent.close_requested": {
        const subagent = this.subagentThreads.get(event.nodeId);
        if (subagent) subagent.closeRequested = true;
        return;
      }
      case "fork.resolved": {
        const transfer = this.transfers.get(event.threadId);
        if (transfer) transfer.resolution = event.resolution;
        return;
      }
      case "session.started":
        this.sessions.set(event.sessionId, { providerTarget: event.providerTarget, status: "ready" });
        return;
      case "session.state":
        this.sessions.set(event.sessionId, { providerTarget: event.providerTarget, status: event.status });
        return;
      case "thread.model_changed":
        if (thread) thread.model = event.model;
        return;
      case "thread.mode_changed":
        if (thread) thread.runtimeMode = event.runtimeMode;
        return;
      case "checkpoint.captured":
      case "checkpoint.failed":
      case "checkpoint.skipped":
        return foldCheckpoint(this.#historyModels, event);
      case "rollback.started":
        this.rollbacksInFlight.set(event.threadId, event.toRunId);
        return;
      case "rollback.applied":
        this.rollbacksInFlight.delete(event.threadId);
        return foldRollback(this.#historyModels, event, seq);
      case "command.receipt":
        this.receipts.set(event.commandId, { command: event.command, receipt: event.receipt });
        return;
      default:
        return;
    }
  }

  /** Checkpoints of a thread, oldest first (stale and failed ones included). */
  checkpointsOf(threadId: string): readonly CheckpointView[] {
    return this.#threadCheckpoints.get(threadId) ?? [];
  }

  /** The ready post-run checkpoint of a run: what a rollback to it restores. */
  finalCheckpoint(runId: string): CheckpointView | undefined {
    const run = this.runs.get(runId);
    return run
      ? this.checkpointsOf(run.threadId).find(
          (c) => c.runId === runId && c.scope === "root_run" && c.phase === "final" && c.status === "ready",
        )
      : undefined;
  }

  /** A turn item by its id (node id for provider items). */
  item(id: string): TurnItem | undefined {
    return this.#items.get(id);
  }

  /** Did this app thread have a provider thread on this target that was closed as broken? */
  hadBrokenProviderThread(threadId: string, providerTarget: string): boolean {
    return this.#replaced.has(Projections.providerThreadKey(threadId, providerTarget));
  }

  pendingTransfer(threadId: string): Transfer | undefined {
    const transfer = this.transfers.get(threadId);
    return transfer?.resolution === null ? transfer : undefined;
  }

  activeRuns(): RunView[] {
    return [...this.runs.values()].filter((r) => !isTerminalRunStatus(r.status));
  }

  pendingRequests(threadId?: string): RequestView[] {
    return [...this.requests.values()].filter((r) => r.status === "pending" && (!threadId || r.threadId === threadId));
  }
}

function refill<K, V>(map: Map<K, V>, from: ReadonlyMap<K, V>): void {
  map.clear();
  for (const [key, value] of from) map.set(key, value);
}
