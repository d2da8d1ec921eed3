import { afterEach, describe, expect, it, vi } from "vitest";
import { createScriptedAdapter, TillerError } from "../../src/index.js";
import type { ProviderAdapter, ProviderAdapterEvent, ProviderEvent, ScriptStep } from "../../src/index.js";
import { deferred, holdSessionStart, said, nextEvent, ofType, openTestRuntime, override, recordCalls, rejection } from "../support/runtime.js";

/**
 * Regression tests for the defects found in the second review (repros s1..s13). Each test
 * drives the real runtime through a scripted provider, wrapped where the defect needs a
 * misbehaving host (a late reply, a trailing event, a stream that ends). No test waits on
 * time: they wait on durable events, on runs, or on provider frames the runtime consumed.
 */

const hang: ScriptStep[] = [{ type: "text", text: "working" }, { type: "hang" }];

/** Every item of a run as `kind:text`. */
const itemsOf = (items: Array<{ kind: string; text?: string | null }>) => items.map((i) => `${i.kind}:${i.text ?? ""}`);

/**
 * A host whose reply to `sendRun` arrives only after the runtime consumed that turn's
 * terminal (events and RPC replies travel separately). Needs native turn refs.
 */
function repliesAfterTerminal(adapter: ProviderAdapter) {
  const consumed = new Map<string, { promise: Promise<void>; resolve: () => void }>();
  const slot = (turnRef: string) => {
    let entry = consumed.get(turnRef);
    if (!entry) consumed.set(turnRef, (entry = deferred()));
    return entry;
  };
  return override(adapter, {
    sendRun: async (input) => {
      const reply = await adapter.sendRun(input);
      if (reply.turnRef === null) throw new Error("test double needs native turn refs");
      await slot(reply.turnRef).promise;
      return reply;
    },
    streamEvents: () => ({
      async *[Symbol.asyncIterator]() {
        for await (const e of adapter.streamEvents()) {
          yield e;
          // The pump asks for the next frame only after it processed this one.
          if (e.event.type === "turn.terminal" && e.event.turnRef) slot(e.event.turnRef).resolve();
        }
      },
    }),
  });
}

/**
 * A host that sends one more assistant delta for the first turn after that turn's terminal,
 * with the same native thread and turn refs: it arrives right after the next turn's first
 * `after` frame (its turn.started, or its first text delta), i.e. while another turn is open
 * in the same session.
 */
function trailingDelta(adapter: ProviderAdapter, text: string, after: "turn.started" | "item.delta") {
  let armed = true;
  let late: { frame: ProviderAdapterEvent; turnRef: string | undefined } | null = null;
  const consumed = deferred();
  const wrapped = override(adapter, {
    streamEvents: () => ({
      async *[Symbol.asyncIterator]() {
        for await (const e of adapter.streamEvents()) {
          yield e;
          const event = e.event;
          if (armed && event.type === "turn.terminal") {
            armed = false;
            const trailing: ProviderEvent = { type: "item.delta", kind: "assistant_message", stream: "text", delta: text };
            if (event.threadRef) trailing.threadRef = event.threadRef;
            if (event.turnRef) trailing.turnRef = event.turnRef;
            late = { frame: { sessionId: e.sessionId, event: trailing }, turnRef: event.turnRef };
          } else if (late && event.type === after && event.turnRef !== late.turnRef) {
            const { frame } = late;
            late = null;
            yield frame;
            consumed.resolve(); // the pump asks for the next frame only after it processed this one
          }
        }
      },
    }),
  });
  return { adapter: wrapped, consumed: consumed.promise };
}

afterEach(() => {
  vi.restoreAllMocks();
});

