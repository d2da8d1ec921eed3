import type { TurnTerminalStatus } from "../domain/entities.js";
import type { DomainEvent } from "../domain/events.js";
import type { RequestResponse } from "../domain/items.js";
import { DEGRADATIONS, type PolicyName } from "./policies.js";

/**
 * What machines tell the runtime. Machines stay pure: they never call adapters or the
 * store, they emit. The runtime appends `record`s synchronously (in emission order),
 * closes open nodes on `settle`, runs `effect`s after the current event is processed,
 * and hands `outcome`s back to the API caller as typed results.
 */
export type Effect =
  /** `queued`: hand the run to the provider now, to hold in its own queue behind the active turn. */
  | { type: "startRun"; threadId: string; runId: string; queued?: boolean }
  | { type: "steerRun"; threadId: string; runId: string; text: string; messageId: string }
  | { type: "interruptRun"; threadId: string; runId: string }
  | { type: "startTurn"; threadId: string; runId: string; attemptId: string; text: string; queued?: boolean }
  | { type: "steerTurn"; threadId: string; runId: string; attemptId: string; text: string; messageId: string }
  | { type: "interruptTurn"; threadId: string; runId: string; attemptId: string }
  | { type: "stopSession"; threadId: string; runId: string; attemptId: string }
  | { type: "runFinished"; threadId: string; runId: string }
  | { type: "rollbackThread"; threadId: string; toRunId: string; via: "provider_rollback" | "divergent" | "files_only" }
  | { type: "respond"; requestId: string; response: RequestResponse };

export type Outcome =
  | { command: "submit"; disposition: "started" | "queued"; runId: string; queuePosition: number }
  | { command: "submit"; disposition: "steer" | "restart"; runId: string }
  | { command: "steer"; via: "native" | "interrupt_restart"; runId: string; attemptId: string }
  | { command: "interrupt"; via: "native" | "session_stop" | "not_started" | "already_requested"; runId: string }
  | { command: "respond"; requestId: string; accepted: true }
  | { command: "rollback"; via: "provider_rollback" | "divergent" | "files_only"; threadId: string }
  | {
      command: "submit" | "steer" | "interrupt" | "respond" | "rollback";
      refused: "capability_unsupported";
      capability: string;
      detail: string;
    }
  | {
      command: "submit" | "steer" | "interrupt" | "respond" | "rollback";
      refused: "not_resumable" | "conflict";
      detail: string;
    };

export type MachineEmitted =
  | { type: "record"; event: DomainEvent }
  /** Completion barrier: close the attempt's open nodes and cancel its pending requests, now. */
  | {
      type: "settle";
      threadId: string;
      runId: string;
      attemptId: string;
      status: TurnTerminalStatus;
      reason: string;
    }
  | { type: "effect"; effect: Effect }
  | { type: "outcome"; outcome: Outcome };

export const record = (event: DomainEvent): MachineEmitted => ({ type: "record", event });
export const effect = (e: Effect): MachineEmitted => ({ type: "effect", effect: e });
export const outcome = (o: Outcome): MachineEmitted => ({ type: "outcome", outcome: o });

interface Where {
  threadId: string | null;
  runId: string | null;
}

/**
 * A degradation policy fired: which capability was missing and what the runtime did instead.
 * The capability defaults to the one the registry names; pass the exact field when the
 * policy reads one of several (a fork from inside a thread reads `canForkFromTurn`).
 */
export function policyApplied(
  where: Where,
  policy: PolicyName,
  detail: string,
  capability: string | null = DEGRADATIONS[policy].capability,
): MachineEmitted {
  return record(policyEvent(where, policy, detail, capability));
}

export function policyEvent(
  where: Where,
  policy: PolicyName,
  detail: string,
  capability: string | null = DEGRADATIONS[policy].capability,
): DomainEvent {
  const outcome = DEGRADATIONS[policy].outcome;
  return { type: "policy.applied", threadId: where.threadId, runId: where.runId, policy, capability, outcome, detail };
}

/** A capability is missing and no fallback applies: the record, and the typed refusal for the caller. */
export function refuseUnsupported(
  where: Where,
  command: "submit" | "steer" | "interrupt" | "rollback",
  policy: PolicyName,
  detail: string,
): MachineEmitted[] {
  const capability = DEGRADATIONS[policy].capability;
  return [
    policyApplied(where, policy, detail),
    outcome({ command, refused: "capability_unsupported", capability, detail }),
  ];
}
