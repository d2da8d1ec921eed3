import { describe, expect, it } from "vitest";
import { createScriptedAdapter, ScriptedBackend } from "../../src/index.js";
import { hang } from "../support/policies.js";
import {
  holdSessionStart,
  interruptFails,
  interruptFailsOnce,
  nextEvent,
  ofType,
  openTestRuntime,
  recordCalls,
  until,
} from "../support/runtime.js";

/**
 * Interrupts the provider does not take at once: a failed interrupt is retried while the turn
 * is live and reported when it never lands; one asked while the run starts is delivered once
 * the turn runs.
 */

describe("interrupts", () => {
  it(
    "an interrupt the provider failed to take once is " + "retried while the turn is live, and delivered (review a4)",
    async () => {
      const base = createScriptedAdapter({ script: () => hang });
      const { adapter, calls } = interruptFailsOnce(base, "ECONNRESET (transient)");
      const { rt, events, cleanup } = await openTestRuntime({ s: adapter });
      try {
        const { threadId } = await rt.createThread({ providerTarget: "s" });
        const { runId } = await rt.sendMessage({ threadId, text: "go" });
        await nextEvent(rt, "node.delta", (e) => e.runId === runId);
        expect(await rt.interrupt({ runId })).toMatchObject({ via: "native" });
        const run = await rt.waitForRun(runId);
        expect(run.status).toBe("interrupted");
        expect(calls()).toBe(2);
        expect(ofType(events, "interrupt.requested").map((e) => e.via)).toEqual(["native"]);
        expect(ofType(events, "interrupt.failed")).toEqual([]);
      } finally {
        await cleanup();
      }
    },
  );

  it(
    "an interrupt the provider never takes is reported as interrupt.failed (reason, tries), " +
      "and stays available (review a4b)",
    async () => {
      const base = createScriptedAdapter({ script: () => hang });
      const { adapter, calls } = interruptFails(base, 6, "ECONNRESET (down)");
      const { rt, events, cleanup } = await openTestRuntime({ s: adapter });
      try {
        const { threadId } = await rt.createThread({ providerTarget: "s" });
        const { runId } = await rt.sendMessage({ threadId, text: "go" });
        await nextEvent(rt, "node.delta", (e) => e.runId === runId);
        expect(await rt.interrupt({ runId })).toMatchObject({ via: "native" });
        const failed = await nextEvent(rt, "interrupt.failed", (e) => e.runId === runId);
        expect(failed.event).toMatchObject({ reason: "ECONNRESET (down)", attempts: 6 });
        expect(calls()).toBe(6);
        expect((await rt.readThread(threadId)).runs[0]!.status).toBe("running");
        expect(rt.affordances(threadId).interrupt).toMatchObject({ state: "available", runId });
        expect(ofType(events, "interrupt.acknowledged")).toEqual([]);

        expect(await rt.interrupt({ runId })).toMatchObject({ via: "native" });
        const run = await rt.waitForRun(runId);
        expect(run.status).toBe("interrupted");
        expect(calls()).toBe(7);
        expect(ofType(events, "interrupt.requested").map((e) => e.via)).toEqual(["native", "native"]);
      } finally {
        await cleanup();
      }
    },
  );

  it("an interrupt asked while starting is delivered as a session stop once the turn runs (review a6)", async () => {
    const held = holdSessionStart(
      createScriptedAdapter({
        capabilities: {
          turns: { supportsInterrupt: false, supportsSteeringByInterruptRestart: false, supportsActiveSteering: false },
        },
        script: () => hang,
      }),
    );
    const recorded = recordCalls(held.adapter);
    const { rt, events, cleanup } = await openTestRuntime({ s: recorded.adapter }, { allowSessionStopInterrupt: true });
    try {
      const { threadId } = await rt.createThread({ providerTarget: "s" });
      const { runId } = await rt.sendMessage({ threadId, text: "go" });
      expect((await rt.readThread(threadId)).runs[0]!.status).toBe("starting");
      expect(await rt.interrupt({ runId })).toMatchObject({ via: "session_stop" });
      expect(recorded.calls.filter((c) => c.method === "stopSession")).toEqual([]);
      held.release();
      const run = await rt.waitForRun(runId);
      expect([run.status, run.reason]).toEqual(["interrupted", "session_stopped_for_interrupt"]);
      expect(recorded.calls.filter((c) => c.method === "stopSession")).toHaveLength(1);
      expect(recorded.calls.filter((c) => c.method === "sendRun")).toHaveLength(1);
      expect(ofType(events, "interrupt.requested").map((e) => e.via)).toEqual(["session_stop"]);
      expect(ofType(events, "policy.applied").map((e) => e.policy)).toEqual(["interrupt_by_session_stop"]);
    } finally {
      await cleanup();
    }
  });

  it("the destructive fallback is refused while another thread's run shares the session, naming it", async () => {
    // One session for every thread, no native interrupt: stopping the session would end both runs.
    const backend = new ScriptedBackend();
    const adapter = createScriptedAdapter({
      backend,
      capabilities: { turns: { supportsInterrupt: false } },
      script: ({ text }) =>
        text === "b"
          ? [
              { type: "gate", name: "b" },
              { type: "text", text: "b done" },
            ]
          : hang,
    });
    const recorded = recordCalls(adapter);
    const { rt, events, cleanup } = await openTestRuntime({ s: recorded.adapter }, { allowSessionStopInterrupt: true });
    try {
      const a = await rt.createThread({ providerTarget: "s" });
      const b = await rt.createThread({ providerTarget: "s" });
      const runA = await rt.sendMessage({ threadId: a.threadId, text: "a" });
      const runB = await rt.sendMessage({ threadId: b.threadId, text: "b" });
      await nextEvent(rt, "node.delta", (e) => e.runId === runA.runId);
      await nextEvent(rt, "attempt.turn_bound", (e) => e.runId === runB.runId);
      const offered = rt.affordances(a.threadId).interrupt;
      expect([offered.state, offered.reason]).toEqual(["unavailable", expect.stringContaining(b.threadId)]);
      const refused = await rt.interrupt({ runId: runA.runId }).catch((e: unknown) => e);
      expect(refused).toMatchObject({ code: "capability_unsupported" });
      const refusal = () => ofType(events, "policy.applied").find((p) => p.policy === "session_stop_refused_shared");
      await until("the refusal is recorded", () => !!refusal());
      const policy = refusal();
      expect(policy?.detail).toContain(b.threadId);
      expect(recorded.calls.filter((c) => c.method === "stopSession")).toEqual([]);
      // Once thread b's run is over, the session holds only a's: the fallback is taken.
      backend.openGate("b");
      expect((await rt.waitForRun(runB.runId)).status).toBe("completed");
      expect(rt.affordances(a.threadId).interrupt.state).toBe("destructive_fallback");
      expect(await rt.interrupt({ runId: runA.runId })).toMatchObject({ via: "session_stop" });
      expect((await rt.waitForRun(runA.runId)).status).toBe("interrupted");
    } finally {
      await cleanup();
    }
  });
});