describe("s9: a provider session lost with a run active and another queued", () => {
  it("fails the active run and starts the queued one on a new session, where it completes", async () => {
    const adapter = createScriptedAdapter({ script: ({ text }) => (text === "one" ? hang : [{ type: "text", text: `re: ${text}` }]) });
    const { rt, events, cleanup } = await openTestRuntime({ p: adapter });
    try {
      const { threadId } = await rt.createThread({ providerTarget: "p" });
      const r1 = await rt.sendMessage({ threadId, text: "one" });
      await nextEvent(rt, "node.delta", (e) => e.runId === r1.runId);
      const r2 = await rt.sendMessage({ threadId, text: "two", mode: "queue" });
      expect(r2).toMatchObject({ disposition: "queued", queuePosition: 1 });
      const first = ofType(events, "session.started")[0]!.sessionId;
      await adapter.stopSession({ sessionId: first }); // the provider host went away

      const run1 = await rt.waitForRun(r1.runId);
      expect([run1.status, run1.reason]).toEqual(["failed", "provider_session_lost"]);
      const run2 = await rt.waitForRun(r2.runId);
      expect([run2.status, run2.reason, run2.failure]).toEqual(["completed", null, null]);
      expect(said(run2.items)).toBe("re: two");

      const sessions = ofType(events, "session.started").map((s) => s.sessionId);
      expect(sessions).toHaveLength(2);
      expect(sessions[0]).toBe(first);
      expect(sessions[1]).not.toBe(first);
      // Run 2's provider thread lives in the new session.
      const bound = ofType(events, "provider_thread.bound");
      expect(bound.map((b) => b.sessionId)).toEqual(sessions);
      expect(run2.attempts.map((a) => a.providerThreadId)).toEqual([bound[1]!.providerThreadId]);
    } finally {
      await cleanup();
    }
  });
});

describe("s12: a target whose event stream ends", () => {
  it("fails its running run with a warning, and a later run fails host_unavailable instead of hanging", async () => {
    const base = createScriptedAdapter({ script: () => hang });
    const adapter = override(base, {
      streamEvents: () => ({
        async *[Symbol.asyncIterator]() {
          for await (const e of base.streamEvents()) {
            yield e;
            if (e.event.type === "item.delta") return; // the provider host died
          }
        },
      }),
    });
    const { rt, events, cleanup } = await openTestRuntime({ p: adapter });
    try {
      const { threadId } = await rt.createThread({ providerTarget: "p" });
      const r1 = await rt.sendMessage({ threadId, text: "go" });
      const run1 = await rt.waitForRun(r1.runId);
      expect([run1.status, run1.reason]).toEqual(["failed", "provider_session_lost"]);
      expect(run1.failure?.message).toMatch(/provider event stream ended/);
      expect(rt.actors.runs.has(r1.runId)).toBe(false);
      expect(ofType(events, "warning").map((w) => w.message)).toEqual(["p: provider event stream ended"]);

      const r2 = await rt.sendMessage({ threadId, text: "next" });
      const run2 = await rt.waitForRun(r2.runId);
      expect(run2.status).toBe("failed");
      expect(run2.failure).toMatchObject({ failureClass: "host_unavailable" });
      expect(run2.failure?.message).toMatch(/^p is unavailable: provider event stream ended/);
      // Only the first session was ever started: the dead target starts no more.
      expect(ofType(events, "session.started")).toHaveLength(1);
    } finally {
      await cleanup();
    }
  });
});

describe("s7: a provider event that trails its turn's terminal", () => {
  const script = ({ text }: { text: string }): ScriptStep[] => (text === "B" ? [{ type: "text", text: "b-working" }, { type: "hang" }] : [{ type: "text", text: "A reply" }]);
  const late = " [late text of A]";

  for (const [sameThread, after] of [
    [false, "turn.started"],
    [false, "item.delta"],
    [true, "turn.started"],
    [true, "item.delta"],
  ] as const) {
    it(`is fenced for its own run and never lands in the next run (${sameThread ? "same" : "another"} app thread, same session; arrives after the next turn's ${after})`, async () => {
      const trailing = trailingDelta(createScriptedAdapter({ script }), late, after);
      const { rt, events, cleanup } = await openTestRuntime({ p: trailing.adapter });
      try {
        const a = await rt.createThread({ providerTarget: "p" });
        const b = sameThread ? a : await rt.createThread({ providerTarget: "p" });
        const ra = await rt.sendMessage({ threadId: a.threadId, text: "A" });
        const runA = await rt.waitForRun(ra.runId);
        expect([runA.status, said(runA.items)]).toEqual(["completed", "A reply"]);

        const rb = await rt.sendMessage({ threadId: b.threadId, text: "B" });
        expect(rb.disposition).toBe("started");
        await trailing.consumed;
        await nextEvent(rt, "node.delta", (e) => e.runId === rb.runId);
        const snapshot = await rt.readThread(b.threadId);
        const runB = snapshot.runs.find((r) => r.runId === rb.runId)!;
        expect(runB.status).toBe("running");
        expect(itemsOf(runB.items)).toEqual(["user_message:B", "assistant_message:b-working"]);
        // Recorded as fenced for its own run, applied nowhere (nor to its own run after its end).
        expect(ofType(events, "event.fenced")).toEqual([
          { type: "event.fenced", threadId: a.threadId, runId: ra.runId, attemptId: runA.attempts[0]!.attemptId, providerEventType: "item.delta" },
        ]);
        expect(ofType(events, "node.delta").filter((d) => d.delta.includes("late text"))).toEqual([]);
        expect(said((await rt.readThread(a.threadId)).runs.find((r) => r.runId === ra.runId)!.items)).toBe("A reply");
        expect(ofType(events, "session.started")).toHaveLength(1);
        expect(ofType(events, "warning")).toEqual([]);

        await rt.interrupt({ runId: rb.runId });
        const endedB = await rt.waitForRun(rb.runId);
        expect(endedB.status).toBe("interrupted");
        expect(said(endedB.items)).toBe("b-working");
      } finally {
        await cleanup();
      }
    });
  }
});

