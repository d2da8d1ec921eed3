import { enqueueActions } from "xstate";
import { effect, outcome, policyApplied, record, refuseUnsupported } from "./emitted.js";
import { activeAttempt, runBase, steerDropped, type RunContext, type RunEvent } from "./runModel.js";

/**
 * What a caller can do to a running turn, and what the run does when the provider cannot:
 * interrupt (natively, by a destructive session stop where allowed, or refused) and steer
 * (natively, by interrupt-restart as a new attempt, deferred while the turn starts, or
 * refused). Every fallback and refusal is recorded as a named policy.
 */

/** The provider never took the interrupt: the typed record of it, with the tries it took. */
function interruptFailed(context: RunContext, event: Extract<RunEvent, { type: "INTERRUPT_FAILED" }>) {
  const { threadId, runId } = context;
  const { attemptId, message: reason, attempts } = event;
  return record({ type: "interrupt.failed", threadId, runId, attemptId, reason, attempts });
}

export const runInterventions = runBase.extend({
  actions: {
    /** Ask the provider to stop the turn, now (`deliver`) or once it runs; the terminal decides. */
    requestInterrupt: enqueueActions(
      ({ context, enqueue }, params: { deliver: boolean; via: "native" | "session_stop" }) => {
        const attemptId = context.activeAttemptId!;
        const { threadId, runId } = context;
        enqueue.assign({
          interrupt: params.deliver ? "sent" : "requested",
          interruptVia: params.via,
          deferredSteer: null,
        });
        if (context.deferredSteer) enqueue.emit(steerDropped(context, "the run was interrupted first"));
        if (params.via === "session_stop") {
          const detail = "provider cannot interrupt a turn; stopping its session (destructive)";
          enqueue.emit(policyApplied(context, "interrupt_by_session_stop", detail));
        }
        enqueue.emit(record({ type: "interrupt.requested", threadId, runId, attemptId, via: params.via }));
        if (params.deliver)
          enqueue.emit(
            effect({ type: params.via === "native" ? "interruptTurn" : "stopSession", threadId, runId, attemptId }),
          );
        enqueue.emit(outcome({ command: "interrupt", via: params.via, runId }));
      },
    ),
    /** Interrupt asked for while the turn was starting: deliver it once the turn runs. */
    deliverDeferredInterrupt: enqueueActions(({ context, enqueue }) => {
      if (context.interrupt !== "requested") return;
      const { threadId, runId } = context;
      enqueue.assign({ interrupt: "sent" });
      const type = context.interruptVia === "native" ? "interruptTurn" : "stopSession";
      enqueue.emit(effect({ type, threadId, runId, attemptId: context.activeAttemptId! }));
    }),
    /**
     * The provider never took the interrupt (retried while its turn was live): say so, typed, and let the caller try
     * again.
     */
    recordInterruptFailure: enqueueActions(({ context, event, enqueue }) => {
      if (event.type !== "INTERRUPT_FAILED") return;
      enqueue.assign({ interrupt: "none" });
      enqueue.emit(interruptFailed(context, event));
    }),
    refuseSharedSessionStop: enqueueActions(({ context, event, enqueue }) => {
      const others = event.type === "INTERRUPT" ? (event.sharedWith ?? []) : [];
      const detail =
        "provider cannot interrupt a turn, and stopping its session would also end the runs of " +
        `thread${others.length > 1 ? "s" : ""} ${others.join(", ")}`;
      refuseUnsupported(context, "interrupt", "session_stop_refused_shared", detail).forEach((e) => enqueue.emit(e));
    }),
    refuseInterrupt: enqueueActions(({ context, enqueue }) => {
      const detail = "provider cannot interrupt a turn and stopping its session is not allowed";
      refuseUnsupported(context, "interrupt", "interrupt_unsupported", detail).forEach((e) => enqueue.emit(e));
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
      enqueue.emit(
        effect({ type: "steerTurn", threadId, runId, attemptId, text: event.text, messageId: event.messageId }),
      );
      enqueue.emit(outcome({ command: "steer", via: "native", runId, attemptId }));
    }),
    recordSteerDelivered: enqueueActions(({ context, event, enqueue }) => {
      if (event.type !== "STEER_DELIVERED") return;
      const { threadId, runId } = context;
      const { attemptId, messageId, text, sentAfterSeq } = event;
      enqueue.emit(
        record({ type: "steer.applied", threadId, runId, attemptId, messageId, text, via: "native", sentAfterSeq }),
      );
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
      enqueue.emit(
        outcome({ command: "steer", via: params.via, runId: context.runId, attemptId: context.activeAttemptId! }),
      );
    }),
    replayDeferredSteer: enqueueActions(({ context, enqueue }) => {
      if (!context.deferredSteer) return;
      enqueue.assign({ deferredSteer: null });
      enqueue.raise({ type: "STEER", ...context.deferredSteer });
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
      enqueue.emit(policyApplied(context, "steer_by_interrupt_restart", detail));
      enqueue.emit(effect({ type: "interruptTurn", threadId, runId, attemptId: old.attemptId }));
      enqueue.emit(outcome({ command: "steer", via: "interrupt_restart", runId, attemptId: old.attemptId }));
    }),
    refuseSteer: enqueueActions(({ context, enqueue }) => {
      const detail = "provider supports neither native steering nor interrupt-restart";
      refuseUnsupported(context, "steer", "steer_unsupported", detail).forEach((e) => enqueue.emit(e));
    }),
    /** The superseded attempt could not be interrupted: it keeps the run, and the steer is dropped. */
    revertRestart: enqueueActions(({ context, event, enqueue }) => {
      if (event.type !== "INTERRUPT_FAILED") return;
      enqueue.assign({
        activeAttemptId: context.supersededAttemptId,
        supersededAttemptId: null,
        pendingSteer: null,
        interrupt: "none",
      });
      enqueue.emit(interruptFailed(context, event));
      const { threadId, runId } = context;
      const message = `steer was not delivered: the active attempt could not be interrupted (${event.message})`;
      enqueue.emit(record({ type: "warning", threadId, runId, message }));
    }),
    /** Interrupt during an interrupt-restart: drop the steer; the old attempt's terminal ends the run. */
    interruptPendingRestart: enqueueActions(({ context, enqueue }) => {
      const { threadId, runId } = context;
      enqueue.assign({ interrupt: "sent", pendingSteer: null });
      if (context.pendingSteer)
        enqueue.emit(steerDropped(context, "the run was interrupted first", context.pendingSteer));
      enqueue.emit(
        record({ type: "interrupt.requested", threadId, runId, attemptId: context.supersededAttemptId, via: "native" }),
      );
      enqueue.emit(outcome({ command: "interrupt", via: "native", runId }));
    }),
    refuseSecondDeferredSteer: enqueueActions(({ enqueue }) => {
      enqueue.emit(
        outcome({
          command: "steer",
          refused: "conflict",
          detail: "a steer is already waiting for this run's turn to start",
        }),
      );
    }),
    refuseSteerWhileInterrupting: enqueueActions(({ enqueue }) => {
      enqueue.emit(outcome({ command: "steer", refused: "conflict", detail: "an interrupt of this run is pending" }));
    }),
    refuseSteerWhileRestarting: enqueueActions(({ enqueue }) => {
      enqueue.emit(
        outcome({ command: "steer", refused: "conflict", detail: "a steer is already restarting this run" }),
      );
    }),
    /** The superseded attempt's terminal arrived: close it, mark it superseded; the steer now applies. */
    settleSupersededAttempt: enqueueActions(({ context, event, enqueue }) => {
      if (event.type !== "TURN_TERMINAL" || !context.pendingSteer) return;
      const { threadId, runId } = context;
      const { attemptId } = event;
      enqueue.emit({ type: "settle", threadId, runId, attemptId, status: "interrupted", reason: "attempt_superseded" });
      enqueue.emit(record({ type: "attempt.terminal", threadId, runId, attemptId, status: "superseded" }));
      const { text, messageId } = context.pendingSteer;
      enqueue.emit(
        record({ type: "steer.applied", threadId, runId, attemptId, messageId, text, via: "interrupt_restart" }),
      );
    }),
  },
});
