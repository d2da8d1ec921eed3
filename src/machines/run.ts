import { and, assign, enqueueActions, setup } from "xstate";
import { canInterrupt, canSteerByInterruptRestart, canSteerNatively } from "../capabilities/index.js";
import type { AttemptReason } from "../domain/entities.js";
import {
  activeAttempt,
  eventAttempt,
  newAttempt,
  ownsRun,
  type RunContext,
  type RunEvent,
  type RunInput,
  type TerminalStatus,
} from "./runModel.js";
import { effect, outcome, policyApplied, record, refuseUnsupported, type MachineEmitted } from "./emitted.js";

export { ownsRun, type Attempt, type RunContext, type RunEvent, type RunInput } from "./runModel.js";

/**
 * One user turn, with its attempts. Only the root node of the active attempt can make the
 * run terminal; an interrupt acknowledgement never does; provider events from a
 * superseded attempt are fenced (recorded, not applied).
 */

const runSetup = setup({
  types: {
    context: {} as RunContext,
    events: {} as RunEvent,
    input: {} as RunInput,
    emitted: {} as MachineEmitted,
  },
  guards: {
    /** The event belongs to the attempt that currently owns the run. */
    isFromActiveAttempt: ({ context, event }) => ownsRun(context, eventAttempt(event)),
    /** Invariant 4: only the active attempt's root node ends the run. */
    isActiveAttemptRoot: ({ context, event }) =>
      event.type === "TURN_TERMINAL" &&
      event.attemptId === context.activeAttemptId &&
      event.nodeId === activeAttempt(context)?.rootNodeId,
    isSupersededAttemptRoot: ({ context, event }) =>
      event.type === "TURN_TERMINAL" &&
      event.attemptId === context.supersededAttemptId &&
      event.nodeId === context.attempts.find((a) => a.attemptId === event.attemptId)?.rootNodeId,
    terminalIs: ({ event }, params: { status: TerminalStatus }) =>
      event.type === "TURN_TERMINAL" && event.status === params.status,
    canSteerNatively: ({ context }) => canSteerNatively(context.capabilities),
    canSteerByInterruptRestart: ({ context }) => canSteerByInterruptRestart(context.capabilities),
    canInterrupt: ({ context }) => canInterrupt(context.capabilities),
    mayStopSessionToInterrupt: ({ context }) => context.allowSessionStopInterrupt,
    isTurnBound: ({ context }) => context.turnBound,
    interruptAlreadyRequested: ({ context }) => context.interrupt !== "none",
    hasNoPendingRequests: ({ context }) => context.pendingRequestIds.length === 0,
  },
  actions: {
    beginAttempt: enqueueActions(({ context, enqueue }, params: { reason: AttemptReason }) => {
      const steer = context.pendingSteer;
      const attempt = newAttempt(context, params.reason, steer ? steer.text : context.text);
      enqueue.assign({
        attempts: [...context.attempts, attempt],
        activeAttemptId: attempt.attemptId,
        supersededAttemptId: null,
        pendingSteer: null,
        turnBound: false,
      });
      const { threadId, runId } = context;
      enqueue.emit(record({ type: "attempt.started", threadId, runId, ...attempt }));
      enqueue.emit(record({ type: "run.state", threadId, runId, status: "starting" }));
      enqueue.emit(effect({ type: "startTurn", threadId, runId, attemptId: attempt.attemptId, text: attempt.text }));
    }),
    recordRunning: enqueueActions(({ context, enqueue }) => {
      enqueue.emit(record({ type: "run.state", threadId: context.threadId, runId: context.runId, status: "running" }));
    }),
    recordWaiting: enqueueActions(({ context, enqueue }) => {
      enqueue.emit(record({ type: "run.state", threadId: context.threadId, runId: context.runId, status: "waiting" }));
    }),
    bindTurn: enqueueActions(({ context, event, enqueue }) => {
      if (event.type !== "TURN_ACCEPTED") return;
      enqueue.assign({ turnBound: true });
      enqueue.emit(
        record({
          type: "attempt.turn_bound",
          threadId: context.threadId,
          runId: context.runId,
          attemptId: event.attemptId,
          providerThreadId: event.providerThreadId,
          providerTurnId: event.providerTurnId,
          nativeTurnRef: event.nativeTurnRef,
        }),
      );
    }),
    applyProviderEvent: enqueueActions(({ event, enqueue }) => {
      if (event.type === "PROVIDER" || event.type === "REQUEST_OPENED") enqueue.emit(record(event.event));
    }),
    trackRequest: assign({
      pendingRequestIds: ({ context, event }) =>
        event.type === "REQUEST_OPENED" ? [...context.pendingRequestIds, event.requestId] : context.pendingRequestIds,
    }),
    untrackRequest: assign({
      pendingRequestIds: ({ context, event }) =>
        event.type === "REQUEST_SETTLED"
          ? context.pendingRequestIds.filter((id) => id !== event.requestId)
          : context.pendingRequestIds,
    }),
    /** Late or foreign provider events: kept in the log for diagnosis, never applied. */
    fenceEvent: enqueueActions(({ context, event, enqueue }) => {
      const attemptId = eventAttempt(event);
      if (!attemptId) return;
      const providerEventType = event.type === "PROVIDER" || event.type === "REQUEST_OPENED" ? event.event.type : event.type;
      enqueue.emit(
        record({ type: "event.fenced", threadId: context.threadId, runId: context.runId, attemptId, providerEventType }),
      );
    }),
    requestInterrupt: enqueueActions(({ context, enqueue }, params: { deliver: boolean }) => {
      const attemptId = context.activeAttemptId!;
      const { threadId, runId } = context;
      enqueue.assign({ interrupt: params.deliver ? "sent" : "requested" });
      enqueue.emit(record({ type: "interrupt.requested", threadId, runId, attemptId, via: "native" }));
      if (params.deliver) enqueue.emit(effect({ type: "interruptTurn", threadId, runId, attemptId }));
      enqueue.emit(outcome({ command: "interrupt", via: "native", runId }));
    }),
    /** Interrupt asked for while the turn was starting: deliver it once the turn runs. */
    deliverDeferredInterrupt: enqueueActions(({ context, enqueue }) => {
      if (context.interrupt !== "requested") return;
      const { threadId, runId } = context;
      enqueue.assign({ interrupt: "sent" });
      enqueue.emit(effect({ type: "interruptTurn", threadId, runId, attemptId: context.activeAttemptId! }));
    }),
    stopSessionToInterrupt: enqueueActions(({ context, enqueue }) => {
      const attemptId = context.activeAttemptId!;
      const { threadId, runId } = context;
      enqueue.assign({ interrupt: "sent" });
      const detail = "provider cannot interrupt a turn; stopping its session (destructive)";
      enqueue.emit(policyApplied(context, "interrupt_by_session_stop", "turns.supportsInterrupt", "fallback", detail));
      enqueue.emit(record({ type: "interrupt.requested", threadId, runId, attemptId, via: "session_stop" }));
      enqueue.emit(effect({ type: "stopSession", threadId, runId, attemptId }));
      enqueue.emit(outcome({ command: "interrupt", via: "session_stop", runId }));
    }),
    refuseInterrupt: enqueueActions(({ context, enqueue }) => {
      const detail = "provider cannot interrupt a turn and stopping its session is not allowed";
      refuseUnsupported(context, "interrupt", "interrupt_unsupported", "turns.supportsInterrupt", detail).forEach((e) => enqueue.emit(e));
    }),
    reportInterruptPending: enqueueActions(({ context, enqueue }) => {
      enqueue.emit(outcome({ command: "interrupt", via: "already_requested", runId: context.runId }));
    }),
    recordInterruptAck: enqueueActions(({ context, event, enqueue }) => {
      if (event.type !== "INTERRUPT_ACKED") return;
      const { threadId, runId } = context;
      enqueue.emit(record({ type: "interrupt.acknowledged", threadId, runId, attemptId: event.attemptId }));
    }),
    steerNatively: enqueueActions(({ context, event, enqueue }) => {
      if (event.type !== "STEER") return;
      const { threadId, runId } = context;
      const attemptId = context.activeAttemptId!;
      enqueue.emit(record({ type: "steer.applied", threadId, runId, attemptId, messageId: event.messageId, text: event.text, via: "native" }));
      enqueue.emit(effect({ type: "steerTurn", threadId, runId, attemptId, text: event.text }));
      enqueue.emit(outcome({ command: "steer", via: "native", runId, attemptId }));
    }),
    /** Degradation: supersede the active attempt, interrupt it, restart with the steer text. */
    steerByInterruptRestart: enqueueActions(({ context, event, enqueue }) => {
      if (event.type !== "STEER") return;
      const { threadId, runId } = context;
      const old = activeAttempt(context)!;
      enqueue.assign({
        supersededAttemptId: old.attemptId,
        pendingSteer: { text: event.text, messageId: event.messageId },
        activeAttemptId: null,
      });
      const detail = `attempt ${old.ordinal} superseded; attempt ${old.ordinal + 1} will carry the steer`;
      enqueue.emit(policyApplied(context, "steer_by_interrupt_restart", "turns.supportsActiveSteering", "fallback", detail));
      enqueue.emit(record({ type: "attempt.terminal", threadId, runId, attemptId: old.attemptId, status: "superseded" }));
      enqueue.emit(
        record({ type: "steer.applied", threadId, runId, attemptId: old.attemptId, messageId: event.messageId, text: event.text, via: "interrupt_restart" }),
      );
      enqueue.emit(effect({ type: "interruptTurn", threadId, runId, attemptId: old.attemptId }));
      enqueue.emit(outcome({ command: "steer", via: "interrupt_restart", runId, attemptId: old.attemptId }));
    }),
    refuseSteer: enqueueActions(({ context, enqueue }) => {
      const detail = "provider supports neither native steering nor interrupt-restart";
      refuseUnsupported(context, "steer", "steer_unsupported", "turns.supportsActiveSteering", detail).forEach((e) => enqueue.emit(e));
    }),
    /** Interrupt during an interrupt-restart: drop the steer; the old attempt's terminal ends the run. */
    interruptPendingRestart: enqueueActions(({ context, enqueue }) => {
      const { threadId, runId } = context;
      enqueue.assign({ interrupt: "sent", pendingSteer: null });
      enqueue.emit(record({ type: "interrupt.requested", threadId, runId, attemptId: context.supersededAttemptId, via: "native" }));
      enqueue.emit(outcome({ command: "interrupt", via: "native", runId }));
    }),
    refuseSteerWhileStarting: enqueueActions(({ enqueue }) => {
      enqueue.emit(outcome({ command: "steer", refused: "conflict", detail: "the run's turn is still starting; steer once it runs" }));
    }),
    refuseSteerWhileRestarting: enqueueActions(({ enqueue }) => {
      enqueue.emit(outcome({ command: "steer", refused: "conflict", detail: "a steer is already restarting this run" }));
    }),
    /** Closes the superseded attempt's open nodes once its terminal arrives. */
    settleSupersededAttempt: enqueueActions(({ context, event, enqueue }) => {
      if (event.type !== "TURN_TERMINAL") return;
      const { threadId, runId } = context;
      enqueue.emit({ type: "settle", threadId, runId, attemptId: event.attemptId, status: "interrupted", reason: "attempt_superseded" });
    }),
    finishRun: enqueueActions(
      ({ context, event, enqueue }, params: { status: TerminalStatus; reason: string | null }) => {
        const { threadId, runId } = context;
        const reason = params.reason ?? (event.type === "CANCEL" ? event.reason : null);
        const failure =
          event.type === "TURN_TERMINAL" || event.type === "START_FAILED"
            ? event.failure
            : event.type === "SESSION_LOST"
              ? { failureClass: "provider_session_lost", message: event.message, retryable: true }
              : null;
        const attemptId = context.activeAttemptId ?? context.supersededAttemptId;
        if (attemptId) {
          enqueue.emit({ type: "settle", threadId, runId, attemptId, status: params.status, reason: `run_${params.status}` });
          enqueue.emit(record({ type: "attempt.terminal", threadId, runId, attemptId, status: params.status }));
        }
        enqueue.emit(record({ type: "run.terminal", threadId, runId, status: params.status, reason, failure }));
        enqueue.emit(effect({ type: "runFinished", threadId, runId, status: params.status }));
      },
    ),
    cancelQueued: enqueueActions(({ context, event, enqueue }) => {
      const { threadId, runId } = context;
      if (event.type === "INTERRUPT") {
        enqueue.emit(record({ type: "interrupt.requested", threadId, runId, attemptId: null, via: "not_started" }));
        enqueue.emit(outcome({ command: "interrupt", via: "not_started", runId }));
      }
      const reason = event.type === "CANCEL" ? event.reason : "interrupted_before_start";
      enqueue.emit(record({ type: "run.terminal", threadId, runId, status: "cancelled", reason, failure: null }));
      enqueue.emit(effect({ type: "runFinished", threadId, runId, status: "cancelled" }));
    }),
  },
});

