import { describe, expect, it } from "vitest";
import { createScriptedAdapter, fullCapabilities, TillerError } from "../../src/index.js";
import type { ProviderCapabilities } from "../../src/index.js";
import { hang } from "../support/policies.js";
import {
  deferred,
  gateEvents,
  holdSessionStart,
  interruptFails,
  nextEvent,
  ofType,
  openTestRuntime,
  override,
  recordCalls,
  rejection,
  said,
} from "../support/runtime.js";

/**
 * Steering: refused while an interrupt is on its way, by interrupt-restart where the session
 * cannot steer natively (and left undone when that interrupt fails), held while the run is
 * still starting, and recorded when the provider acknowledges it late.
 */

describe("a steer while an interrupt is on its way", () => {
  it("is refused with conflict, an auto follow-up queues, and the run ends interrupted (review a5)", async () => {
    for (const supportsActiveSteering of [false, true]) {
      const gated = gateEvents(
        createScriptedAdapter({ capabilities: { turns: { supportsActiveSteering } }, script: () => hang }),
        (e) => e.event.type === "turn.terminal",
      );
      const { rt, events, cleanup } = await openTestRuntime({ s: gated.adapter });
      try {
        const { threadId } = await rt.createThread({ providerTarget: "s" });
        const { runId } = await rt.sendMessage({ threadId, text: "go" });
        await nextEvent(rt, "node.delta", (e) => e.runId === runId);
        expect(await rt.interrupt({ runId })).toMatchObject({ via: "native" });
        const error = await rejection(rt.sendMessage({ threadId, text: "actually do X", mode: "steer" }));
        expect(error, `supportsActiveSteering=${supportsActiveSteering}`).toBeInstanceOf(TillerError);
        expect((error as TillerError).code).toBe("conflict");
        // In `auto` mode, a follow-up that cannot steer the run being interrupted waits for the next turn.
        const follow = await rt.sendMessage({ threadId, text: "then this" });
        expect(follow).toMatchObject({ disposition: "queued", queuePosition: 1 });
        gated.release();
        const run = await rt.waitForRun(runId);
        expect(run.status).toBe("interrupted");
        expect(run.attempts).toHaveLength(1);
        expect(ofType(events, "steer.applied")).toEqual([]);
        expect(ofType(events, "run.created").map((e) => e.runId)).toEqual([runId, follow.runId]);
        await rt.interrupt({ runId: follow.runId });
        expect(["interrupted", "cancelled"]).toContain((await rt.waitForRun(follow.runId)).status);
      } finally {
        await cleanup();
      }
    }
  });
});

