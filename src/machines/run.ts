import { and, assign, enqueueActions, type SnapshotFrom } from "xstate";
import type { AttemptReason, TurnTerminalStatus } from "../domain/entities.js";
import type { DomainEventOf } from "../domain/events.js";
import { eventAttempt, newAttempt, steerDropped } from "./runModel.js";
import { effect, outcome, record } from "./emitted.js";
import { runInterventions } from "./runInterventions.js";
import {
  cancelStarted,
  deferSteer,
  interruptTransitions,
  liveTurn,
  queuedInterruptTransitions,
  rootTerminal,
  sessionLost,
  supersededTurnSilent,
  turnSilent,
} from "./runTransitions.js";

export { ownsRun, type Attempt, type RunContext, type RunEvent, type RunInput } from "./runModel.js";

/**
 * One user turn, with its attempts. Only the root node of the active attempt can make the
 * run terminal; an interrupt acknowledgement never does; provider events from a
 * superseded attempt are fenced (recorded, not applied).
 */

const runSetup = runInterventions.extend({
  actions: {
    beginAttempt: enqueueActions(({ context, enqueue }, params: { reason: AttemptReason }) => {
      const steer = context.pendingSteer;
      const attempt = newAttempt(context, params.reason, steer ? steer.text : context.text);
      // Only the first attempt can wait in the provider's queue: a restart's runs now, after the turn it replaces.
      const queued = params.reason === "initial" && context.queuedAtProvider;
      enqueue.assign({
        attempts: [...context.attempts, attempt],
        activeAttemptId: attempt.attemptId,
        supersededAttemptId: null,
        pendingSteer: null,
        interrupt: "none",
        queuedAtProvider: queued,
      });
      const { threadId, runId } = context;
      enqueue.emit(record({ type: "attempt.started", threadId, runId, ...attempt }));
      // A turn handed to the provider's own queue does not start yet: the run stays queued until the provider runs it.
      if (!queued) enqueue.emit(record({ type: "run.state", threadId, runId, status: "starting" }));
      const start = { threadId, runId, attemptId: attempt.attemptId, text: attempt.text };
      enqueue.emit(effect({ type: "startTurn", ...start, ...(queued ? { queued } : {}) }));
    }),
    /** The attempts the log holds, the last one live: nothing new is recorded (the log has it all). */
    restoreAttempts: assign(({ context, event }) =>
      event.type === "REATTACH"
        ? {
            attempts: event.attempts,
            activeAttemptId: event.attempts.at(-1)!.attemptId,
            capabilities: event.capabilities,
            pendingRequestIds: event.pendingRequestIds,
          }
        : context,
    ),
    takeUpQueued: assign({ queuedAtProvider: false }),
    markQueuedAtProvider: assign({
      queuedAtProvider: ({ event }) => event.type === "START" && event.queued === true,
    }),
    recordRunning: enqueueActions(({ context, event, enqueue }) => {
      if (event.type === "REATTACH") return; // the log says where the run is
      enqueue.emit(record({ type: "run.state", threadId: context.threadId, runId: context.runId, status: "running" }));
    }),
    recordWaiting: enqueueActions(({ context, event, enqueue }) => {
      if (event.type === "REATTACH") return;
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
      const providerEventType =
        event.type === "PROVIDER" || event.type === "REQUEST_OPENED" ? event.event.type : event.type;
      enqueue.emit(
        record({
          type: "event.fenced",
          threadId: context.threadId,
          runId: context.runId,
          attemptId,
          providerEventType,
        }),
      );
    }),
    assignCapabilities: assign({
      capabilities: ({ context, event }) =>
        event.type === "SESSION_BOUND" ? event.capabilities : context.capabilities,
    }),
    finishRun: enqueueActions(
      ({ context, event, enqueue }, params: { status: TurnTerminalStatus; reason: string | null }) => {
        const { threadId, runId } = context;
        const reason = params.reason ?? (event.type === "CANCEL" ? event.reason : null);
        const failure =
          event.type === "TURN_TERMINAL" || event.type === "START_FAILED"
            ? event.failure
            : event.type === "SESSION_LOST"
              ? { failureClass: "provider_session_lost", message: event.message, retryable: true }
              : event.type === "TURN_SILENT"
                ? { failureClass: "turn_silent", message: event.message, retryable: true }
                : null;
        if (context.deferredSteer)
          enqueue.emit(steerDropped(context, `the run ended ${params.status} before its turn ran`));
        // A steer waiting for its restart never gets its attempt now.
        if (context.pendingSteer)
          enqueue.emit(
            steerDropped(context, `the run ended ${params.status} before it restarted`, context.pendingSteer),
          );
        const attemptId = context.activeAttemptId ?? context.supersededAttemptId;
        if (attemptId) {
          enqueue.emit({
            type: "settle",
            threadId,
            runId,
            attemptId,
            status: params.status,
            reason: `run_${params.status}`,
          });
          enqueue.emit(record({ type: "attempt.terminal", threadId, runId, attemptId, status: params.status }));
        }
        const correlation: RunTerminalCorrelation =
          event.type === "TURN_TERMINAL" ? (event.correlation ?? "strong") : "runtime";
        const terminal = { threadId, runId, status: params.status, reason, failure, correlation };
        enqueue.emit(record({ type: "run.terminal", ...terminal }));
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
      const correlation = "runtime" as const;
      enqueue.emit(
        record({ type: "run.terminal", threadId, runId, status: "cancelled", reason, failure: null, correlation }),
      );
      enqueue.emit(effect({ type: "runFinished", threadId, runId }));
    }),
  },
});

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
    queuedAtProvider: false,
  }),
  initial: "queued",
  states: {
    queued: {
      on: {
        START: {
          target: "starting",
          actions: ["markQueuedAtProvider", { type: "beginAttempt", params: { reason: "initial" } }],
        },
        CANCEL: { target: "cancelled", actions: "cancelQueued" },
        INTERRUPT: { target: "cancelled", actions: "cancelQueued" },
        // Recovery only: the turn outlived the runtime, waiting on requests the provider still holds.
        REATTACH: { target: "active.waiting", actions: "restoreAttempts" },
      },
    },
    starting: {
      on: {
        TURN_ACCEPTED: [
          {
            guard: and(["isFromActiveAttempt", "isQueuedAtProvider"]),
            target: "queuedAtProvider",
            actions: "bindTurn",
          },
          { guard: "isFromActiveAttempt", target: "active", actions: "bindTurn" },
        ],
        TURN_STARTED: { guard: "isFromActiveAttempt", target: "active", actions: "takeUpQueued" },
        // A request is evidence the turn runs, even before the provider's reply to sendRun.
        REQUEST_OPENED: {
          guard: "isFromActiveAttempt",
          target: "active.waiting",
          actions: ["takeUpQueued", "trackRequest", "applyProviderEvent"],
        },
        // So is any event of the turn: a turn the provider was to queue that runs already is not queued.
        PROVIDER: [
          {
            guard: and(["isFromActiveAttempt", "isProviderActivity"]),
            actions: ["takeUpQueued", "applyProviderEvent"],
          },
          { guard: "isFromActiveAttempt", actions: "applyProviderEvent" },
          { actions: "fenceEvent" },
        ],
        START_FAILED: {
          guard: "isFromActiveAttempt",
          target: "failed",
          actions: { type: "finishRun", params: { status: "failed", reason: "start_failed" } },
        },
        INTERRUPT: [...queuedInterruptTransitions(false), ...interruptTransitions(false)],
        STEER: deferSteer,
        TURN_TERMINAL: rootTerminal,
        SESSION_LOST: sessionLost,
        TURN_SILENT: turnSilent,
        CANCEL: cancelStarted,
      },
    },
    /**
     * The provider holds the turn in its own queue (it queues follow-ups natively): the run waits there, still
     * `queued`, until the provider takes the turn up (announces it, or says anything for it). An interrupt goes to
     * the provider, which drops the queued turn; its terminal ends the run.
     */
    queuedAtProvider: {
      entry: "deliverDeferredInterrupt",
      on: {
        TURN_STARTED: { guard: "isFromActiveAttempt", target: "active", actions: "takeUpQueued" },
        PROVIDER: { guard: "isFromActiveAttempt", target: "active", actions: ["takeUpQueued", "applyProviderEvent"] },
        REQUEST_OPENED: {
          guard: "isFromActiveAttempt",
          target: "active.waiting",
          actions: ["takeUpQueued", "trackRequest", "applyProviderEvent"],
        },
        INTERRUPT: queuedInterruptTransitions(true),
        // Steered before the provider took it up: held, and replayed once it runs (as while starting).
        STEER: deferSteer,
        ...liveTurn,
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
          always: [
            { guard: "hasNoPendingRequests", target: "running", actions: "recordRunning" },
            { target: "waiting" },
          ],
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
        ...liveTurn,
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
          {
            guard: "isSupersededAttemptRoot",
            target: "starting",
            actions: ["settleSupersededAttempt", { type: "beginAttempt", params: { reason: "steering_restart" } }],
          },
        ],
        INTERRUPT_ACKED: { actions: "recordInterruptAck" },
        INTERRUPT_FAILED: { guard: "isFromSupersededAttempt", target: "active", actions: "revertRestart" },
        SESSION_LOST: sessionLost,
        TURN_SILENT: supersededTurnSilent,
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
        TURN_SILENT: supersededTurnSilent,
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

export type RunSnapshot = SnapshotFrom<typeof runMachine>;

/** The run states in which a provider event of the active attempt does more than record itself. */
const STATES_TAKING_PROVIDER_EVENTS = ["starting", "queuedAtProvider"] as const;

/**
 * Whether a provider event of the run's active attempt only records itself in this state: the machine's root handler
 * (`applyProviderEvent`), no transition, no context change. The runtime then commits the event without a machine
 * step. Outside `starting` and `queuedAtProvider` (where a provider event says the turn runs), that is every state;
 * test/machines/runProviderEvents.test.ts holds the machine to it, state by state.
 */
export function providerEventOnlyRecords(snapshot: RunSnapshot): boolean {
  return !STATES_TAKING_PROVIDER_EVENTS.some((state) => snapshot.matches(state));
}

/** How a run's end is known (`run.terminal`): the provider's terminal, inferred from idleness, or the runtime's. */
type RunTerminalCorrelation = DomainEventOf<"run.terminal">["correlation"];