describe("s5: a sendRun reply that arrives after the turn's terminal", () => {
  it("still binds the turn, returns the session to ready, and later handoffs cover only what was missed", async () => {
    const warn = vi.spyOn(console, "warn");
    const mk = (name: string) => createScriptedAdapter({ script: ({ text }) => [{ type: "text", text: `${name}: ${text}` }] });
    const alpha = recordCalls(repliesAfterTerminal(mk("alpha")));
    const { rt, events, cleanup } = await openTestRuntime({ alpha: alpha.adapter, beta: mk("beta") });
    try {
      const { threadId } = await rt.createThread({ providerTarget: "alpha" });
      const r1 = await rt.sendMessage({ threadId, text: "one" });
      const bound = nextEvent(rt, "attempt.turn_bound", (e) => e.runId === r1.runId);
      const run1 = await rt.waitForRun(r1.runId);
      expect([run1.status, said(run1.items)]).toEqual(["completed", "alpha: one"]);
      const turnBound = (await bound).event;
      expect(turnBound).toMatchObject({ threadId, runId: r1.runId, attemptId: run1.attempts[0]!.attemptId });
      expect(turnBound.nativeTurnRef).toEqual(expect.any(String));
      // The reply really was late: the run had ended before its turn was bound.
      const types = events.map((r) => r.event.type);
      expect(types.indexOf("run.terminal")).toBeLessThan(types.indexOf("attempt.turn_bound"));
      expect((await rt.readThread(threadId)).runs[0]!.attempts[0]!.providerThreadId).toBe(turnBound.providerThreadId);

      // The session (and the provider thread) went back to idle with the turn's end.
      const sessions = [...rt.actors.sessions.values()];
      expect(sessions).toHaveLength(1);
      const session = sessions[0]!.getSnapshot();
      expect([session.value, session.context.claims]).toEqual([{ ready: "countingDown" }, 0]);
      expect(ofType(events, "session.state").map((e) => e.status)).toEqual(["running", "ready"]);
      expect([...rt.actors.providerThreads.values()].map((a) => a.getSnapshot().value)).toEqual([{ loaded: "idle" }]);

      await rt.waitForRun((await rt.sendMessage({ threadId, text: "two", providerTarget: "beta" })).runId);
      const r3 = await rt.sendMessage({ threadId, text: "three", providerTarget: "alpha" });
      const bound3 = nextEvent(rt, "attempt.turn_bound", (e) => e.runId === r3.runId);
      const run3 = await rt.waitForRun(r3.runId);
      await bound3;
      expect([run3.status, said(run3.items)]).toEqual(["completed", "alpha: three"]);
      const handoffs = ofType(events, "handoff.created");
      expect(handoffs.map((h) => [h.toTarget, h.reason, h.strategy, h.coveredRunOrdinals])).toEqual([
        ["beta", "provider_switch", "full_thread_summary", [1]],
        ["alpha", "provider_switch", "delta_since_last_seen", [2]],
      ]);
      expect(handoffs[1]!.text).toContain("beta: two");
      expect(handoffs[1]!.text).not.toContain("alpha: one");
      const alphaSends = alpha.calls.filter((c) => c.method === "sendRun").map((c) => c.input);
      expect(alphaSends.map((s) => s.context)).toEqual([null, { kind: "handoff", text: handoffs[1]!.text, delivery: "developer" }]);
      expect(ofType(events, "session.state").map((e) => e.status)).toEqual(["running", "ready", "running", "ready", "running", "ready"]);
      expect(ofType(events, "warning")).toEqual([]);
      expect(warn).not.toHaveBeenCalled();
    } finally {
      await cleanup();
    }
  });
});