describe("steering by interrupt-restart", () => {
  it(
    "a session that announces no native steering steers by interrupt-restart, " + "never through steerRun (review a17)",
    async () => {
      let turns = 0;
      const base = createScriptedAdapter({
        capabilities: { turns: { supportsActiveSteering: false } },
        script: ({ text }) => (turns++ === 0 ? hang : [{ type: "text", text: `steered: ${text}` }]),
      });
      expect(base.steerRun).toBeUndefined();
      // Declared: steering supported (e.g. an older host binary announces less at handshake); its steerRun is never
      // to be called while the session's record says otherwise.
      const declared: ProviderCapabilities = fullCapabilities();
      let steerCalls = 0;
      const adapter = override(base, {
        getCapabilities: () => declared,
        steerRun: async () => void (steerCalls += 1),
      });
      const { rt, events, cleanup } = await openTestRuntime({ s: adapter });
      try {
        expect(rt.capabilities("s").turns.supportsActiveSteering).toBe(true);
        const { threadId } = await rt.createThread({ providerTarget: "s" });
        const { runId } = await rt.sendMessage({ threadId, text: "go" });
        await nextEvent(rt, "node.delta", (e) => e.runId === runId);
        expect(rt.capabilities("s").turns.supportsActiveSteering).toBe(false);
        expect(await rt.sendMessage({ threadId, text: "go left", mode: "steer" })).toMatchObject({
          disposition: "steered",
          via: "interrupt_restart",
          runId,
        });
        const run = await rt.waitForRun(runId);
        expect(run.status).toBe("completed");
        expect(run.attempts.map((a) => [a.ordinal, a.reason, a.status])).toEqual([
          [1, "initial", "superseded"],
          [2, "steering_restart", "completed"],
        ]);
        expect(run.items.at(-1)?.text).toBe("steered: go left");
        expect(ofType(events, "steer.applied").map((e) => e.via)).toEqual(["interrupt_restart"]);
        expect(ofType(events, "warning")).toEqual([]);
        expect(steerCalls).toBe(0);
      } finally {
        await cleanup();
      }
    },
  );

  it("a steer whose interrupt fails leaves attempt 1 running; a later interrupt works (review a7)", async () => {
    const base = createScriptedAdapter({
      capabilities: { turns: { supportsActiveSteering: false } },
      script: () => hang,
    });
    const { adapter, calls } = interruptFails(base, 6, "transient");
    const { rt, events, cleanup } = await openTestRuntime({ s: adapter });
    try {
      const { threadId } = await rt.createThread({ providerTarget: "s" });
      const { runId } = await rt.sendMessage({ threadId, text: "go" });
      await nextEvent(rt, "node.delta", (e) => e.runId === runId);
      expect(await rt.sendMessage({ threadId, text: "do X", mode: "steer" })).toMatchObject({
        disposition: "steered",
        via: "interrupt_restart",
      });
      const warning = await nextEvent(rt, "warning", (e) => e.runId === runId);
      expect(warning.event.message).toMatch(/^steer was not delivered/);
      const snapshot = await rt.readThread(threadId);
      expect(snapshot.runs[0]!.status).toBe("running");
      expect(snapshot.runs[0]!.attempts.map((a) => [a.ordinal, a.status])).toEqual([[1, "running"]]);

      expect(await rt.interrupt({ runId })).toMatchObject({ via: "native" });
      const run = await rt.waitForRun(runId);
      expect(run.status).toBe("interrupted");
      expect(run.attempts.map((a) => [a.ordinal, a.status])).toEqual([[1, "interrupted"]]);
      expect(ofType(events, "attempt.started").map((e) => e.ordinal)).toEqual([1]);
      // The steer never applied: no steer message in the transcript.
      expect(ofType(events, "steer.applied")).toEqual([]);
      expect(ofType(events, "interrupt.failed").map((e) => e.attempts)).toEqual([6]);
      expect(calls()).toBe(7);
    } finally {
      await cleanup();
    }
  });
});

describe("steering a run that is still starting", () => {
  it(
    "an auto follow-up is deferred on a natively steerable provider " + "and applied once the turn runs (review a11)",
    async () => {
      const held = holdSessionStart(
        createScriptedAdapter({
          script: () => [
            { type: "command", command: "make", output: "ok", approval: true },
            { type: "text", text: "done" },
          ],
        }),
      );
      const { rt, events, cleanup } = await openTestRuntime({ s: held.adapter });
      try {
        const { threadId } = await rt.createThread({ providerTarget: "s" });
        const first = await rt.sendMessage({ threadId, text: "first" });
        expect((await rt.readThread(threadId)).runs[0]!.status).toBe("starting");
        const second = await rt.sendMessage({ threadId, text: "second (auto)" });
        expect(second).toMatchObject({ disposition: "steered", via: "native", runId: first.runId });
        expect(ofType(events, "steer.applied")).toEqual([]); // not before the provider took it
        held.release();
        const applied = await nextEvent(rt, "steer.applied", (e) => e.runId === first.runId);
        expect(applied.event).toMatchObject({ text: "second (auto)", via: "native" });
        const opened = await nextEvent(rt, "request.opened", (e) => e.runId === first.runId);
        await rt.respond({ requestId: opened.event.requestId, response: { kind: "decision", decision: "accept" } });
        const run = await rt.waitForRun(first.runId);
        expect(run.status).toBe("completed");
        expect(said(run.items)).toContain("(steered: second (auto))");
        expect(ofType(events, "run.created")).toHaveLength(1);
        expect(ofType(events, "warning")).toEqual([]);
      } finally {
        await cleanup();
      }
    },
  );

  it("a second steer is refused with conflict; the first is applied (review s1)", async () => {
    const held = holdSessionStart(createScriptedAdapter({ script: () => hang }));
    const recorded = recordCalls(held.adapter);
    const { rt, events, cleanup } = await openTestRuntime({ p: recorded.adapter });
    try {
      const { threadId } = await rt.createThread({ providerTarget: "p" });
      const r1 = await rt.sendMessage({ threadId, text: "go" });
      expect((await rt.readThread(threadId)).runs[0]!.status).toBe("starting");
      expect(await rt.sendMessage({ threadId, text: "steer A", mode: "steer" })).toMatchObject({
        disposition: "steered",
        via: "native",
        runId: r1.runId,
      });
      const error = await rejection(rt.sendMessage({ threadId, text: "steer B", mode: "steer" }));
      expect(error).toBeInstanceOf(TillerError);
      expect((error as TillerError).code).toBe("conflict");

      const applied = nextEvent(rt, "steer.applied", (e) => e.runId === r1.runId);
      held.release();
      expect((await applied).event).toMatchObject({ text: "steer A", via: "native" });
      await rt.interrupt({ runId: r1.runId });
      const run = await rt.waitForRun(r1.runId);
      expect(run.status).toBe("interrupted");
      expect(recorded.calls.filter((c) => c.method === "steerRun").map((c) => c.input.text)).toEqual(["steer A"]);
      expect(ofType(events, "steer.applied").map((e) => e.text)).toEqual(["steer A"]);
      expect(ofType(events, "run.created").map((e) => e.runId)).toEqual([r1.runId]);
      expect(ofType(events, "warning")).toEqual([]);
      expect(JSON.stringify(events)).not.toContain("steer B");
    } finally {
      held.release();
      await cleanup();
    }
  });

  it("a steer accepted while starting, then an interrupt: never sent, and a warning says so (review s1b)", async () => {
    const held = holdSessionStart(createScriptedAdapter({ script: () => hang }));
    const recorded = recordCalls(held.adapter);
    const { rt, events, cleanup } = await openTestRuntime({ p: recorded.adapter });
    try {
      const { threadId } = await rt.createThread({ providerTarget: "p" });
      const r1 = await rt.sendMessage({ threadId, text: "go" });
      expect(await rt.sendMessage({ threadId, text: "steer A", mode: "steer" })).toMatchObject({
        disposition: "steered",
        via: "native",
        runId: r1.runId,
      });
      expect(await rt.interrupt({ runId: r1.runId })).toMatchObject({ runId: r1.runId, via: "native" });
      held.release();
      const run = await rt.waitForRun(r1.runId);
      expect(run.status).toBe("interrupted");
      expect(recorded.calls.filter((c) => c.method === "steerRun")).toEqual([]);
      expect(ofType(events, "steer.applied")).toEqual([]);
      expect(ofType(events, "warning").map((w) => [w.runId, w.message])).toEqual([
        [r1.runId, 'steer was not delivered: the run was interrupted first ("steer A")'],
      ]);
      expect(said(run.items)).not.toContain("steer A");
    } finally {
      held.release();
      await cleanup();
    }
  });
});

