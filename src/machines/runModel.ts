import { setup } from "xstate";
import { canInterrupt, canSteerByInterruptRestart, canSteerNatively } from "../capabilities/predicates.js";
import type { ProviderCapabilities } from "../capabilities/schema.js";
import type { AttemptReason, Failure, TurnTerminalStatus } from "../domain/entities.js";
import type { DomainEvent } from "../domain/events.js";
import { derivedId } from "../domain/ids.js";
import { record, type MachineEmitted } from "./emitted.js";

/** The run machine's context, input, events and guards, and the pure helpers they share. */

export interface Attempt {
  attemptId: string;
  ordinal: number;
  reason: AttemptReason;
  rootNodeId: string;
  text: string;
}

export interface RunContext {
  threadId: string;
  runId: string;
  text: string;
  capabilities: ProviderCapabilities;
  /** May an interrupt fall back to stopping the provider session (destructive)? */
  allowSessionStopInterrupt: boolean;
  attempts: Attempt[];
  activeAttemptId: string | null;
  /** The attempt being replaced by an interrupt-restart steer, until its terminal arrives. */
  supersededAttemptId: string | null;
  pendingSteer: { text: string; messageId: string } | null;
  /** `requested` while the turn is still starting; `sent` once the provider was asked. */
  interrupt: "none" | "requested" | "sent";
  /** How a requested interrupt is delivered: natively, or by stopping the session (destructive). */
  interruptVia: "native" | "session_stop";
  /** A steer accepted while the turn was starting, replayed once it runs. */
  deferredSteer: { text: string; messageId: string } | null;
  pendingRequestIds: string[];
  /** The run's turn was handed to a provider that queues it itself, behind the thread's active turn. */
  queuedAtProvider: boolean;
}

export interface RunInput {
  threadId: string;
  runId: string;
  text: string;
  capabilities: ProviderCapabilities;
  allowSessionStopInterrupt?: boolean;
}

export type RunEvent =
  /** `queued`: the provider takes the turn now and holds it in its own queue until the active turn ends. */
  | { type: "START"; queued?: boolean }
  | { type: "CANCEL"; reason: string }
  | {
      type: "TURN_ACCEPTED";
      attemptId: string;
      providerThreadId: string;
      providerTurnId: string;
      nativeTurnRef: string | null;
    }
  | { type: "TURN_STARTED"; attemptId: string }
  | { type: "START_FAILED"; attemptId: string; failure: Failure }
  /** A provider-derived domain event (item, plan, todo...) attributed to an attempt. */
  | { type: "PROVIDER"; attemptId: string; event: DomainEvent }
  | { type: "REQUEST_OPENED"; attemptId: string; requestId: string; event: DomainEvent }
  | { type: "REQUEST_SETTLED"; requestId: string }
  | {
      type: "TURN_TERMINAL";
      attemptId: string;
      nodeId: string;
      status: TurnTerminalStatus;
      failure: Failure | null;
      /** The provider's terminal at its record's strength, or inferred from an idle session (default strong). */
      correlation?: "strong" | "weak" | "inferred";
    }
  /** `sharedWith`: other app threads whose runs are in the same provider session (a session stop ends them too). */
  | { type: "INTERRUPT"; sharedWith?: readonly string[] }
  | { type: "INTERRUPT_ACKED"; attemptId: string }
  | { type: "INTERRUPT_FAILED"; attemptId: string; message: string; attempts: number }
  | { type: "STEER"; text: string; messageId: string }
  | { type: "STEER_DELIVERED"; attemptId: string; text: string; messageId: string; sentAfterSeq: number }
  | { type: "STEER_FAILED"; attemptId: string; message: string }
  /**
   * Recovery: the turn outlived the runtime, waiting on these requests in a session the provider still holds (its
   * record says pending requests survive a restart). The run takes it up where the log left it.
   */
  | {
      type: "REATTACH";
      attempts: Attempt[];
      capabilities: ProviderCapabilities;
      pendingRequestIds: string[];
    }
  /** The session the turn runs in announced its capability record: guards read it from now on. */
  | { type: "SESSION_BOUND"; capabilities: ProviderCapabilities }
  | { type: "SESSION_LOST"; message: string }
  /** The turn said nothing for the silence limit and the provider could not show it is alive. */
  | { type: "TURN_SILENT"; attemptId: string; message: string };

export const activeAttempt = (c: RunContext): Attempt | undefined =>
  c.attempts.find((a) => a.attemptId === c.activeAttemptId);

export function newAttempt(c: RunContext, reason: AttemptReason, text: string): Attempt {
  const ordinal = c.attempts.length + 1;
  const attemptId = derivedId("att", c.runId, ordinal);
  return { attemptId, ordinal, reason, rootNodeId: rootNodeOf(attemptId), text };
}

/** The root node of an attempt's turn: the run's own node in its tree. */
export const rootNodeOf = (attemptId: string): string => derivedId("nod", attemptId, "root");

export const eventAttempt = (e: RunEvent): string | null => ("attemptId" in e ? e.attemptId : null);

/** Is this attempt the one that currently owns the run? (The fencing decision, invariant 4.) */
export const ownsRun = (context: RunContext, attemptId: string | null): boolean =>
  attemptId !== null && attemptId === context.activeAttemptId;

/**
 * A held steer (deferred, or waiting on a restart) that will never reach the provider: said so in the log, never
 * silently lost.
 */
export function steerDropped(context: RunContext, why: string, steer = context.deferredSteer): MachineEmitted {
  const message = `steer was not delivered: ${why} ("${steer?.text ?? ""}")`;
  return record({ type: "warning", threadId: context.threadId, runId: context.runId, message });
}

/** The run machine's types and guards; its actions are added in runInterventions.ts and run.ts. */
export const runBase = setup({
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
    isFromSupersededAttempt: ({ context, event }) =>
      eventAttempt(event) !== null && eventAttempt(event) === context.supersededAttemptId,
    terminalIs: ({ event }, params: { status: TurnTerminalStatus }) =>
      event.type === "TURN_TERMINAL" && event.status === params.status,
    canSteerNatively: ({ context }) => canSteerNatively(context.capabilities),
    canSteerByInterruptRestart: ({ context }) => canSteerByInterruptRestart(context.capabilities),
    canInterrupt: ({ context }) => canInterrupt(context.capabilities),
    mayStopSessionToInterrupt: ({ context, event }) =>
      context.allowSessionStopInterrupt && !(event.type === "INTERRUPT" && event.sharedWith?.length),
    /** Stopping the session would end other threads' runs too: the destructive fallback is refused. */
    sessionStopWouldEndOthers: ({ context, event }) =>
      context.allowSessionStopInterrupt && event.type === "INTERRUPT" && !!event.sharedWith?.length,
    interruptAlreadyRequested: ({ context }) => context.interrupt !== "none",
    hasNoPendingRequests: ({ context }) => context.pendingRequestIds.length === 0,
    hasDeferredSteer: ({ context }) => context.deferredSteer !== null,
    /** The run's turn went to a provider that holds it in its own queue (see the run's `queuedAtProvider` state). */
    isQueuedAtProvider: ({ context }) => context.queuedAtProvider,
    /** The provider said something of the turn (the root node's start is the runtime's own, made as it sends it). */
    isProviderActivity: ({ event }) =>
      event.type === "PROVIDER" && !(event.event.type === "node.started" && event.event.kind === "root_turn"),
  },
});
