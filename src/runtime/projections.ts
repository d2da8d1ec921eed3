import type { DomainEvent, DomainEventOf } from "../domain/events.js";
import { TerminalRunStatusSchema, type RunStatus } from "../domain/entities.js";
import { TURN_ITEM_KIND_OF_NODE } from "../domain/items.js";
import type {
  CheckpointView,
  HandoffRecord,
  ProviderThreadRecord,
  RequestView,
  RunView,
  ThreadView,
  Transfer,
  TurnItem,
} from "./projectionTypes.js";
import type { LogRecord } from "./store/eventLog.js";

export type * from "./projectionTypes.js";

/**
 * Read models folded from the log. The same fold runs live and on reopen, so what a
 * caller reads after a crash is exactly what it could have read before.
 */

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
  "checkpoint.captured",
  "checkpoint.failed",
  "command.receipt",
]);

const TERMINAL: ReadonlySet<RunStatus> = new Set(TerminalRunStatusSchema.options);
export const isTerminalRunStatus = (status: RunStatus): boolean => TERMINAL.has(status);

export class Projections {
  readonly threads = new Map<string, ThreadView>();
  readonly runs = new Map<string, RunView>();
  readonly requests = new Map<string, RequestView>();
  /** Latest provider thread per (app thread, target): what a resume starts from. */
  readonly providerThreads = new Map<string, ProviderThreadRecord>();
  readonly providerThreadsById = new Map<string, ProviderThreadRecord>();
  /** Handoffs per app thread, oldest first. */
  readonly handoffs = new Map<string, HandoffRecord[]>();
  readonly receipts = new Map<string, { command: string; receipt: unknown }>();
  /** Last known status of every provider session (what recovery must mark stopped). */
  readonly sessions = new Map<string, { providerTarget: string; status: string }>();
  /** Fork transfers by forked thread; realised (native or portable) at its first run. */
  readonly transfers = new Map<string, Transfer>();
  readonly checkpoints = new Map<string, CheckpointView>();
  /** When each rolled-back run was rolled back (log seq): forks made before keep it in their history. */
  readonly rolledBackAt = new Map<string, number>();
  /** Rollbacks started and not yet applied, by thread (what recovery must settle after a crash). */
  readonly rollbacksInFlight = new Map<string, string>();
  #threadCheckpoints = new Map<string, CheckpointView[]>();
  #items = new Map<string, TurnItem>();
  /** Every app id the log has used, so an id source that restarts never reissues one. */
  #knownIds = new Set<string>();
  /** (app thread, target) pairs whose provider thread was closed as broken. */
  #replaced = new Set<string>();
  head = 0;

  isKnownId(id: string): boolean {
    return this.#knownIds.has(id);
  }

  static providerThreadKey(threadId: string, providerTarget: string): string {
    return `${threadId}\u0000${providerTarget}`;
  }