describe("a native steer acknowledged after the run ended", () => {
  it("is still recorded as steer.applied (review s10)", async () => {
    const base = createScriptedAdapter({
      script: () => [
        { type: "text", text: "working" },
        { type: "command", command: "make", output: "ok", approval: true },
        { type: "text", text: " done" },
      ],
    });
    let ended: Promise<unknown> | null = null;
    const taken = deferred();
    // The provider takes the steer at once, but its acknowledgement arrives after the run's end.
    const adapter = override(base, {
      steerRun: async (input) => {
        await base.steerRun!(input);
        taken.resolve();
        await ended;
      },
    });
    const { rt, events, cleanup } = await openTestRuntime({ p: adapter });
    try {
      const { threadId } = await rt.createThread({ providerTarget: "p" });
      const r1 = await rt.sendMessage({ threadId, text: "go" });
      ended = nextEvent(rt, "run.terminal", (e) => e.runId === r1.runId);
      const opened = await nextEvent(rt, "request.opened", (e) => e.runId === r1.runId);
      expect(await rt.sendMessage({ threadId, text: "also do X", mode: "steer" })).toMatchObject({
        disposition: "steered",
        via: "native",
        runId: r1.runId,
      });
      const applied = nextEvent(rt, "steer.applied", (e) => e.runId === r1.runId);
      await taken.promise; // the provider holds the steer; its turn goes on once answered
      await rt.respond({ requestId: opened.event.requestId, response: { kind: "decision", decision: "accept" } });
      const run = await rt.waitForRun(r1.runId);
      expect(run.status).toBe("completed");
      // The provider did take it: its reply shows the steer.
      expect(said(run.items)).toBe("working(steered: also do X)  done");
      expect((await applied).event).toMatchObject({
        threadId,
        runId: r1.runId,
        attemptId: run.attempts[0]!.attemptId,
        text: "also do X",
        via: "native",
      });
      const types = events.map((r) => r.event.type);
      expect(types.indexOf("run.terminal")).toBeLessThan(types.indexOf("steer.applied"));
      expect(ofType(events, "steer.applied")).toHaveLength(1);
      expect(ofType(events, "warning")).toEqual([]);
    } finally {
      await cleanup();
    }
  });
});
