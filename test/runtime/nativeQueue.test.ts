import { describe, expect, it } from "vitest";
import type { CapabilityOverrides } from "../../src/index.js";
import { keyedScript, ScriptedBackend } from "../../src/index.js";
import { allTurns, scripted } from "../support/policies.js";
import { nextEvent, ofType, openTestRuntime, override, recordCalls } from "../support/runtime.js";

/**
 * `turns.supportsQueuedMessages`: a provider that queues follow-ups itself is handed a queued message at once and
 * runs it after the turn ahead of it; the runtime holds nothing and records no degradation. Its turn waits in the
 * provider's queue (`queued`), an interrupt drops it there, and its events are its own even where the provider names
 * no turn.
 */

const gated = keyedScript({
  "[gate]": [
    { type: "text", text: "working" },
    { type: "gate", name: "go" },
    { type: "text", text: " done" },
  ],
});

async function open(caps: CapabilityOverrides) {
  const backend = new ScriptedBackend();
  const s = recordCalls(scripted({ ...caps, turns: { supportsQueuedMessages: true, ...caps.turns } }, gated, backend));
  const world = await openTestRuntime({ s: s.adapter });
  const { threadId } = await world.rt.createThread({ providerTarget: "s" });
  const first = await world.rt.sendMessage({ threadId, text: "[gate] first" });
  await nextEvent(world.rt, "node.delta", (e) => e.runId === first.runId);
  return { ...world, adapter: s.adapter, backend, calls: s.calls, threadId, first };
}

const sent = (calls: Array<{ method: string; input: { text?: string } }>) =>
  calls.filter((c) => c.method === "sendRun").map((c) => c.input.text);

