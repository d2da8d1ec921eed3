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
    isFromSupersededAttempt: ({ context, event }) => eventAttempt(event) !== null && eventAttempt(event) === context.supersededAttemptId,
    terminalIs: ({ event }, params: { status: TerminalStatus }) =>
      event.type === "TURN_TERMINAL" && event.status === params.status,
    canSteerNatively: ({ context }) => canSteerNatively(context.capabilities),
    canSteerByInterruptRestart: ({ context }) => canSteerByInterruptRestart(context.capabilities),
    canInterrupt: ({ context }) => canInterrupt(context.capabilities),
    mayStopSessionToInterrupt: ({ context }) => context.allowSessionStopInterrupt,
    interruptAlreadyRequested: ({ context }) => context.interrupt !== "none",
    hasNoPendingRequests: ({ context }) => context.pendingRequestIds.length === 0,
    hasDeferredSteer: ({ context }) => context.deferredSteer !== null,
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
        interrupt: "none",
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
    /** Ask the provider to stop the turn, now (`deliver`) or once it runs; the terminal decides. */
    requestInterrupt: enqueueActions(({ context, enqueue }, params: { deliver: boolean; via: "native" | "session_stop" }) => {
      const attemptId = context.activeAttemptId!;
      const { threadId, runId } = context;
      enqueue.assign({ interrupt: params.deliver ? "sent" : "requested", interruptVia: params.via, deferredSteer: null });
      if (context.deferredSteer) enqueue.emit(steerDropped(context, "the run was interrupted first"));
      if (params.via === "session_stop") {
        const detail = "provider cannot interrupt a turn; stopping its session (destructive)";
        enqueue.emit(policyApplied(context, "interrupt_by_session_stop", "turns.supportsInterrupt", "fallback", detail));
      }
      enqueue.emit(record({ type: "interrupt.requested", threadId, runId, attemptId, via: params.via }));
      if (params.deliver) enqueue.emit(effect({ type: params.via === "native" ? "interruptTurn" : "stopSession", threadId, runId, attemptId }));
      enqueue.emit(outcome({ command: "interrupt", via: params.via, runId }));
    }),
    /** Interrupt asked for while the turn was starting: deliver it once the turn runs. */
    deliverDeferredInterrupt: enqueueActions(({ context, enqueue }) => {
      if (context.interrupt !== "requested") return;
      const { threadId, runId } = context;
      enqueue.assign({ interrupt: "sent" });
      const type = context.interruptVia === "native" ? "interruptTurn" : "stopSession";
      enqueue.emit(effect({ type, threadId, runId, attemptId: context.activeAttemptId! }));
    }),
    /** The provider refused or failed the interrupt: say so, and let the caller try again. */
    recordInterruptFailure: enqueueActions(({ context, event, enqueue }) => {
      if (event.type !== "INTERRUPT_FAILED") return;
      enqueue.assign({ interrupt: "none" });
      const message = `interrupt was not delivered: ${event.message}`;
      enqueue.emit(record({ type: "warning", threadId: context.threadId, runId: context.runId, message }));
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
    /** The steer is recorded as applied once the provider took it (see recordSteerDelivered). */
    steerNatively: enqueueActions(({ context, event, enqueue }) => {
      if (event.type !== "STEER") return;
      const { threadId, runId } = context;
      const attemptId = context.activeAttemptId!;
      enqueue.emit(effect({ type: "steerTurn", threadId, runId, attemptId, text: event.text, messageId: event.messageId }));
      enqueue.emit(outcome({ command: "steer", via: "native", runId, attemptId }));
    }),
    recordSteerDelivered: enqueueActions(({ context, event, enqueue }) => {
      if (event.type !== "STEER_DELIVERED") return;
      const { threadId, runId } = context;
      const { attemptId, messageId, text } = event;
      enqueue.emit(record({ type: "steer.applied", threadId, runId, attemptId, messageId, text, via: "native" }));
    }),
    recordSteerFailure: enqueueActions(({ context, event, enqueue }) => {
      if (event.type !== "STEER_FAILED") return;
      const message = `steer was not delivered: ${event.message}`;
      enqueue.emit(record({ type: "warning", threadId: context.threadId, runId: context.runId, message }));
    }),
    /** A steer accepted while the turn starts waits for it; the guard that will apply it already passed. */
    deferSteer: enqueueActions(({ context, event, enqueue }, params: { via: "native" | "interrupt_restart" }) => {
      if (event.type !== "STEER") return;
      enqueue.assign({ deferredSteer: { text: event.text, messageId: event.messageId } });
      enqueue.emit(outcome({ command: "steer", via: params.via, runId: context.runId, attemptId: context.activeAttemptId! }));
    }),
    replayDeferredSteer: enqueueActions(({ context, enqueue }) => {
      if (!context.deferredSteer) return;
      enqueue.assign({ deferredSteer: null });
      enqueue.raise({ type: "STEER", ...context.deferredSteer });
    }),
    assignCapabilities: assign({
      capabilities: ({ context, event }) => (event.type === "SESSION_BOUND" ? event.capabilities : context.capabilities),
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
      enqueue.emit(effect({ type: "interruptTurn", threadId, runId, attemptId: old.attemptId }));
      enqueue.emit(outcome({ command: "steer", via: "interrupt_restart", runId, attemptId: old.attemptId }));
    }),
    refuseSteer: enqueueActions(({ context, enqueue }) => {
      const detail = "provider supports neither native steering nor interrupt-restart";
      refuseUnsupported(context, "steer", "steer_unsupported", "turns.supportsActiveSteering", detail).forEach((e) => enqueue.emit(e));
    }),
    /** The superseded attempt could not be interrupted: it keeps the run, and the steer is dropped. */
    revertRestart: enqueueActions(({ context, event, enqueue }) => {
      if (event.type !== "INTERRUPT_FAILED") return;
      enqueue.assign({ activeAttemptId: context.supersededAttemptId, supersededAttemptId: null, pendingSteer: null, interrupt: "none" });
      const message = `steer was not delivered: the active attempt could not be interrupted (${event.message})`;
      enqueue.emit(record({ type: "warning", threadId: context.threadId, runId: context.runId, message }));
    }),
    /** Interrupt during an interrupt-restart: drop the steer; the old attempt's terminal ends the run. */
    interruptPendingRestart: enqueueActions(({ context, enqueue }) => {
      const { threadId, runId } = context;
      enqueue.assign({ interrupt: "sent", pendingSteer: null });
      enqueue.emit(record({ type: "interrupt.requested", threadId, runId, attemptId: context.supersededAttemptId, via: "native" }));
      enqueue.emit(outcome({ command: "interrupt", via: "native", runId }));
    }),
    refuseSecondDeferredSteer: enqueueActions(({ enqueue }) => {
      enqueue.emit(outcome({ command: "steer", refused: "conflict", detail: "a steer is already waiting for this run's turn to start" }));
    }),
    refuseSteerWhileInterrupting: enqueueActions(({ enqueue }) => {
      enqueue.emit(outcome({ command: "steer", refused: "conflict", detail: "an interrupt of this run is pending" }));
    }),
    refuseSteerWhileRestarting: enqueueActions(({ enqueue }) => {
      enqueue.emit(outcome({ command: "steer", refused: "conflict", detail: "a steer is already restarting this run" }));
    }),
    /** The superseded attempt's terminal arrived: close it, mark it superseded; the steer now applies. */
    settleSupersededAttempt: enqueueActions(({ context, event, enqueue }) => {
      if (event.type !== "TURN_TERMINAL" || !context.pendingSteer) return;
      const { threadId, runId } = context;
      const { attemptId } = event;
      enqueue.emit({ type: "settle", threadId, runId, attemptId, status: "interrupted", reason: "attempt_superseded" });
      enqueue.emit(record({ type: "attempt.terminal", threadId, runId, attemptId, status: "superseded" }));
      const { text, messageId } = context.pendingSteer;
      enqueue.emit(record({ type: "steer.applied", threadId, runId, attemptId, messageId, text, via: "interrupt_restart" }));
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
        if (context.deferredSteer) enqueue.emit(steerDropped(context, `the run ended ${params.status} before its turn ran`));
        const attemptId = context.activeAttemptId ?? context.supersededAttemptId;
        if (attemptId) {
          enqueue.emit({ type: "settle", threadId, runId, attemptId, status: params.status, reason: `run_${params.status}` });
          enqueue.emit(record({ type: "attempt.terminal", threadId, runId, attemptId, status: params.status }));
        }
        enqueue.emit(record({ type: "run.terminal", threadId, runId, status: params.status, reason, failure }));
        enqueue.emit(effect({ type: "runFinished", threadId, runId }));
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
      enqueue.emit(effect({ type: "runFinished", threadId, runId }));
    }),
  },
});

