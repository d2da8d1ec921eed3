import { and } from "xstate";
import { TurnTerminalStatusSchema } from "../domain/entities.js";

/** The run machine's transitions that several of its states share (guards and actions by name, see run.ts). */

/** The active attempt's root terminal ends the run with the provider's status; anything else is fenced. */
export const rootTerminal = [
  ...TurnTerminalStatusSchema.options.map((status) => ({
    guard: and(["isActiveAttemptRoot", { type: "terminalIs" as const, params: { status } }]),
    target: `#run.${status}`,
    actions: { type: "finishRun" as const, params: { status, reason: null } },
  })),
  { actions: "fenceEvent" as const },
];

/** Interrupt: natively, else by stopping the session where allowed, else refused (a typed result). */
export const interruptTransitions = (deliver: boolean) => [
  { guard: "interruptAlreadyRequested" as const, actions: "reportInterruptPending" as const },
  {
    guard: "canInterrupt" as const,
    actions: { type: "requestInterrupt" as const, params: { deliver, via: "native" as const } },
  },
  {
    guard: "mayStopSessionToInterrupt" as const,
    actions: { type: "requestInterrupt" as const, params: { deliver, via: "session_stop" as const } },
  },
  { guard: "sessionStopWouldEndOthers" as const, actions: "refuseSharedSessionStop" as const },
  { actions: "refuseInterrupt" as const },
];

/**
 * Interrupt of a turn the provider holds in its queue: natively only. Stopping the session would also end the turn
 * ahead of it, which the caller did not ask to stop.
 */
export const queuedInterruptTransitions = (deliver: boolean) => [
  {
    guard: and(["isQueuedAtProvider", "interruptAlreadyRequested"]),
    actions: "reportInterruptPending" as const,
  },
  {
    guard: and(["isQueuedAtProvider", "canInterrupt"]),
    actions: { type: "requestInterrupt" as const, params: { deliver, via: "native" as const } },
  },
  { guard: "isQueuedAtProvider" as const, actions: "refuseInterrupt" as const },
];

/** The runtime gives up on a started run (closing, or recovering): it ends cancelled, settled. */
export const cancelStarted = {
  target: "#run.cancelled",
  actions: { type: "finishRun" as const, params: { status: "cancelled" as const, reason: null } },
};

/** Host or session gone: the run fails, unless the caller asked for it by stopping the session. */
export const sessionLost = [
  {
    guard: "interruptAlreadyRequested" as const,
    target: "#run.interrupted",
    actions: {
      type: "finishRun" as const,
      params: { status: "interrupted" as const, reason: "session_stopped_for_interrupt" },
    },
  },
  {
    target: "#run.failed",
    actions: { type: "finishRun" as const, params: { status: "failed" as const, reason: "provider_session_lost" } },
  },
];

/** The watchdog found the turn silent and not provably alive: the run fails (never stays running). */
export const turnSilent = {
  guard: "isFromActiveAttempt" as const,
  target: "#run.failed",
  actions: { type: "finishRun" as const, params: { status: "failed" as const, reason: "turn_silent" } },
};

/**
 * While a restart waits for the superseded turn's terminal, that turn is the one watched: if
 * it goes silent and cannot be vouched for, the run fails instead of waiting for ever.
 */
export const supersededTurnSilent = { ...turnSilent, guard: "isFromSupersededAttempt" as const };

/** What a live turn's run takes in every state it waits on the provider: acknowledgements, its end, its loss. */
export const liveTurn = {
  INTERRUPT_ACKED: { actions: "recordInterruptAck" as const },
  INTERRUPT_FAILED: { guard: "isFromActiveAttempt" as const, actions: "recordInterruptFailure" as const },
  TURN_TERMINAL: rootTerminal,
  SESSION_LOST: sessionLost,
  TURN_SILENT: turnSilent,
  CANCEL: cancelStarted,
};

/** A steer before the turn runs (starting, or waiting in the provider's queue): held, and replayed once it runs. */
export const deferSteer = [
  { guard: "interruptAlreadyRequested" as const, actions: "refuseSteerWhileInterrupting" as const },
  { guard: "hasDeferredSteer" as const, actions: "refuseSecondDeferredSteer" as const },
  { guard: "canSteerNatively" as const, actions: { type: "deferSteer" as const, params: { via: "native" as const } } },
  {
    guard: "canSteerByInterruptRestart" as const,
    actions: { type: "deferSteer" as const, params: { via: "interrupt_restart" as const } },
  },
  { actions: "refuseSteer" as const },
];
