import { createActor } from "xstate";
import { defineCapabilities, type CapabilityOverrides } from "../../src/capabilities/index.js";
import type { Failure, TurnTerminalStatus } from "../../src/domain/entities.js";
import type { DomainEvent, DomainEventOf } from "../../src/domain/events.js";
import type { Effect, MachineEmitted, Outcome } from "../../src/machines/emitted.js";
import { runMachine, type RunInput } from "../../src/machines/run.js";

/**
 * The run machine alone, for run.test.ts and runInterventions.test.ts: createActor on it,
 * everything it emits collected (records, effects, outcomes, settles), and the provider's
 * side of a turn (accept, terminal) sent as events.
 */

export type Attempt = DomainEventOf<"attempt.started">;

export function open(overrides: CapabilityOverrides = {}, input: Partial<RunInput> = {}) {
  const emitted: MachineEmitted[] = [];
  const capabilities = defineCapabilities(overrides);
  const actor = createActor(runMachine, {
    input: { threadId: "thr_1", runId: "run_1", text: "hello", capabilities, ...input },
  });
  /** Attempts as the log knows them (their attempt.started records), newest last; `clear` keeps them. */
  const started: Attempt[] = [];
  actor.on("*", (e) => {
    emitted.push(e);
    if (e.type === "record" && e.event.type === "attempt.started") started.push(e.event);
  });
  actor.start();
  const records = (): DomainEvent[] => emitted.flatMap((e) => (e.type === "record" ? [e.event] : []));
  const effects = (): Effect[] => emitted.flatMap((e) => (e.type === "effect" ? [e.effect] : []));
  const outcomes = (): Outcome[] => emitted.flatMap((e) => (e.type === "outcome" ? [e.outcome] : []));
  const types = () => records().map((r) => (r.type === "policy.applied" ? `policy:${r.policy}` : r.type));
  const attempts = (): Attempt[] => [...started];
  const attempt = (n = -1) => started.at(n)!;
  const accept = (a: Attempt = attempt()) =>
    actor.send({
      type: "TURN_ACCEPTED",
      attemptId: a.attemptId,
      providerThreadId: "pth_1",
      providerTurnId: `ptu_${a.ordinal}`,
      nativeTurnRef: `turn-${a.ordinal}`,
    });
  const terminal = (
    status: TurnTerminalStatus,
    a: Attempt = attempt(),
    nodeId = a.rootNodeId,
    failure: Failure | null = null,
  ) => actor.send({ type: "TURN_TERMINAL", attemptId: a.attemptId, nodeId, status, failure });
  const delta = (attemptId: string, text: string): DomainEvent => ({
    type: "node.delta",
    threadId: "thr_1",
    runId: "run_1",
    nodeId: `nod_${attemptId}`,
    stream: "text",
    delta: text,
  });
  const state = () => actor.getSnapshot().value;
  const clear = () => void emitted.splice(0);
  return {
    actor,
    emitted,
    records,
    effects,
    outcomes,
    types,
    attempt,
    attempts,
    accept,
    terminal,
    delta,
    state,
    clear,
  };
}

/** A run whose first attempt the provider accepted: it runs. The emitted log starts empty. */
export function running(overrides: CapabilityOverrides = {}, input: Partial<RunInput> = {}) {
  const r = open(overrides, input);
  r.actor.send({ type: "START" });
  r.accept();
  const first = r.attempt();
  r.clear();
  return { ...r, first };
}

export const noSteer: CapabilityOverrides = { turns: { supportsActiveSteering: false } };
export const noInterrupt: CapabilityOverrides = { turns: { supportsInterrupt: false } };
export const opened = (requestId: string): DomainEvent => ({
  type: "request.opened",
  threadId: "thr_1",
  runId: "run_1",
  requestId,
  nodeId: `nod_${requestId}`,
  payload: { kind: "command", command: "ls" },
  nativeRef: null,
  responseCapability: { kind: "live", sessionId: "ses_1", hostGeneration: 1 },
});
/** Warnings that a steer was not delivered. */
export const steerRecord = (r: ReturnType<typeof open>) =>
  r.records().filter((r) => r.type === "warning" && r.message.startsWith("steer was not delivered"));
