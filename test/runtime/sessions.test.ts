import { describe, expect, it } from "vitest";
import { createScriptedAdapter } from "../../src/adapters/scripted/host/provider.js";
import type { ProviderAdapter } from "../../src/adapters/contract.js";
import { keyedScript } from "../../src/index.js";
import { nextEvent, openTestRuntime, ofType } from "../support/runtime.js";

/**
 * Sessions through the real runtime and the scripted provider: the session actor is claimed
 * from the moment a turn has its session (so no idle deadline can stop it while the turn's
 * provider thread is still being loaded), and given back when the turn ends; threads the
 * provider cannot tell apart never share one.
 */

/** An adapter whose next provider-thread load waits for the test (the provider boundary). */
function gatedLoads(adapter: ProviderAdapter) {
  let open: (() => void) | null = null;
  let entered: (() => void) | null = null;
  const wrapped = Object.create(adapter) as ProviderAdapter;
  wrapped.ensureProviderThread = async (input) => {
    if (open === null && entered === null) return adapter.ensureProviderThread(input);
    const gate = new Promise<void>((resolve) => (open = resolve));
    entered?.();
    entered = null;
    await gate;
    open = null;
    return adapter.ensureProviderThread(input);
  };
  return {
    adapter: wrapped,
    /** Holds the next load; resolves once it is held. */
    holdNext: () => new Promise<void>((resolve) => (entered = resolve)),
    release: () => open?.(),
  };
}

describe("sessions", () => {
  it(
    "a turn claims its session before its provider thread loads: " +
      "the shared session is running, with no idle deadline, while the load waits",
    async () => {
      const gated = gatedLoads(createScriptedAdapter());
      const { rt, events, cleanup } = await openTestRuntime({ alpha: gated.adapter }, { sessionIdleMs: 60_000 });
      try {
        const a = await rt.createThread({ providerTarget: "alpha" });
        await rt.waitForRun((await rt.sendMessage({ threadId: a.threadId, text: "one" })).runId);
        const [session] = [...rt.actors.sessions.values()];
        expect(session!.getSnapshot().value).toEqual({ ready: "countingDown" });

        // A second thread shares the session; its provider thread is loaded while the session idles.
        const b = await rt.createThread({ providerTarget: "alpha" });
        const held = gated.holdNext();
        const run = await rt.sendMessage({ threadId: b.threadId, text: "two" });
        await held;
        expect(rt.actors.sessions.size).toBe(1);
        const during = session!.getSnapshot();
        expect([during.value, during.context.claims, during.context.deadline]).toEqual(["running", 1, null]);

        gated.release();
        expect((await rt.waitForRun(run.runId)).status).toBe("completed");
        const after = session!.getSnapshot();
        expect([after.value, after.context.claims]).toEqual([{ ready: "countingDown" }, 0]);
        expect(ofType(events, "session.state").map((e) => e.status)).toEqual(["running", "ready", "running", "ready"]);
      } finally {
        await cleanup();
      }
    },
  );

  it("sessions that ended are let go: a runtime whose sessions keep idling out holds only the live one", async () => {
    const { rt, cleanup } = await openTestRuntime({ alpha: createScriptedAdapter() }, { sessionIdleMs: 1 });
    try {
      const { threadId } = await rt.createThread({ providerTarget: "alpha" });
      for (let i = 0; i < 5; i++) {
        const stopped = nextEvent(rt, "session.state", (e) => e.status === "stopped", rt.head);
        await rt.waitForRun((await rt.sendMessage({ threadId, text: `turn ${i}` })).runId);
        await stopped;
      }
      expect(rt.views.sessions.size).toBe(5);
      expect(rt.actors.sessions.size).toBe(0);
    } finally {
      await cleanup();
    }
  });

  it("a turn that fails before its provider thread is loaded gives its claim back", async () => {
    const adapter = createScriptedAdapter();
    const failing = Object.create(adapter) as ProviderAdapter;
    failing.ensureProviderThread = async () => {
      throw new Error("cannot load");
    };
    const { rt, cleanup } = await openTestRuntime({ alpha: failing });
    try {
      const { threadId } = await rt.createThread({ providerTarget: "alpha" });
      const run = await rt.waitForRun((await rt.sendMessage({ threadId, text: "one" })).runId);
      expect(run.status).toBe("failed");
      const [session] = [...rt.actors.sessions.values()];
      expect([session!.getSnapshot().value, session!.getSnapshot().context.claims]).toEqual([
        { ready: "countingDown" },
        0,
      ]);
    } finally {
      await cleanup();
    }
  });
});

