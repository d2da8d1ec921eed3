import { describe, expect, it } from "vitest";
import { createActor } from "xstate";
import { defineCapabilities } from "../../src/capabilities/index.js";
import type { MachineEmitted } from "../../src/machines/emitted.js";
import { runMachine } from "../../src/machines/run.js";

/** Guards of the run machine, driven directly: the transitions that enforce invariants 3, 4, 5 and 7. */

function startRun(overrides: Parameters<typeof defineCapabilities>[0] = {}) {
  const emitted: MachineEmitted[] = [];
  const actor = createActor(runMachine, {
    input: { threadId: "thr_1", runId: "run_1", text: "hi", capabilities: defineCapabilities(overrides) },
  });
  actor.on("*", (e) => emitted.push(e as MachineEmitted));
  actor.start();
  actor.send({ type: "START" });
  const attempt = () => {
    const ctx = actor.getSnapshot().context;
    return ctx.attempts.find((a) => a.attemptId === (ctx.activeAttemptId ?? ctx.supersededAttemptId))!;
  };
  const a1 = attempt();
  actor.send({
    type: "TURN_ACCEPTED",
    attemptId: a1.attemptId,
    providerThreadId: "pth_1",
    providerTurnId: "ptu_1",
    nativeTurnRef: "t1",
  });
  const records = () => emitted.filter((e) => e.type === "record").map((e) => (e as { event: { type: string } }).event);
  return { actor, emitted, attempt, records, a1 };
}

describe("run machine guards", () => {
  it("invariant 3: a child node's terminal never closes the run", () => {
    const { actor, a1, records } = startRun();
    actor.send({
      type: "TURN_TERMINAL",
      attemptId: a1.attemptId,
      nodeId: "nod_child",
      status: "completed",
      failure: null,
    });
    expect(actor.getSnapshot().value).toEqual({ active: "running" });
    expect(records().at(-1)).toMatchObject({ type: "event.fenced", providerEventType: "TURN_TERMINAL" });
    actor.send({
      type: "TURN_TERMINAL",
      attemptId: a1.attemptId,
      nodeId: a1.rootNodeId,
      status: "completed",
      failure: null,
    });
    expect(actor.getSnapshot().value).toBe("completed");
  });

  it("invariant 4: the superseded attempt's root terminal starts the next attempt, it does not end the run", () => {
    const { actor, a1, attempt, records } = startRun({ turns: { supportsActiveSteering: false } });
    actor.send({ type: "STEER", text: "go left", messageId: "msg_2" });
    expect(actor.getSnapshot().value).toBe("restarting");
    // A late item from the superseded attempt is recorded as fenced, never applied.
    const late = {
      type: "node.delta" as const,
      threadId: "thr_1",
      runId: "run_1",
      nodeId: "nod_x",
      stream: "text" as const,
      delta: "late",
    };
    actor.send({ type: "PROVIDER", attemptId: a1.attemptId, event: late });
    expect(records()).not.toContainEqual(late);
    expect(records().at(-1)).toMatchObject({ type: "event.fenced", attemptId: a1.attemptId });
    actor.send({
      type: "TURN_TERMINAL",
      attemptId: a1.attemptId,
      nodeId: a1.rootNodeId,
      status: "interrupted",
      failure: null,
    });
    expect(actor.getSnapshot().value).toBe("starting");
    const a2 = attempt();
    expect(a2).toMatchObject({ ordinal: 2, reason: "steering_restart", text: "go left" });
    actor.send({
      type: "TURN_ACCEPTED",
      attemptId: a2.attemptId,
      providerThreadId: "pth_1",
      providerTurnId: "ptu_2",
      nativeTurnRef: "t2",
    });
    // The old attempt's terminal, replayed late, is fenced again.
    actor.send({
      type: "TURN_TERMINAL",
      attemptId: a1.attemptId,
      nodeId: a1.rootNodeId,
      status: "completed",
      failure: null,
    });
    expect(actor.getSnapshot().value).toEqual({ active: "running" });
    actor.send({
      type: "TURN_TERMINAL",
      attemptId: a2.attemptId,
      nodeId: a2.rootNodeId,
      status: "completed",
      failure: null,
    });
    expect(actor.getSnapshot().value).toBe("completed");
  });

  it("invariant 5: an interrupt acknowledgement leaves the run active until the terminal", () => {
    const { actor, a1, records } = startRun();
    actor.send({ type: "INTERRUPT" });
    actor.send({ type: "INTERRUPT_ACKED", attemptId: a1.attemptId });
    expect(actor.getSnapshot().value).toEqual({ active: "running" });
    expect(records().map((e) => e.type)).toContain("interrupt.acknowledged");
    actor.send({
      type: "TURN_TERMINAL",
      attemptId: a1.attemptId,
      nodeId: a1.rootNodeId,
      status: "interrupted",
      failure: null,
    });
    expect(actor.getSnapshot().value).toBe("interrupted");
  });

  it("invariant 7: missing steering and interrupt are refused as named policies with typed outcomes", () => {
    const { actor, emitted } = startRun({
      turns: { supportsActiveSteering: false, supportsSteeringByInterruptRestart: false, supportsInterrupt: false },
    });
    actor.send({ type: "STEER", text: "x", messageId: "msg_2" });
    actor.send({ type: "INTERRUPT" });
    const outcomes = emitted.filter((e) => e.type === "outcome").map((e) => (e as { outcome: unknown }).outcome);
    expect(outcomes).toEqual([
      expect.objectContaining({
        command: "steer",
        refused: "capability_unsupported",
        capability: "turns.supportsActiveSteering",
      }),
      expect.objectContaining({
        command: "interrupt",
        refused: "capability_unsupported",
        capability: "turns.supportsInterrupt",
      }),
    ]);
    const policies = emitted.flatMap((e) =>
      e.type === "record" && e.event.type === "policy.applied" ? [e.event.policy] : [],
    );
    expect(policies).toEqual(["steer_unsupported", "interrupt_unsupported"]);
    expect(actor.getSnapshot().value).toEqual({ active: "running" });
  });
});
