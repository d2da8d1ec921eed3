import type { DomainEventOf } from "../domain/events.js";
import { DEFAULT_RUNTIME_MODE, TerminalRunStatusSchema, type RunStatus } from "../domain/entities.js";
import { TURN_ITEM_KIND_OF_NODE } from "../domain/items.js";
import type { RequestView, RunView, ThreadView, TurnItem } from "./projectionTypes.js";

/**
 * The fold of runs: their status, attempts and transcript items, and the requests they open. `Projections.apply`
 * hands these events here; the threads, provider threads, handoffs, transfers and checkpoints stay in
 * projections.ts.
 */

/** The events this fold reads. */
export type RunEvent = DomainEventOf<
  | "run.created"
  | "run.state"
  | "run.terminal"
  | "attempt.started"
  | "attempt.turn_bound"
  | "attempt.terminal"
  | "node.started"
  | "node.delta"
  | "node.completed"
  | "plan.updated"
  | "todo.updated"
  | "plan.proposed"
  | "request.opened"
  | "request.resolved"
  | "request.closed"
  | "interrupt.requested"
  | "interrupt.failed"
  | "steer.applied"
  | "policy.applied"
>;

/** The read models the run fold writes (the maps `Projections` holds). */
export interface RunModels {
  readonly threads: ReadonlyMap<string, ThreadView>;
  readonly runs: Map<string, RunView>;
  readonly requests: Map<string, RequestView>;
  /** Every transcript item by its id (node id for provider items): how deltas and completions find theirs. */
  readonly items: Map<string, TurnItem>;
}

const TERMINAL: ReadonlySet<RunStatus> = new Set(TerminalRunStatusSchema.options);
export const isTerminalRunStatus = (status: RunStatus): boolean => TERMINAL.has(status);

export function addItem(models: RunModels, run: RunView, item: TurnItem): void {
  run.items.push(item);
  models.items.set(item.id, item);
}

/**
 * Folds one run event into the run models. Of `attempt.turn_bound` only the attempt's binding is folded here; what its
 * provider thread has now seen is folded in projections.ts.
 */
export function foldRun(models: RunModels, event: RunEvent, seq: number, thread: ThreadView | undefined): void {
  const run = "runId" in event && event.runId ? models.runs.get(event.runId) : undefined;
  switch (event.type) {
    case "run.created": {
      const view: RunView = {
        runId: event.runId,
        threadId: event.threadId,
        ordinal: event.ordinal,
        status: "queued",
        providerTarget: event.providerTarget,
        model: thread?.model ?? null,
        runtimeMode: thread?.runtimeMode ?? DEFAULT_RUNTIME_MODE,
        mode: event.mode,
        text: event.text,
        reason: null,
        failure: null,
        correlation: null,
        attempts: [],
        items: [],
        fallbacks: [],
      };
      models.runs.set(event.runId, view);
      thread?.runs.push(view);
      const intent =
        event.mode === "queue" || thread?.runs.some((r) => r !== view && !isTerminalRunStatus(r.status))
          ? "queued"
          : "turn_start";
      addItem(models, view, {
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
      Object.assign(run, {
        status: event.status,
        reason: event.reason,
        failure: event.failure,
        correlation: event.correlation,
      });
      if (event.failure)
        addItem(models, run, {
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
      const known = models.items.get(event.nodeId);
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
      addItem(models, run, {
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
      const item = models.items.get(event.nodeId);
      if (!item) return;
      if (event.stream === "text") item.text = (item.text ?? "") + event.delta;
      else item.output = (item.output ?? "") + event.delta;
      return;
    }
    case "node.completed": {
      const item = models.items.get(event.nodeId);
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
      const item = models.items.get(event.nodeId);
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
      models.requests.set(event.requestId, {
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
      const request = models.requests.get(event.requestId);
      if (!request) return;
      if (event.type === "request.resolved") Object.assign(request, { status: "resolved", response: event.response });
      else Object.assign(request, { status: event.status, closedReason: event.reason });
      const item = models.items.get(request.nodeId);
      if (item)
        Object.assign(item, {
          status: "complete",
          result: request.status === "resolved" ? "resolved" : request.status,
        });
      return;
    }
    case "interrupt.requested":
      if (run)
        addItem(models, run, {
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
        addItem(models, run, {
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
      if (at < 0) return addItem(models, run, item);
      run.items.splice(at, 0, item);
      models.items.set(item.id, item);
      return;
    }
    case "policy.applied": {
      const target = event.runId ? models.runs.get(event.runId) : undefined;
      const { policy, capability, outcome, detail } = event;
      target?.fallbacks.push({ policy, capability, outcome, detail });
      return;
    }
  }
}