describe("a provider that queues follow-ups natively", () => {
  it.each([
    ["names its turns", {}],
    ["names no turn and announces none", { turns: { exposesNativeTurnId: false, emitsTurnStarted: false } }],
  ] as const)("(%s) holds the follow-up itself and runs it after the active turn", async (_, caps) => {
    const { rt, events, backend, calls, threadId, first, cleanup } = await open(caps);
    try {
      const second = await rt.sendMessage({ threadId, text: "second", mode: "queue" });
      expect(second).toMatchObject({ disposition: "queued", queuePosition: 1 });
      // Handed over while the first still runs, and waiting in the provider's queue.
      await nextEvent(rt, "attempt.turn_bound", (e) => e.runId === second.runId);
      expect(rt.views.runs.get(second.runId)!.status).toBe("queued");
      expect(sent(calls)).toEqual(["[gate] first", "second"]);
      expect(rt.views.runs.get(first.runId)!.status).toBe("running");
      backend.openGate("go");
      const [a, b] = [await rt.waitForRun(first.runId), await rt.waitForRun(second.runId)];
      expect([a.status, b.status]).toEqual(["completed", "completed"]);
      // Each run has its own text: the second's events were not taken for the first's.
      const texts = (runId: string) =>
        ofType(events, "node.completed")
          .filter((e) => e.runId === runId && e.text !== null)
          .map((e) => e.text)
          .join("");
      expect(texts(first.runId)).toBe("working done");
      expect(texts(second.runId)).toBe("You said: second");
      expect(ofType(events, "policy.applied").filter((p) => p.policy === "queue_held_by_runtime")).toEqual([]);
      expect(allTurns(backend)).toEqual([
        [
          ["[gate] first", null],
          ["second", null],
        ],
      ]);
    } finally {
      await cleanup();
    }
  });

  it("an interrupt drops the queued turn at the provider: it never runs, and the active turn goes on", async () => {
    const { rt, backend, threadId, first, cleanup } = await open({});
    try {
      const second = await rt.sendMessage({ threadId, text: "second", mode: "queue" });
      await nextEvent(rt, "attempt.turn_bound", (e) => e.runId === second.runId);
      expect(await rt.interrupt({ runId: second.runId })).toMatchObject({ via: "native" });
      expect((await rt.waitForRun(second.runId)).status).toBe("interrupted");
      expect(rt.views.runs.get(first.runId)!.status).toBe("running");
      backend.openGate("go");
      expect((await rt.waitForRun(first.runId)).status).toBe("completed");
      expect(allTurns(backend)).toEqual([[["[gate] first", null]]]);
      // The thread is free again: the next message starts at once.
      const third = await rt.sendMessage({ threadId, text: "third" });
      expect(third.disposition).toBe("started");
      expect((await rt.waitForRun(third.runId)).status).toBe("completed");
    } finally {
      await cleanup();
    }
  });

  it("an interrupt of a queued turn named by no ref waits until it runs, never hitting the turn ahead", async () => {
    const { rt, backend, threadId, first, calls, cleanup } = await open({ turns: { exposesNativeTurnId: false } });
    try {
      const second = await rt.sendMessage({ threadId, text: "[gate] second", mode: "queue" });
      await nextEvent(rt, "attempt.turn_bound", (e) => e.runId === second.runId);
      expect(await rt.interrupt({ runId: second.runId })).toMatchObject({ via: "native" });
      // Nothing went to the provider yet: it could only address the turn ahead.
      expect(calls.filter((c) => c.method === "interrupt")).toEqual([]);
      backend.openGate("go");
      expect((await rt.waitForRun(first.runId)).status).toBe("completed");
      expect((await rt.waitForRun(second.runId)).status).toBe("interrupted");
    } finally {
      await cleanup();
    }
  });

  it("a session lost with a follow-up in the provider's queue fails both runs; the thread goes on", async () => {
    const { rt, events, adapter, threadId, first, cleanup } = await open({});
    try {
      const second = await rt.sendMessage({ threadId, text: "second", mode: "queue" });
      await nextEvent(rt, "attempt.turn_bound", (e) => e.runId === second.runId);
      const sessionId = ofType(events, "session.started")[0]!.sessionId;
      await adapter.stopSession({ sessionId }); // the provider host went away, its queue with it
      for (const runId of [first.runId, second.runId]) {
        const run = await rt.waitForRun(runId);
        expect([run.status, run.reason]).toEqual(["failed", "provider_session_lost"]);
      }
      const third = await rt.sendMessage({ threadId, text: "third" });
      expect(third.disposition).toBe("started");
      expect((await rt.waitForRun(third.runId)).status).toBe("completed");
    } finally {
      await cleanup();
    }
  });

  it("a provider declaring a queue, then refusing the follow-up: that run fails, the active one goes on", async () => {
    const backend = new ScriptedBackend();
    const base = scripted({ turns: { supportsQueuedMessages: true } }, gated, backend);
    let sends = 0;
    const liar = override(base, {
      sendRun: (input) => {
        sends += 1;
        if (sends === 2) return Promise.reject(new Error("a turn is already running on this thread"));
        return base.sendRun(input);
      },
    });
    const { rt, cleanup } = await openTestRuntime({ s: liar });
    try {
      const { threadId } = await rt.createThread({ providerTarget: "s" });
      const first = await rt.sendMessage({ threadId, text: "[gate] first" });
      await nextEvent(rt, "node.delta", (e) => e.runId === first.runId);
      const second = await rt.sendMessage({ threadId, text: "second", mode: "queue" });
      const refused = await rt.waitForRun(second.runId);
      expect([refused.status, refused.reason]).toEqual(["failed", "start_failed"]);
      expect(rt.views.runs.get(first.runId)!.status).toBe("running");
      backend.openGate("go");
      expect((await rt.waitForRun(first.runId)).status).toBe("completed");
      const third = await rt.sendMessage({ threadId, text: "third" });
      expect((await rt.waitForRun(third.runId)).status).toBe("completed");
    } finally {
      await cleanup();
    }
  });

  it("a model change after the active run started keeps the follow-up in the runtime until the boundary", async () => {
    const { rt, events, backend, calls, threadId, first, cleanup } = await open({});
    try {
      const second = await rt.sendMessage({ threadId, text: "second", mode: "queue", model: "other" });
      expect(second.disposition).toBe("queued");
      expect(sent(calls)).toEqual(["[gate] first"]);
      backend.openGate("go");
      await rt.waitForRun(first.runId);
      expect((await rt.waitForRun(second.runId)).status).toBe("completed");
      expect(sent(calls)).toEqual(["[gate] first", "second"]);
      expect(ofType(events, "policy.applied").map((p) => p.policy)).not.toContain("queue_held_by_runtime");
    } finally {
      await cleanup();
    }
  });
});