describe("s1: steers accepted while the run is still starting", () => {
  it("s1: a second steer is refused with conflict; the first is applied", async () => {
    const held = holdSessionStart(createScriptedAdapter({ script: () => hang }));
    const recorded = recordCalls(held.adapter);
    const { rt, events, cleanup } = await openTestRuntime({ p: recorded.adapter });
    try {
      const { threadId } = await rt.createThread({ providerTarget: "p" });
      const r1 = await rt.sendMessage({ threadId, text: "go" });
      expect((await rt.readThread(threadId)).runs[0]!.status).toBe("starting");
      expect(await rt.sendMessage({ threadId, text: "steer A", mode: "steer" })).toMatchObject({ disposition: "steered", via: "native", runId: r1.runId });
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

  it("s1b: a steer accepted while starting, then an interrupt: never sent, and a warning says so", async () => {
    const held = holdSessionStart(createScriptedAdapter({ script: () => hang }));
    const recorded = recordCalls(held.adapter);
    const { rt, events, cleanup } = await openTestRuntime({ p: recorded.adapter });
    try {
      const { threadId } = await rt.createThread({ providerTarget: "p" });
      const r1 = await rt.sendMessage({ threadId, text: "go" });
      expect(await rt.sendMessage({ threadId, text: "steer A", mode: "steer" })).toMatchObject({ disposition: "steered", via: "native", runId: r1.runId });
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

describe("s10: a native steer acknowledged after the run ended", () => {
  it("is still recorded as steer.applied", async () => {
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
      expect(await rt.sendMessage({ threadId, text: "also do X", mode: "steer" })).toMatchObject({ disposition: "steered", via: "native", runId: r1.runId });
      const applied = nextEvent(rt, "steer.applied", (e) => e.runId === r1.runId);
      await taken.promise; // the provider holds the steer; its turn goes on once answered
      await rt.respond({ requestId: opened.event.requestId, response: { kind: "decision", decision: "accept" } });
      const run = await rt.waitForRun(r1.runId);
      expect(run.status).toBe("completed");
      // The provider did take it: its reply shows the steer.
      expect(said(run.items)).toBe("working(steered: also do X)  done");
      expect((await applied).event).toMatchObject({ threadId, runId: r1.runId, attemptId: run.attempts[0]!.attemptId, text: "also do X", via: "native" });
      const types = events.map((r) => r.event.type);
      expect(types.indexOf("run.terminal")).toBeLessThan(types.indexOf("steer.applied"));
      expect(ofType(events, "steer.applied")).toHaveLength(1);
      expect(ofType(events, "warning")).toEqual([]);
    } finally {
      await cleanup();
    }
  });
});

describe("s2: a handoff carried by a turn while a later run is queued", () => {
  it("appears in the run whose turn carried it", async () => {
    const alpha = createScriptedAdapter({ script: ({ text }) => (text === "one" ? hang : [{ type: "text", text: `alpha: ${text}` }]) });
    const beta = createScriptedAdapter({ script: ({ text }) => [{ type: "text", text: `beta: ${text}` }] });
    const { rt, events, cleanup } = await openTestRuntime({ alpha, beta });
    try {
      const { threadId } = await rt.createThread({ providerTarget: "alpha" });
      const r1 = await rt.sendMessage({ threadId, text: "one" });
      await nextEvent(rt, "node.delta", (e) => e.runId === r1.runId);
      const r2 = await rt.sendMessage({ threadId, text: "two", providerTarget: "beta", mode: "queue" });
      const r3 = await rt.sendMessage({ threadId, text: "three", providerTarget: "beta", mode: "queue" });
      expect([r2.queuePosition, r3.queuePosition]).toEqual([1, 2]);
      await rt.interrupt({ runId: r1.runId });
      await rt.waitForRun(r2.runId);
      await rt.waitForRun(r3.runId);
      const snapshot = await rt.readThread(threadId);
      expect(snapshot.runs.map((r) => [r.ordinal, r.status, r.items.map((i) => i.kind)])).toEqual([
        [1, "interrupted", ["user_message", "assistant_message", "interrupt_request"]],
        [2, "completed", ["user_message", "handoff", "assistant_message"]],
        [3, "completed", ["user_message", "assistant_message"]],
      ]);
      const handoffs = ofType(events, "handoff.created");
      expect(handoffs.map((h) => [h.runId, h.toTarget, h.coveredRunOrdinals])).toEqual([[r2.runId, "beta", [1]]]);
    } finally {
      await cleanup();
    }
  });
});

describe("s3: a fork's context on another provider", () => {
  const mk = (name: string) => recordCalls(createScriptedAdapter({ script: ({ text }) => [{ type: "text", text: `${name}: ${text}` }] }));

  it("native fork, then a switch: the new provider hears the parent's history and the fork's own runs", async () => {
    const alpha = mk("alpha");
    const beta = mk("beta");
    const { rt, events, cleanup } = await openTestRuntime({ alpha: alpha.adapter, beta: beta.adapter });
    try {
      const { threadId } = await rt.createThread({ providerTarget: "alpha" });
      const parentRun = await rt.sendMessage({ threadId, text: "parent secret 42" });
      await rt.waitForRun(parentRun.runId);
      const fork = await rt.forkThread({ threadId, providerTarget: "alpha" });
      const f1 = await rt.sendMessage({ threadId: fork.threadId, text: "fork run one" });
      expect((await rt.waitForRun(f1.runId)).status).toBe("completed");
      expect(ofType(events, "fork.resolved").map((e) => [e.threadId, e.resolution])).toEqual([[fork.threadId, "native"]]);
      const f2 = await rt.waitForRun((await rt.sendMessage({ threadId: fork.threadId, text: "fork run two", providerTarget: "beta" })).runId);
      expect([f2.status, said(f2.items)]).toEqual(["completed", "beta: fork run two"]);

      // What beta is told: the parent's run up to the fork point, and the fork's own run on alpha.
      const sends = beta.calls.filter((c) => c.method === "sendRun").map((c) => c.input);
      expect(sends.map((s) => s.text)).toEqual(["fork run two"]);
      expect(sends[0]!.context).toMatchObject({ kind: "handoff", delivery: "developer" });
      expect(sends[0]!.context.text).toContain("user: parent secret 42");
      expect(sends[0]!.context.text).toContain("user: fork run one");

      const handoffs = ofType(events, "handoff.created").filter((h) => h.threadId === fork.threadId);
      expect(handoffs.map((h) => [h.runId, h.fromTarget, h.toTarget, h.reason, h.strategy, h.coveredRunIds, h.coveredRunOrdinals])).toEqual([
        [f2.runId, "alpha", "beta", "provider_switch", "full_thread_summary", [parentRun.runId, f1.runId], [1]],
      ]);
      expect(sends[0]!.context.text).toBe(handoffs[0]!.text);
    } finally {
      await cleanup();
    }
  });

  it("portable fork, then a switch: a fork handoff first, then a switch handoff with both histories", async () => {
    const alpha = mk("alpha");
    const beta = mk("beta");
    const { rt, events, cleanup } = await openTestRuntime({ alpha: alpha.adapter, beta: beta.adapter });
    try {
      const { threadId } = await rt.createThread({ providerTarget: "alpha" });
      const parentRun = await rt.sendMessage({ threadId, text: "parent secret 42" });
      await rt.waitForRun(parentRun.runId);
      const fork = await rt.forkThread({ threadId, providerTarget: "beta" });
      const f1 = await rt.sendMessage({ threadId: fork.threadId, text: "fork run one" });
      expect((await rt.waitForRun(f1.runId)).status).toBe("completed");
      expect(ofType(events, "fork.resolved").map((e) => [e.threadId, e.resolution])).toEqual([[fork.threadId, "portable"]]);
      const alphaSendsBefore = alpha.calls.filter((c) => c.method === "sendRun").length;
      const f2 = await rt.waitForRun((await rt.sendMessage({ threadId: fork.threadId, text: "fork run two", providerTarget: "alpha" })).runId);
      expect([f2.status, said(f2.items)]).toEqual(["completed", "alpha: fork run two"]);

      // beta's first turn of the fork carried the parent's history as a portable fork.
      const betaSends = beta.calls.filter((c) => c.method === "sendRun").map((c) => c.input);
      expect(betaSends.map((s) => s.text)).toEqual(["fork run one"]);
      expect(betaSends[0]!.context).toMatchObject({ kind: "fork", delivery: "developer" });
      expect(betaSends[0]!.context.text).toContain("user: parent secret 42");
      // alpha is told the parent's history and the fork's own run on beta.
      const alphaSend = alpha.calls.filter((c) => c.method === "sendRun")[alphaSendsBefore]!.input;
      expect(alphaSend.text).toBe("fork run two");
      expect(alphaSend.context).toMatchObject({ kind: "handoff", delivery: "developer" });
      expect(alphaSend.context.text).toContain("user: parent secret 42");
      expect(alphaSend.context.text).toContain("user: fork run one");

      const handoffs = ofType(events, "handoff.created").filter((h) => h.threadId === fork.threadId);
      expect(handoffs.map((h) => [h.runId, h.fromTarget, h.toTarget, h.reason, h.strategy, h.coveredRunIds, h.coveredRunOrdinals])).toEqual([
        [f1.runId, "alpha", "beta", "fork", "full_thread_summary", [parentRun.runId], []],
        // alpha's provider thread of the fork is fresh, and the fork has a run of its own: a switch, with everything.
        [f2.runId, "beta", "alpha", "provider_switch", "full_thread_summary", [parentRun.runId, f1.runId], [1]],
      ]);
      expect(betaSends[0]!.context.text).toBe(handoffs[0]!.text);
      expect(alphaSend.context.text).toBe(handoffs[1]!.text);
    } finally {
      await cleanup();
    }
  });

  it("s3b: a portable fork's broken provider thread is replaced with the parent's history and the fork's runs", async () => {
    const alpha = createScriptedAdapter();
    const beta = recordCalls(
      createScriptedAdapter({
        script: ({ text }) =>
          text.includes("[break]") ? [{ type: "text", text: "x" }, { type: "fail", message: "thread corrupt", broken: true }] : [{ type: "text", text: `beta: ${text}` }],
      }),
    );
    const { rt, events, cleanup } = await openTestRuntime({ alpha, beta: beta.adapter });
    try {
      const { threadId } = await rt.createThread({ providerTarget: "alpha" });
      const parentRun = await rt.sendMessage({ threadId, text: "parent secret 42" });
      await rt.waitForRun(parentRun.runId);
      const fork = await rt.forkThread({ threadId, providerTarget: "beta" });
      const f1 = await rt.sendMessage({ threadId: fork.threadId, text: "fork fact 7" });
      expect((await rt.waitForRun(f1.runId)).status).toBe("completed");
      const broken = await rt.waitForRun((await rt.sendMessage({ threadId: fork.threadId, text: "[break]" })).runId);
      expect([broken.status, broken.failure?.message]).toEqual(["failed", "thread corrupt"]);
      const after = await rt.waitForRun((await rt.sendMessage({ threadId: fork.threadId, text: "after" })).runId);
      expect([after.status, said(after.items)]).toEqual(["completed", "beta: after"]);

      // The replacement is told the parent's history and every run of the fork, the broken one included.
      const last = beta.calls.filter((c) => c.method === "sendRun").at(-1)!.input;
      expect(last.text).toBe("after");
      expect(last.context).toMatchObject({ kind: "rebuild", delivery: "developer" });
      expect(last.context.text).toContain("user: parent secret 42");
      expect(last.context.text).toContain("user: fork fact 7");
      expect(last.context.text).toContain("user: [break]");

      expect(ofType(events, "provider_thread.bound").filter((b) => b.threadId === fork.threadId).map((b) => b.via)).toEqual(["created", "replaced"]);
      const handoffs = ofType(events, "handoff.created").filter((h) => h.threadId === fork.threadId);
      expect(handoffs.map((h) => [h.runId, h.toTarget, h.reason, h.strategy, h.coveredRunIds, h.coveredRunOrdinals])).toEqual([
        [f1.runId, "beta", "fork", "full_thread_summary", [parentRun.runId], []],
        [after.runId, "beta", "thread_broken", "full_thread_summary", [parentRun.runId, f1.runId, broken.runId], [1, 2]],
      ]);
      expect(last.context.text).toBe(handoffs[1]!.text);
      // Inherited runs are labelled as such, so two "run 1"s never read alike.
      expect(last.context.text).toContain("[before the fork, run 1, completed] user: parent secret 42");
      expect(last.context.text).toContain("[run 1, completed] user: fork fact 7");
    } finally {
      await cleanup();
    }
  });
});

describe("s4: restart reorders the queue", () => {
  it("a provider returning later still gets the run it missed", async () => {
    const alpha = recordCalls(createScriptedAdapter({ script: ({ text }) => (text === "one" ? hang : [{ type: "text", text: `alpha: ${text}` }]) }));
    const beta = createScriptedAdapter({ script: ({ text }) => [{ type: "text", text: `beta: ${text}` }] });
    const { rt, events, cleanup } = await openTestRuntime({ alpha: alpha.adapter, beta });
    try {
      const { threadId } = await rt.createThread({ providerTarget: "alpha" });
      const r1 = await rt.sendMessage({ threadId, text: "one" });
      await nextEvent(rt, "node.delta", (e) => e.runId === r1.runId);
      const r2 = await rt.sendMessage({ threadId, text: "beta fact 99", providerTarget: "beta", mode: "queue" });
      const r3 = await rt.sendMessage({ threadId, text: "redo", providerTarget: "alpha", mode: "restart" });
      expect(r3.disposition).toBe("restarting");
      await rt.waitForRun(r2.runId);
      await rt.waitForRun(r3.runId);
      const r4 = await rt.waitForRun((await rt.sendMessage({ threadId, text: "what did beta learn?", providerTarget: "alpha" })).runId);
      expect(r4.status).toBe("completed");

      // alpha, back after beta's run, is told what it missed.
      const last = alpha.calls.filter((c) => c.method === "sendRun").at(-1)!.input;
      expect(last.text).toBe("what did beta learn?");
      expect(last.context).toMatchObject({ kind: "handoff", delivery: "developer" });
      expect(last.context.text).toContain("user: beta fact 99");

      const snapshot = await rt.readThread(threadId);
      expect(snapshot.runs.map((r) => `${r.ordinal}:${r.providerTarget}:${r.status}`)).toEqual([
        "1:alpha:interrupted",
        "2:beta:completed",
        "3:alpha:completed",
        "4:alpha:completed",
      ]);
      // The restart ran ahead of the older queued run.
      expect(ofType(events, "run.terminal").map((e) => e.runId)).toEqual([r1.runId, r3.runId, r2.runId, r4.runId]);
      const handoffs = ofType(events, "handoff.created");
      expect(handoffs.map((h) => [h.runId, h.toTarget, h.coveredRunOrdinals])).toEqual([
        [r2.runId, "beta", [1, 3]],
        [r4.runId, "alpha", [2]],
      ]);
      expect(last.context.text).toBe(handoffs[1]!.text);
      expect(last.context.text).not.toContain("user: redo");
    } finally {
      await cleanup();
    }
  });
});

describe("s6: command ids and receipts", () => {
  it("a generated command id never equals a caller-supplied one already used", async () => {
    const { rt, cleanup } = await openTestRuntime({ p: createScriptedAdapter() });
    try {
      const a = await rt.createThread({ providerTarget: "p", commandId: "cmd_1", title: "A" });
      expect(a.commandId).toBe("cmd_1");
      const b = await rt.createThread({ providerTarget: "p", title: "B" });
      expect(b.commandId).not.toBe("cmd_1");
      expect(b.threadId).not.toBe(a.threadId);
      expect(await rt.createThread({ providerTarget: "p", commandId: b.commandId, title: "B" })).toEqual(b);
      expect(await rt.createThread({ providerTarget: "p", commandId: "cmd_1", title: "A" })).toEqual(a);
      expect(rt.listThreads().map((t) => [t.threadId, t.title])).toEqual([
        [a.threadId, "A"],
        [b.threadId, "B"],
      ]);
    } finally {
      await cleanup();
    }
  });

  it("every command returns a receipt whose id, repeated, returns the same receipt (in this life and the next)", async () => {
    const adapter = createScriptedAdapter({
      script: ({ text }) =>
        text === "ask" ? [{ type: "command", command: "make", output: "ok", approval: true }, { type: "text", text: "done" }] : text === "wait" ? hang : [{ type: "text", text: `re: ${text}` }],
    });
    const first = await openTestRuntime({ p: adapter });
    const receipts: Array<{ repeat: () => Promise<unknown>; receipt: { commandId: string } }> = [];
    let firstLife: string[];
    try {
      const { rt } = first;
      const created = await rt.createThread({ providerTarget: "p" });
      receipts.push({ receipt: created, repeat: () => rt.createThread({ providerTarget: "p", commandId: created.commandId }) });
      const { threadId } = created;

      const sent = await rt.sendMessage({ threadId, text: "ask" });
      receipts.push({ receipt: sent, repeat: () => rt.sendMessage({ threadId, text: "ask", commandId: sent.commandId }) });
      const opened = await nextEvent(rt, "request.opened", (e) => e.runId === sent.runId);
      const responded = await rt.respond({ requestId: opened.event.requestId, response: { kind: "decision", decision: "accept" } });
      expect(responded).toMatchObject({ requestId: opened.event.requestId, status: "accepted" });
      receipts.push({
        receipt: responded,
        repeat: () => rt.respond({ requestId: opened.event.requestId, response: { kind: "decision", decision: "accept" }, commandId: responded.commandId }),
      });
      expect((await rt.waitForRun(sent.runId)).status).toBe("completed");

      const waiting = await rt.sendMessage({ threadId, text: "wait" });
      receipts.push({ receipt: waiting, repeat: () => rt.sendMessage({ threadId, text: "wait", commandId: waiting.commandId }) });
      await nextEvent(rt, "node.delta", (e) => e.runId === waiting.runId);
      const interrupted = await rt.interrupt({ runId: waiting.runId });
      expect(interrupted).toMatchObject({ runId: waiting.runId, via: "native" });
      receipts.push({ receipt: interrupted, repeat: () => rt.interrupt({ runId: waiting.runId, commandId: interrupted.commandId }) });
      expect((await rt.waitForRun(waiting.runId)).status).toBe("interrupted");

      const forked = await rt.forkThread({ threadId });
      receipts.push({ receipt: forked, repeat: () => rt.forkThread({ threadId, commandId: forked.commandId }) });

      firstLife = receipts.map((r) => r.receipt.commandId);
      expect(new Set(firstLife).size).toBe(firstLife.length);
      for (const { receipt, repeat } of receipts) expect(await repeat()).toEqual(receipt);
      // Nothing ran twice.
      expect(rt.listThreads().map((t) => t.runs)).toEqual([2, 0]);
      expect(ofType(first.events, "command.receipt").map((e) => e.commandId)).toEqual(firstLife);
    } finally {
      await first.rt.close();
    }

    // Next life, a fresh deterministic id source: old ids still return their receipts, new ones are new.
    const second = await openTestRuntime({ p: createScriptedAdapter() }, { dataDir: first.dataDir });
    try {
      const { rt } = second;
      const [created] = receipts;
      expect(await rt.createThread({ providerTarget: "p", commandId: created!.receipt.commandId })).toEqual(created!.receipt);
      const fresh = await rt.createThread({ providerTarget: "p" });
      expect(firstLife).not.toContain(fresh.commandId);
      expect(rt.listThreads()).toHaveLength(3);
    } finally {
      await second.cleanup();
    }
  });
});

describe("s13: a provider thread rebuilt after a failed resume", () => {
  it("later switches back to it are provider_switch deltas, not resume_failed", async () => {
    const first = await openTestRuntime({ alpha: createScriptedAdapter(), beta: createScriptedAdapter() });
    const { threadId } = await first.rt.createThread({ providerTarget: "alpha" });
    await first.rt.waitForRun((await first.rt.sendMessage({ threadId, text: "one" })).runId);
    await first.rt.close();

    // A new backend: the stored cursor is unknown there, so the resume fails and alpha rebuilds.
    const alpha = recordCalls(createScriptedAdapter());
    const second = await openTestRuntime({ alpha: alpha.adapter, beta: createScriptedAdapter() }, { dataDir: first.dataDir });
    try {
      const { rt, events } = second;
      for (const [text, providerTarget] of [["two", "alpha"], ["three", "beta"], ["four", "alpha"]] as const) {
        expect((await rt.waitForRun((await rt.sendMessage({ threadId, text, providerTarget })).runId)).status).toBe("completed");
      }
      // Returning to alpha re-decides how it catches up: it takes deltas, so its thread is resumed.
      expect(ofType(events, "provider_thread.bound").map((b) => [b.providerTarget, b.via])).toEqual([
        ["alpha", "rebuilt"],
        ["beta", "created"],
        ["alpha", "resumed"],
      ]);
      const handoffs = ofType(events, "handoff.created");
      expect(handoffs.map((h) => [h.toTarget, h.reason, h.strategy, h.coveredRunOrdinals])).toEqual([
        ["alpha", "resume_failed", "full_thread_summary", [1]],
        ["beta", "provider_switch", "full_thread_summary", [1, 2]],
        ["alpha", "provider_switch", "delta_since_last_seen", [3]],
      ]);
      const contexts = alpha.calls.filter((c) => c.method === "sendRun").map((c) => c.input.context);
      expect(contexts.map((c) => c?.kind ?? null)).toEqual(["rebuild", "handoff"]);
      expect(contexts[1]).toEqual({ kind: "handoff", text: handoffs[2]!.text, delivery: "developer" });
      expect(handoffs[2]!.text).toContain("user: three");
      expect(handoffs[2]!.text).not.toContain("user: two");
    } finally {
      await second.cleanup();
    }
  });
});