  apply({ seq, event }: LogRecord<DomainEvent>): void {
    this.head = seq;
    if (INTRODUCES_IDS.has(event.type)) {
      for (const key of ID_FIELDS) {
        const value = (event as Record<string, unknown>)[key];
        if (typeof value === "string") this.#knownIds.add(value);
      }
    }
    const thread = "threadId" in event && event.threadId ? this.threads.get(event.threadId) : undefined;
    const run = "runId" in event && event.runId ? this.runs.get(event.runId) : undefined;
    switch (event.type) {
      case "thread.created": {
        const { type: _t, ...fields } = event;
        this.threads.set(event.threadId, { ...fields, runs: [] });
        return;
      }
      case "run.created": {
        const view: RunView = {
          runId: event.runId,
          threadId: event.threadId,
          ordinal: event.ordinal,
          status: "queued",
          providerTarget: event.providerTarget,
          model: thread?.model ?? null,
          mode: event.mode,
          text: event.text,
          reason: null,
          failure: null,
          attempts: [],
          items: [],
          fallbacks: [],
        };
        this.runs.set(event.runId, view);
        thread?.runs.push(view);
        const intent =
          event.mode === "queue" || thread?.runs.some((r) => r !== view && !isTerminalRunStatus(r.status))
            ? "queued"
            : "turn_start";
        this.#addItem(view, {
          id: event.userMessageId,
          kind: "user_message",
          status: "complete",
          attemptId: null,
          parentId: null,
          seq,
          text: event.text,
          intent,
        });
        return;
      }
      case "run.state":
        if (run) run.status = event.status;
        return;
      case "run.terminal":
        if (!run) return;
        Object.assign(run, { status: event.status, reason: event.reason, failure: event.failure });
        if (event.failure)
          this.#addItem(run, {
            id: `err_${seq}`,
            kind: "error",
            status: "complete",
            attemptId: null,
            parentId: null,
            seq,
            text: event.failure.message,
          });
        return;
      case "attempt.started":
        run?.attempts.push({
          attemptId: event.attemptId,
          ordinal: event.ordinal,
          reason: event.reason,
          status: "running",
          providerThreadId: null,
          providerTurnId: null,
          nativeTurnRef: null,
        });
        return;
      case "attempt.turn_bound": {
        const attempt = run?.attempts.find((a) => a.attemptId === event.attemptId);
        if (attempt)
          Object.assign(attempt, {
            providerThreadId: event.providerThreadId,
            providerTurnId: event.providerTurnId,
            nativeTurnRef: event.nativeTurnRef,
          });
        const providerThread = this.providerThreadsById.get(event.providerThreadId);
        if (providerThread) {
          providerThread.seenRunIds.add(event.runId);
          for (const handoff of this.handoffs.get(event.threadId) ?? []) {
            if (handoff.consumed || handoff.providerThreadId !== event.providerThreadId) continue;
            handoff.consumed = true;
            for (const runId of handoff.coveredRunIds) providerThread.seenRunIds.add(runId);
          }
        }
        return;
      }
      case "attempt.terminal": {
        const attempt = run?.attempts.find((a) => a.attemptId === event.attemptId);
        if (attempt) attempt.status = event.status;
        return;
      }
      case "node.started": {
        const kind = TURN_ITEM_KIND_OF_NODE[event.kind];
        if (!run || !kind) return;
        const detail = event.detail ? (event.detail as Record<string, unknown>) : undefined;
        const known = this.#items.get(event.nodeId);
        if (known) {
          // The same node announced again (its start came after its first delta): one item, updated in place.
          if (run.items.includes(known))
            Object.assign(
              known,
              { parentId: event.parentNodeId },
              detail ? { detail: { ...known.detail, ...detail } } : {},
            );
          return;
        }
        this.#addItem(run, {
          id: event.nodeId,
          kind,
          status: "streaming",
          attemptId: event.attemptId,
          parentId: event.parentNodeId,
          seq,
          ...(detail ? { detail } : {}),
        });
        return;
      }
      case "node.delta": {
        const item = this.#items.get(event.nodeId);
        if (!item) return;
        if (event.stream === "text") item.text = (item.text ?? "") + event.delta;
        else item.output = (item.output ?? "") + event.delta;
        return;
      }
      case "node.completed": {
        const item = this.#items.get(event.nodeId);
        if (!item) return;
        item.status = "complete";
        if (event.text !== null && item.kind !== "subagent") item.text = event.text;
        if (event.text !== null && item.kind === "subagent") item.result = event.text;
        if (event.output !== null) item.output = event.output;
        item.detail = {
          ...item.detail,
          status: event.status,
          ...(event.exitCode !== null ? { exitCode: event.exitCode } : {}),
        };
        return;
      }
      case "plan.updated":
      case "todo.updated":
      case "plan.proposed": {
        const item = this.#items.get(event.nodeId);
        if (!item) return;
        if (event.type === "plan.proposed") Object.assign(item, { kind: "proposed_plan", text: event.text });
        else
          item.detail =
            event.type === "todo.updated"
              ? { items: event.items }
              : { steps: event.steps, explanation: event.explanation };
        return;
      }
      case "request.opened":
        this.requests.set(event.requestId, {
          requestId: event.requestId,
          threadId: event.threadId,
          runId: event.runId,
          nodeId: event.nodeId,
          kind: event.payload.kind,
          payload: event.payload,
          status: "pending",
          responseCapability: event.responseCapability,
          response: null,
          closedReason: null,
        });
        return;
      case "request.resolved":
      case "request.closed": {
        const request = this.requests.get(event.requestId);
        if (!request) return;
        if (event.type === "request.resolved") Object.assign(request, { status: "resolved", response: event.response });
        else Object.assign(request, { status: event.status, closedReason: event.reason });
        const item = this.#items.get(request.nodeId);
        if (item)
          Object.assign(item, {
            status: "complete",
            result: request.status === "resolved" ? "resolved" : request.status,
          });
        return;
      }
      case "interrupt.requested":
        if (run)
          this.#addItem(run, {
            id: `int_${seq}`,
            kind: "interrupt_request",
            status: "complete",
            attemptId: event.attemptId,
            parentId: null,
            seq,
            detail: { via: event.via },
          });
        return;
      case "interrupt.failed":
        if (run)
          this.#addItem(run, {
            id: `int_${seq}`,
            kind: "interrupt_result",
            status: "complete",
            attemptId: event.attemptId,
            parentId: null,
            seq,
            detail: { delivered: false, reason: event.reason, attempts: event.attempts },
          });
        return;
      case "steer.applied": {
        if (!run) return;
        const item: TurnItem = {
          id: event.messageId,
          kind: "user_message",
          status: "complete",
          attemptId: event.attemptId,
          parentId: null,
          seq,
          text: event.text,
          intent: "steer",
          detail: { via: event.via },
        };
        // Where the user steered, not where the provider's acknowledgement landed.
        const at = event.sentAfterSeq === undefined ? -1 : run.items.findIndex((i) => i.seq > event.sentAfterSeq!);
        if (at < 0) return this.#addItem(run, item);
        run.items.splice(at, 0, item);
        this.#items.set(item.id, item);
        return;
      }
      case "policy.applied": {
        const target = event.runId ? this.runs.get(event.runId) : undefined;
        const { policy, capability, outcome, detail } = event;
        target?.fallbacks.push({ policy, capability, outcome, detail });
        return;
      }
      case "provider_thread.bound": {
        const known = this.providerThreadsById.get(event.providerThreadId);
        const { providerThreadId, threadId, providerTarget, sessionId, nativeThreadRef, resumeCursor, via } = event;
        const origin = known?.origin ?? via;
        const record: ProviderThreadRecord = {
          ...{ providerThreadId, threadId, providerTarget, sessionId, nativeThreadRef, resumeCursor, origin },
          seenRunIds: known?.seenRunIds ?? new Set(),
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
        const { handoffId, providerThreadId, reason, coveredRunIds, text } = event;
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
            text,
            consumed: false,
            superseded: false,
          },
        ]);
        const carrier = this.runs.get(event.runId);
        if (carrier)
          this.#addItem(carrier, {
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
        });
        return;
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
      case "checkpoint.captured":
      case "checkpoint.failed":
      case "checkpoint.skipped":
        return this.#checkpoint(event);
      case "rollback.started":
        this.rollbacksInFlight.set(event.threadId, event.toRunId);
        return;
      case "rollback.applied":
        this.rollbacksInFlight.delete(event.threadId);
        return this.#rollback(event, seq);
      case "command.receipt":
        this.receipts.set(event.commandId, { command: event.command, receipt: event.receipt });
        return;
      default:
        return;
    }
  }

  #checkpoint(event: DomainEventOf<"checkpoint.captured" | "checkpoint.failed" | "checkpoint.skipped">): void {
    if (event.type === "checkpoint.skipped") {
      const item = this.#items.get(event.nodeId);
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
    this.checkpoints.set(checkpointId, view);
    this.#threadCheckpoints.set(threadId, [...(this.#threadCheckpoints.get(threadId) ?? []), view]);
  }

  /** Later runs become `rolled_back`, their checkpoints stale; a provider that could not follow is divergent. */
  #rollback(event: DomainEventOf<"rollback.applied">, seq: number): void {
    const rolledBack = new Set(event.rolledBackRunIds);
    for (const runId of rolledBack) {
      const run = this.runs.get(runId);
      if (run) run.status = "rolled_back";
      this.rolledBackAt.set(runId, seq);
    }
    for (const checkpoint of this.#threadCheckpoints.get(event.threadId) ?? []) {
      if (rolledBack.has(checkpoint.runId)) checkpoint.status = "stale";
    }
    const native = event.providerThreadId ? this.providerThreadsById.get(event.providerThreadId) : undefined;
    if (native) native.seenRunIds = this.#seenBy(native);
    for (const id of event.divergentProviderThreadIds) {
      const providerThread = this.providerThreadsById.get(id);
      if (providerThread) providerThread.divergent = true;
    }
  }

  /**
   * What a provider thread still holds after a native rollback: the runs it executed, and the handoffs carried by runs
   * still standing.
   */
  #seenBy(providerThread: ProviderThreadRecord): Set<string> {
    const seen = new Set<string>();
    const standing = (runId: string) => this.runs.get(runId)?.status !== "rolled_back";
    for (const run of this.threads.get(providerThread.threadId)?.runs ?? []) {
      if (
        standing(run.runId) &&
        run.attempts.some((a) => a.providerThreadId === providerThread.providerThreadId && a.providerTurnId !== null)
      )
        seen.add(run.runId);
    }
    for (const handoff of this.handoffs.get(providerThread.threadId) ?? []) {
      if (handoff.consumed && handoff.providerThreadId === providerThread.providerThreadId && standing(handoff.runId))
        handoff.coveredRunIds.forEach((id) => seen.add(id));
    }
    return seen;
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

  #addItem(run: RunView, item: TurnItem): void {
    run.items.push(item);
    this.#items.set(item.id, item);
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