/** The active attempt's root terminal ends the run with the provider's status; anything else is fenced. */
const rootTerminal = [
  ...(["completed", "interrupted", "failed", "cancelled"] as const).map((status) => ({
    guard: and(["isActiveAttemptRoot", { type: "terminalIs" as const, params: { status } }]),
    target: `#run.${status}`,
    actions: { type: "finishRun" as const, params: { status, reason: null } },
  })),
  { actions: "fenceEvent" as const },
];

/** The runtime gives up on a started run (closing, or recovering): it ends cancelled, settled. */
const cancelStarted = { target: "#run.cancelled", actions: { type: "finishRun" as const, params: { status: "cancelled" as const, reason: null } } };

/** Host or session gone: the run fails, unless the caller asked for it by stopping the session. */
const sessionLost = [
  {
    guard: "interruptAlreadyRequested" as const,
    target: "#run.interrupted",
    actions: { type: "finishRun" as const, params: { status: "interrupted" as const, reason: "session_stopped_for_interrupt" } },
  },
  {
    target: "#run.failed",
    actions: { type: "finishRun" as const, params: { status: "failed" as const, reason: "provider_session_lost" } },
  },
];

export const runMachine = runSetup.createMachine({
  id: "run",
  context: ({ input }) => ({
    threadId: input.threadId,
    runId: input.runId,
    text: input.text,
    capabilities: input.capabilities,
    allowSessionStopInterrupt: input.allowSessionStopInterrupt ?? false,
    attempts: [],
    activeAttemptId: null,
    supersededAttemptId: null,
    pendingSteer: null,
    turnBound: false,
    interrupt: "none",
    pendingRequestIds: [],
  }),
  initial: "queued",
  states: {
    queued: {
      on: {
        START: { target: "starting", actions: { type: "beginAttempt", params: { reason: "initial" } } },
        CANCEL: { target: "cancelled", actions: "cancelQueued" },
        INTERRUPT: { target: "cancelled", actions: "cancelQueued" },
      },
    },
    starting: {
      on: {
        TURN_ACCEPTED: { guard: "isFromActiveAttempt", target: "active", actions: "bindTurn" },
        TURN_STARTED: { guard: "isFromActiveAttempt", target: "active" },
        START_FAILED: {
          guard: "isFromActiveAttempt",
          target: "failed",
          actions: { type: "finishRun", params: { status: "failed", reason: "start_failed" } },
        },
        INTERRUPT: [
          { guard: "interruptAlreadyRequested", actions: "reportInterruptPending" },
          { guard: "canInterrupt", actions: { type: "requestInterrupt", params: { deliver: false } } },
          { guard: "mayStopSessionToInterrupt", actions: "stopSessionToInterrupt" },
          { actions: "refuseInterrupt" },
        ],
        STEER: { actions: "refuseSteerWhileStarting" },
        TURN_TERMINAL: rootTerminal,
        SESSION_LOST: sessionLost,
        CANCEL: cancelStarted,
      },
    },
    active: {
      entry: ["recordRunning", "deliverDeferredInterrupt"],
      initial: "running",
      states: {
        running: {
          on: {
            REQUEST_OPENED: {
              guard: "isFromActiveAttempt",
              target: "waiting",
              actions: ["trackRequest", "applyProviderEvent"],
            },
          },
        },
        waiting: {
          entry: "recordWaiting",
          on: {
            REQUEST_OPENED: { guard: "isFromActiveAttempt", actions: ["trackRequest", "applyProviderEvent"] },
            REQUEST_SETTLED: [
              { guard: "hasNoPendingRequests", actions: "untrackRequest" },
              { actions: "untrackRequest", target: "settlingRequest" },
            ],
          },
        },
        /** Transient: back to running when the last pending request settled. */
        settlingRequest: {
          always: [{ guard: "hasNoPendingRequests", target: "running", actions: "recordRunning" }, { target: "waiting" }],
        },
      },
      on: {
        TURN_ACCEPTED: { guard: "isFromActiveAttempt", actions: "bindTurn" },
        INTERRUPT: [
          { guard: "interruptAlreadyRequested", actions: "reportInterruptPending" },
          { guard: "canInterrupt", actions: { type: "requestInterrupt", params: { deliver: true } } },
          { guard: "mayStopSessionToInterrupt", actions: "stopSessionToInterrupt" },
          { actions: "refuseInterrupt" },
        ],
        INTERRUPT_ACKED: { actions: "recordInterruptAck" },
        TURN_TERMINAL: rootTerminal,
        SESSION_LOST: sessionLost,
        CANCEL: cancelStarted,
        STEER: [
          { guard: "canSteerNatively", actions: "steerNatively" },
          { guard: "canSteerByInterruptRestart", target: "restarting", actions: "steerByInterruptRestart" },
          { actions: "refuseSteer" },
        ],
      },
    },
    /** Interrupt-restart steering: the superseded attempt's terminal starts attempt N+1. */
    restarting: {
      on: {
        TURN_TERMINAL: [
          { guard: "isSupersededAttemptRoot", target: "starting", actions: ["settleSupersededAttempt", { type: "beginAttempt", params: { reason: "steering_restart" } }] },
        ],
        INTERRUPT_ACKED: { actions: "recordInterruptAck" },
        SESSION_LOST: sessionLost,
        CANCEL: cancelStarted,
        STEER: { actions: "refuseSteerWhileRestarting" },
        INTERRUPT: {
          target: "interruptingRestart",
          actions: "interruptPendingRestart",
        },
      },
    },
    /** Interrupted while a restart was pending: the old attempt's terminal ends the run. */
    interruptingRestart: {
      on: {
        TURN_TERMINAL: {
          guard: "isSupersededAttemptRoot",
          target: "interrupted",
          actions: { type: "finishRun", params: { status: "interrupted", reason: "interrupted_during_steer" } },
        },
        INTERRUPT: { actions: "reportInterruptPending" },
        INTERRUPT_ACKED: { actions: "recordInterruptAck" },
        SESSION_LOST: sessionLost,
        CANCEL: cancelStarted,
      },
    },
    completed: { type: "final" },
    interrupted: { type: "final" },
    failed: { type: "final" },
    cancelled: { type: "final" },
  },
  on: {
    PROVIDER: [{ guard: "isFromActiveAttempt", actions: "applyProviderEvent" }, { actions: "fenceEvent" }],
    REQUEST_OPENED: { actions: "fenceEvent" },
    REQUEST_SETTLED: { actions: "untrackRequest" },
    TURN_TERMINAL: { actions: "fenceEvent" },
  },
});