/** A deferred steer that will never reach the provider: said so in the log, never silently lost. */
function steerDropped(context: RunContext, why: string): MachineEmitted {
  const message = `steer was not delivered: ${why} ("${context.deferredSteer?.text ?? ""}")`;
  return record({ type: "warning", threadId: context.threadId, runId: context.runId, message });
}

/** The active attempt's root terminal ends the run with the provider's status; anything else is fenced. */
const rootTerminal = [
  ...(["completed", "interrupted", "failed", "cancelled"] as const).map((status) => ({
    guard: and(["isActiveAttemptRoot", { type: "terminalIs" as const, params: { status } }]),
    target: `#run.${status}`,
    actions: { type: "finishRun" as const, params: { status, reason: null } },
  })),
  { actions: "fenceEvent" as const },
];

/** Interrupt: natively, else by stopping the session where allowed, else refused (a typed result). */
const interruptTransitions = (deliver: boolean) => [
  { guard: "interruptAlreadyRequested" as const, actions: "reportInterruptPending" as const },
  { guard: "canInterrupt" as const, actions: { type: "requestInterrupt" as const, params: { deliver, via: "native" as const } } },
  { guard: "mayStopSessionToInterrupt" as const, actions: { type: "requestInterrupt" as const, params: { deliver, via: "session_stop" as const } } },
  { actions: "refuseInterrupt" as const },
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
    interrupt: "none",
    interruptVia: "native",
    deferredSteer: null,
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
        // A request is evidence the turn runs, even before the provider's reply to sendRun.
        REQUEST_OPENED: { guard: "isFromActiveAttempt", target: "active.waiting", actions: ["trackRequest", "applyProviderEvent"] },
        START_FAILED: {
          guard: "isFromActiveAttempt",
          target: "failed",
          actions: { type: "finishRun", params: { status: "failed", reason: "start_failed" } },
        },
        INTERRUPT: interruptTransitions(false),
        STEER: [
          { guard: "interruptAlreadyRequested", actions: "refuseSteerWhileInterrupting" },
          { guard: "hasDeferredSteer", actions: "refuseSecondDeferredSteer" },
          { guard: "canSteerNatively", actions: { type: "deferSteer", params: { via: "native" } } },
          { guard: "canSteerByInterruptRestart", actions: { type: "deferSteer", params: { via: "interrupt_restart" } } },
          { actions: "refuseSteer" },
        ],
        TURN_TERMINAL: rootTerminal,
        SESSION_LOST: sessionLost,
        CANCEL: cancelStarted,
      },
    },
    active: {
      entry: ["recordRunning", "deliverDeferredInterrupt", "replayDeferredSteer"],
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
            REQUEST_SETTLED: { actions: "untrackRequest", target: "settlingRequest" },
          },
        },
        /** Transient: back to running when the last pending request settled. */
        settlingRequest: {
          always: [{ guard: "hasNoPendingRequests", target: "running", actions: "recordRunning" }, { target: "waiting" }],
        },
      },
      on: {
        TURN_ACCEPTED: { guard: "isFromActiveAttempt", actions: "bindTurn" },
        START_FAILED: {
          guard: "isFromActiveAttempt",
          target: "failed",
          actions: { type: "finishRun", params: { status: "failed", reason: "start_failed" } },
        },
        INTERRUPT: interruptTransitions(true),
        INTERRUPT_ACKED: { actions: "recordInterruptAck" },
        INTERRUPT_FAILED: { guard: "isFromActiveAttempt", actions: "recordInterruptFailure" },
        TURN_TERMINAL: rootTerminal,
        SESSION_LOST: sessionLost,
        CANCEL: cancelStarted,
        STEER: [
          { guard: "interruptAlreadyRequested", actions: "refuseSteerWhileInterrupting" },
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
        INTERRUPT_FAILED: { guard: "isFromSupersededAttempt", target: "active", actions: "revertRestart" },
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
        INTERRUPT_FAILED: { guard: "isFromSupersededAttempt", target: "active", actions: "revertRestart" },
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
    SESSION_BOUND: { actions: "assignCapabilities" },
    STEER_DELIVERED: { actions: "recordSteerDelivered" },
    STEER_FAILED: { actions: "recordSteerFailure" },
  },
});