describe("threads that cannot be told apart get their own sessions", () => {
  /** No native ids of any kind: the provider cannot tell its threads apart. */
  const none = {
    nativeThreadIds: "none",
    nativeTurnIds: "none",
    nativeItemIds: "none",
    nativeRequestIds: "none",
  } as const;
  /** Each thread's turn asks for approval first, so both turns are in flight at once. */
  const script = keyedScript({
    "[A]": [
      { type: "command", command: "make a", output: "", approval: true },
      { type: "text", text: "A reply" },
    ],
    "[B]": [
      { type: "command", command: "make b", output: "", approval: true },
      { type: "text", text: "B reply" },
    ],
  });
  const replies = (items: Array<{ kind: string; text?: string }>) =>
    items.filter((i) => i.kind === "assistant_message").map((i) => i.text);

  it("identity none, multi-thread sessions: concurrent runs each get their own reply (review a1)", async () => {
    const adapter = createScriptedAdapter({
      capabilities: { identity: none, sessions: { supportsMultipleProviderThreadsPerSession: true } },
      script,
    });
    const { rt, events, cleanup } = await openTestRuntime({ s: adapter });
    try {
      const a = await rt.createThread({ providerTarget: "s" });
      const b = await rt.createThread({ providerTarget: "s" });
      const ra = await rt.sendMessage({ threadId: a.threadId, text: "[A]" });
      const askedA = await nextEvent(rt, "request.opened", (e) => e.runId === ra.runId);
      const rb = await rt.sendMessage({ threadId: b.threadId, text: "[B]" });
      const askedB = await nextEvent(rt, "request.opened", (e) => e.runId === rb.runId);
      // Both turns are open now; answer them in the opposite order.
      await rt.respond({ requestId: askedB.event.requestId, response: { kind: "decision", decision: "accept" } });
      const runB = await rt.waitForRun(rb.runId);
      await rt.respond({ requestId: askedA.event.requestId, response: { kind: "decision", decision: "accept" } });
      const runA = await rt.waitForRun(ra.runId);
      expect([runA.status, replies(runA.items)]).toEqual(["completed", ["A reply"]]);
      expect([runB.status, replies(runB.items)]).toEqual(["completed", ["B reply"]]);
      const bound = ofType(events, "provider_thread.bound");
      expect(bound.map((e) => e.threadId)).toEqual([a.threadId, b.threadId]);
      expect(bound[0]!.sessionId).not.toBe(bound[1]!.sessionId);
      expect(ofType(events, "session.started")).toHaveLength(2);
      expect(ofType(events, "warning")).toEqual([]);
    } finally {
      await cleanup();
    }
  });

  it("without turn terminals, one thread going idle does not complete another thread's run (review a2)", async () => {
    const adapter = createScriptedAdapter({ capabilities: { turns: { emitsTurnCompleted: false } }, script });
    const { rt, events, cleanup } = await openTestRuntime({ s: adapter });
    try {
      const a = await rt.createThread({ providerTarget: "s" });
      const b = await rt.createThread({ providerTarget: "s" });
      const ra = await rt.sendMessage({ threadId: a.threadId, text: "[A]" });
      const askedA = await nextEvent(rt, "request.opened", (e) => e.runId === ra.runId);
      const rb = await rt.sendMessage({ threadId: b.threadId, text: "[B]" });
      const askedB = await nextEvent(rt, "request.opened", (e) => e.runId === rb.runId);
      await rt.respond({ requestId: askedB.event.requestId, response: { kind: "decision", decision: "accept" } });
      const runB = await rt.waitForRun(rb.runId);
      expect([runB.status, replies(runB.items)]).toEqual(["completed", ["B reply"]]);
      // B's session went idle; A's run is untouched and still waits for its answer.
      expect((await rt.readThread(a.threadId)).runs[0]!.status).toBe("waiting");
      expect(ofType(events, "run.terminal").map((e) => e.runId)).toEqual([rb.runId]);

      await rt.respond({ requestId: askedA.event.requestId, response: { kind: "decision", decision: "accept" } });
      const runA = await rt.waitForRun(ra.runId);
      expect([runA.status, replies(runA.items)]).toEqual(["completed", ["A reply"]]);
      const inferred = ofType(events, "policy.applied").filter((e) => e.policy === "terminal_inferred_from_idle");
      expect(inferred.map((e) => [e.runId, e.capability, e.outcome])).toEqual([
        [rb.runId, "turns.emitsTurnCompleted", "fallback"],
        [ra.runId, "turns.emitsTurnCompleted", "fallback"],
      ]);
      const bound = ofType(events, "provider_thread.bound");
      expect(new Set(bound.map((e) => e.sessionId)).size).toBe(2);
    } finally {
      await cleanup();
    }
  });
});
