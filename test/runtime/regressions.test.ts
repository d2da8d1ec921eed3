import { describe, expect, it } from "vitest";
import { createRuntime, createScriptedAdapter, fullCapabilities, keyedScript, TillerError } from "../../src/index.js";
import type { ProviderAdapter, ProviderAdapterEvent, ProviderCapabilities, ScriptStep } from "../../src/index.js";
import { deferred, gateEvents, holdSessionStart, interruptFails, interruptFailsOnce, said, nextEvent, ofType, openTestRuntime, override, recordCalls, rejection } from "../support/runtime.js";

/**
 * Regression tests for defects found in review (repros a1..a19). Each test drives the
 * real runtime through a scripted provider, wrapped where the defect needs a misbehaving
 * host (a failing call, a late reply, a bad frame). No test waits on time: they wait on
 * durable events, on runs, or on frames the runtime has consumed.
 */

const hang: ScriptStep[] = [{ type: "text", text: "working" }, { type: "hang" }];
const none = { nativeThreadIds: "none", nativeTurnIds: "none", nativeItemIds: "none", nativeRequestIds: "none" } as const;

/**
 * Resolves once the runtime has consumed (validated, normalized, applied) the first frame
 * that matches: the pump asks for the next frame only after it processed the previous one.
 */
function tapEvents(adapter: ProviderAdapter, match: (e: ProviderAdapterEvent) => boolean) {
  const consumed = deferred();
  const wrapped = override(adapter, {
    streamEvents: () => ({
      async *[Symbol.asyncIterator]() {
        for await (const e of adapter.streamEvents()) {
          yield e;
          if (match(e)) consumed.resolve();
        }
      },
    }),
  });
  return { adapter: wrapped, consumed: consumed.promise };
}

describe("a14/a15: a bad provider frame is a protocol_error warning, never the end of the event pump", () => {
  it("skips frames that fail validation and keeps delivering the target's events", async () => {
    const base = createScriptedAdapter();
    let injected = false;
    const adapter = override(base, {
      streamEvents: () => ({
        async *[Symbol.asyncIterator]() {
          for await (const e of base.streamEvents()) {
            if (!injected) {
              injected = true;
              const bad: unknown[] = [
                { sessionId: e.sessionId, event: null },
                null,
                { sessionId: e.sessionId, event: { type: "no.such.event" } },
                { event: { type: "turn.started" } }, // valid event, no session id
              ];
              for (const frame of bad) yield frame as ProviderAdapterEvent;
            }
            yield e;
          }
        },
      }),
    });
    const { rt, events, cleanup } = await openTestRuntime({ s: adapter });
    try {
      const { threadId } = await rt.createThread({ providerTarget: "s" });
      const first = await rt.waitForRun((await rt.sendMessage({ threadId, text: "hello" })).runId);
      expect(first.status).toBe("completed");
      expect(injected).toBe(true);
      const warnings = ofType(events, "warning").map((w) => w.message);
      expect(warnings).toHaveLength(4);
      for (const w of warnings) expect(w).toMatch(/^protocol_error: s sent an invalid/);
      // The pump is still alive: a later run on the same target completes.
      const second = await rt.waitForRun((await rt.sendMessage({ threadId, text: "again" })).runId);
      expect([second.status, second.items.at(-1)?.text]).toEqual(["completed", "You said: again"]);
    } finally {
      await cleanup();
    }
  });

  it("rejects a non-JSON-serializable tool input without crashing, and the log stays readable", async () => {
    const base = createScriptedAdapter({ script: () => [{ type: "tool", name: "t", output: "o" }, { type: "text", text: "done" }] });
    const adapter = override(base, {
      streamEvents: () => ({
        async *[Symbol.asyncIterator]() {
          for await (const e of base.streamEvents()) {
            if (e.event.type === "item.started" && e.event.kind === "tool_call") {
              const input: Record<string, unknown> = { a: 1 };
              input.self = input; // e.g. an SDK object handed through as tool input
              yield { ...e, event: { ...e.event, detail: { ...e.event.detail, input } } };
            } else yield e;
          }
        },
      }),
    });
    const first = await openTestRuntime({ s: adapter });
    let threadId: string;
    try {
      ({ threadId } = await first.rt.createThread({ providerTarget: "s" }));
      const run = await first.rt.waitForRun((await first.rt.sendMessage({ threadId, text: "hello" })).runId);
      expect(run.status).toBe("completed");
      expect(run.items.find((i) => i.kind === "assistant_message")?.text).toBe("done");
      const warnings = ofType(first.events, "warning").map((w) => w.message);
      expect(warnings).toEqual([expect.stringMatching(/^protocol_error: s sent an invalid item\.started event: must be JSON-serializable/)]);
      expect(first.rt.actors.runs.has(run.runId)).toBe(false);
      const again = await first.rt.waitForRun((await first.rt.sendMessage({ threadId, text: "again" })).runId);
      expect(again.status).toBe("completed");
    } finally {
      await first.rt.close();
    }

    // Nothing unserializable reached the log: it reopens.
    const second = await openTestRuntime({ s: createScriptedAdapter() }, { dataDir: first.dataDir });
    try {
      expect(second.rt.listThreads()).toEqual([expect.objectContaining({ threadId, runs: 2 })]);
    } finally {
      await second.cleanup();
    }
  });
});

describe("a1/a2: threads that cannot be told apart get their own sessions", () => {
  /** Each thread's turn asks for approval first, so both turns are in flight at once. */
  const script = keyedScript({
    "[A]": [{ type: "command", command: "make a", output: "", approval: true }, { type: "text", text: "A reply" }],
    "[B]": [{ type: "command", command: "make b", output: "", approval: true }, { type: "text", text: "B reply" }],
  });
  const replies = (items: Array<{ kind: string; text?: string }>) => items.filter((i) => i.kind === "assistant_message").map((i) => i.text);

  it("a1: identity none, multi-thread sessions: concurrent runs each get their own reply", async () => {
    const adapter = createScriptedAdapter({ capabilities: { identity: none, sessions: { supportsMultipleProviderThreadsPerSession: true } }, script });
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

  it("a2: without turn terminals, one thread going idle does not complete another thread's run", async () => {
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

describe("a3: a request opened while the run is still starting", () => {
  it("is applied (not fenced), the run waits, and answering it completes the run", async () => {
    const base = createScriptedAdapter({
      capabilities: { turns: { emitsTurnStarted: false } },
      script: () => [{ type: "command", command: "rm -rf build", output: "ok", approval: true }, { type: "text", text: "done" }],
    });
    // A host that streams notifications before its reply to sendRun.
    const tapped = tapEvents(base, (e) => e.event.type === "request.opened");
    const adapter = override(tapped.adapter, {
      sendRun: async (input) => {
        const reply = await base.sendRun(input);
        await tapped.consumed;
        return reply;
      },
    });
    const { rt, events, cleanup } = await openTestRuntime({ s: adapter });
    try {
      const { threadId } = await rt.createThread({ providerTarget: "s" });
      const { runId } = await rt.sendMessage({ threadId, text: "go" });
      const opened = await nextEvent(rt, "request.opened", (e) => e.runId === runId);
      await nextEvent(rt, "attempt.turn_bound", (e) => e.runId === runId);
      const types = events.map((r) => r.event.type);
      // The ordering this test is about: the request came before the reply to sendRun.
      expect(types.indexOf("request.opened")).toBeLessThan(types.indexOf("attempt.turn_bound"));
      expect(ofType(events, "event.fenced")).toEqual([]);
      const snapshot = await rt.readThread(threadId);
      expect(snapshot.runs[0]!.status).toBe("waiting");
      expect(snapshot.pendingRequests.map((r) => r.requestId)).toEqual([opened.event.requestId]);

      await rt.respond({ requestId: opened.event.requestId, response: { kind: "decision", decision: "accept" } });
      const run = await rt.waitForRun(runId);
      expect(run.status).toBe("completed");
      expect(run.items.find((i) => i.kind === "assistant_message")?.text).toBe("done");
    } finally {
      await cleanup();
    }
  });
});

describe("a4/a5/a6/a7: interrupts", () => {
  it("a4: an interrupt the provider failed to take once is retried while the turn is live, and delivered", async () => {
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
  });

  it("a4b: an interrupt the provider never takes is reported as interrupt.failed (reason, tries), and stays available", async () => {
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
  });

  it("a5: a steer after an interrupt (before its terminal) is refused with conflict; the run ends interrupted", async () => {
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

  it("a6: an interrupt asked while starting is delivered as a session stop once the turn runs", async () => {
    const held = holdSessionStart(
      createScriptedAdapter({
        capabilities: { turns: { supportsInterrupt: false, supportsSteeringByInterruptRestart: false, supportsActiveSteering: false } },
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

  it("a7: an interrupt-restart steer whose interrupt fails leaves attempt 1 running; a later interrupt works", async () => {
    const base = createScriptedAdapter({ capabilities: { turns: { supportsActiveSteering: false } }, script: () => hang });
    const { adapter, calls } = interruptFails(base, 6, "transient");
    const { rt, events, cleanup } = await openTestRuntime({ s: adapter });
    try {
      const { threadId } = await rt.createThread({ providerTarget: "s" });
      const { runId } = await rt.sendMessage({ threadId, text: "go" });
      await nextEvent(rt, "node.delta", (e) => e.runId === runId);
      expect(await rt.sendMessage({ threadId, text: "do X", mode: "steer" })).toMatchObject({ disposition: "steered", via: "interrupt_restart" });
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

describe("a11: an auto follow-up while the run is starting", () => {
  it("is deferred on a natively steerable provider and applied once the turn runs", async () => {
    const held = holdSessionStart(
      createScriptedAdapter({
        script: () => [{ type: "command", command: "make", output: "ok", approval: true }, { type: "text", text: "done" }],
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
  });
});

describe("a12: sendRun fails after the turn already started", () => {
  it("ends the run failed instead of leaving it running", async () => {
    const base = createScriptedAdapter({ script: () => [{ type: "text", text: "x" }, { type: "hang" }] });
    const tapped = tapEvents(base, (e) => e.event.type === "turn.started");
    const adapter = override(tapped.adapter, {
      sendRun: async (input) => {
        await base.sendRun(input);
        await tapped.consumed;
        throw new Error("sendRun RPC timed out");
      },
    });
    const { rt, events, cleanup } = await openTestRuntime({ s: adapter });
    try {
      const { threadId } = await rt.createThread({ providerTarget: "s" });
      const { runId } = await rt.sendMessage({ threadId, text: "go" });
      const run = await rt.waitForRun(runId);
      expect([run.status, run.reason]).toEqual(["failed", "start_failed"]);
      expect(run.failure).toMatchObject({ failureClass: "provider_error", message: "sendRun RPC timed out" });
      // The turn had started (the run was running) before the failure ended it.
      const states = ofType(events, "run.state").filter((e) => e.runId === runId).map((e) => e.status);
      expect(states).toEqual(["starting", "running"]);
      expect(run.attempts.map((a) => a.status)).toEqual(["failed"]);
      expect(rt.actors.runs.has(runId)).toBe(false);
      // The half-started provider turn was stopped, so the thread's next run works.
      const next = await rt.waitForRun((await rt.sendMessage({ threadId, text: "again" })).runId);
      expect(next.status).toBe("failed"); // this adapter's sendRun always fails, but not with "a turn is already running"
      expect(next.failure?.message).toBe("sendRun RPC timed out");
    } finally {
      await cleanup();
    }
  });
});

describe("a13: a fork whose fork point ran partly on another provider", () => {
  it("resolves portable on alpha (no native fork from a foreign turn) and its runs complete", async () => {
    const mk = (name: string) => recordCalls(createScriptedAdapter({ script: ({ text }) => [{ type: "text", text: `${name}: ${text}` }] }));
    const alpha = mk("alpha");
    const beta = mk("beta");
    const { rt, events, cleanup } = await openTestRuntime({ alpha: alpha.adapter, beta: beta.adapter });
    try {
      const { threadId } = await rt.createThread({ providerTarget: "alpha" });
      await rt.waitForRun((await rt.sendMessage({ threadId, text: "one" })).runId);
      const r2 = await rt.sendMessage({ threadId, text: "two", providerTarget: "beta" });
      await rt.waitForRun(r2.runId);
      await rt.waitForRun((await rt.sendMessage({ threadId, text: "three", providerTarget: "alpha" })).runId);
      const fork = await rt.forkThread({ threadId, afterRunId: r2.runId, providerTarget: "alpha" });
      const sendsBefore = alpha.calls.filter((c) => c.method === "sendRun").length;
      for (const text of ["fork-1", "fork-2"]) {
        const run = await rt.waitForRun((await rt.sendMessage({ threadId: fork.threadId, text })).runId);
        expect([run.status, run.failure, run.providerTarget]).toEqual(["completed", null, "alpha"]);
        expect(run.items.at(-1)?.text).toBe(`alpha: ${text}`);
      }
      const resolved = ofType(events, "fork.resolved").filter((e) => e.threadId === fork.threadId);
      expect(resolved.map((e) => e.resolution)).toEqual(["portable"]);
      expect([...alpha.calls, ...beta.calls].filter((c) => c.method === "forkThread")).toEqual([]);
      expect(ofType(events, "policy.applied").filter((e) => e.threadId === fork.threadId).map((e) => e.policy)).toEqual(["synthetic_fork"]);
      const forkSends = alpha.calls.filter((c) => c.method === "sendRun").slice(sendsBefore);
      expect(forkSends[0]!.input.context).toMatchObject({ kind: "fork" });
      expect(forkSends[0]!.input.context.text).toContain("user: one");
      expect(forkSends[0]!.input.context.text).toContain("user: two");
      expect(forkSends[0]!.input.context.text).not.toContain("user: three");
      expect(forkSends[1]!.input.context).toBeNull();
    } finally {
      await cleanup();
    }
  });
});

describe("a8/a16: handoffs on provider switches", () => {
  it("a8: returning to a provider hands it a delta of only what it missed", async () => {
    const mk = (name: string) => recordCalls(createScriptedAdapter({ script: ({ text }) => [{ type: "text", text: `${name} saw ${text}` }] }));
    const alpha = mk("alpha");
    const beta = mk("beta");
    const { rt, events, cleanup } = await openTestRuntime({ alpha: alpha.adapter, beta: beta.adapter });
    try {
      const { threadId } = await rt.createThread({ providerTarget: "alpha" });
      await rt.waitForRun((await rt.sendMessage({ threadId, text: "secret is 42" })).runId);
      await rt.waitForRun((await rt.sendMessage({ threadId, text: "the plan is B", providerTarget: "beta" })).runId);
      const back = await rt.waitForRun((await rt.sendMessage({ threadId, text: "what is the plan?", providerTarget: "alpha" })).runId);
      expect(back.status).toBe("completed");
      const handoffs = ofType(events, "handoff.created");
      expect(handoffs.map((h) => [h.fromTarget, h.toTarget, h.strategy, h.coveredRunOrdinals])).toEqual([
        ["alpha", "beta", "full_thread_summary", [1]],
        ["beta", "alpha", "delta_since_last_seen", [2]],
      ]);
      const delta = handoffs[1]!;
      expect(delta.text).toContain("the plan is B");
      expect(delta.text).not.toContain("secret is 42");
      const alphaSends = alpha.calls.filter((c) => c.method === "sendRun").map((c) => c.input);
      expect(alphaSends.map((s) => s.text)).toEqual(["secret is 42", "what is the plan?"]);
      expect(alphaSends[0]!.context).toBeNull();
      expect(alphaSends[1]!.context).toEqual({ kind: "handoff", text: delta.text, delivery: "developer" });
      const types = events.map((r) => r.event.type);
      expect(types.lastIndexOf("handoff.created")).toBeLessThan(types.lastIndexOf("attempt.turn_bound"));
    } finally {
      await cleanup();
    }
  });

  it("a16: a failed first send after a switch does not lose the handoff, and it is recorded once", async () => {
    const alpha = createScriptedAdapter({ script: ({ text }) => [{ type: "text", text: `alpha: ${text}` }] });
    const betaBase = createScriptedAdapter({ script: ({ text }) => [{ type: "text", text: `beta: ${text}` }] });
    let sends = 0;
    const beta = recordCalls(
      override(betaBase, {
        sendRun: async (input) => {
          sends += 1;
          if (sends === 1) throw new Error("transient 503");
          return betaBase.sendRun(input);
        },
      }),
    );
    const { rt, events, cleanup } = await openTestRuntime({ alpha, beta: beta.adapter });
    try {
      const { threadId } = await rt.createThread({ providerTarget: "alpha" });
      await rt.waitForRun((await rt.sendMessage({ threadId, text: "secret is 42" })).runId);
      const failed = await rt.waitForRun((await rt.sendMessage({ threadId, text: "q1", providerTarget: "beta" })).runId);
      expect([failed.status, failed.failure?.message]).toEqual(["failed", "transient 503"]);
      const retried = await rt.waitForRun((await rt.sendMessage({ threadId, text: "q1 again", providerTarget: "beta" })).runId);
      expect(retried.status).toBe("completed");
      const handoffs = ofType(events, "handoff.created");
      expect(handoffs.map((h) => [h.fromTarget, h.toTarget, h.coveredRunOrdinals])).toEqual([["alpha", "beta", [1]]]);
      expect(handoffs[0]!.text).toContain("secret is 42");
      const betaSends = beta.calls.filter((c) => c.method === "sendRun").map((c) => c.input);
      expect(betaSends.map((s) => s.text)).toEqual(["q1", "q1 again"]);
      for (const send of betaSends) expect(send.context).toEqual({ kind: "handoff", text: handoffs[0]!.text, delivery: "developer" });
    } finally {
      await cleanup();
    }
  });
});

describe("a9: an adapter whose close() throws", () => {
  /** `endsStream`: whether the failing close() still ended the adapter's event stream first. */
  for (const endsStream of [true, false]) {
    it(`still releases the data directory (close throws ${endsStream ? "after" : "before"} ending its event stream)`, async () => {
      const base = createScriptedAdapter();
      const adapter = override(base, {
        close: async () => {
          if (endsStream) await base.close();
          throw new Error("could not stop the provider host");
        },
      });
      const first = await openTestRuntime({ s: adapter });
      const { threadId } = await first.rt.createThread({ providerTarget: "s" });
      await first.rt.waitForRun((await first.rt.sendMessage({ threadId, text: "hi" })).runId);
      await first.rt.close();
      expect(first.rt.closed).toBe(true);
      const second = await openTestRuntime({ s: createScriptedAdapter() }, { dataDir: first.dataDir });
      try {
        expect(second.rt.listThreads().map((t) => t.threadId)).toEqual([threadId]);
      } finally {
        await second.cleanup();
      }
    });
  }

  it("an adapter without close() is refused at open, without locking the directory", async () => {
    const { close: _close, ...rest } = createScriptedAdapter();
    const { rt, dataDir, cleanup } = await openTestRuntime({ s: createScriptedAdapter() });
    await rt.close();
    try {
      await expect(createRuntime({ dataDir, providers: { s: rest as ProviderAdapter } })).rejects.toMatchObject({
        code: "invalid_input",
        field: "providers.s.close",
      });
      const reopened = await createRuntime({ dataDir, providers: { s: createScriptedAdapter() } });
      await reopened.close();
    } finally {
      await cleanup();
    }
  });
});

describe("a17: a session that announces no native steering", () => {
  it("steers by interrupt-restart, never through a missing steerRun", async () => {
    let turns = 0;
    const base = createScriptedAdapter({
      capabilities: { turns: { supportsActiveSteering: false } },
      script: ({ text }) => (turns++ === 0 ? hang : [{ type: "text", text: `steered: ${text}` }]),
    });
    expect(base.steerRun).toBeUndefined();
    // Declared: steering supported (e.g. an older host binary announces less at handshake).
    const declared: ProviderCapabilities = fullCapabilities();
    const adapter = override(base, { getCapabilities: () => declared });
    const { rt, events, cleanup } = await openTestRuntime({ s: adapter });
    try {
      expect(rt.capabilities("s").turns.supportsActiveSteering).toBe(true);
      const { threadId } = await rt.createThread({ providerTarget: "s" });
      const { runId } = await rt.sendMessage({ threadId, text: "go" });
      await nextEvent(rt, "node.delta", (e) => e.runId === runId);
      expect(rt.capabilities("s").turns.supportsActiveSteering).toBe(false);
      expect(await rt.sendMessage({ threadId, text: "go left", mode: "steer" })).toMatchObject({ disposition: "steered", via: "interrupt_restart", runId });
      const run = await rt.waitForRun(runId);
      expect(run.status).toBe("completed");
      expect(run.attempts.map((a) => [a.ordinal, a.reason, a.status])).toEqual([
        [1, "initial", "superseded"],
        [2, "steering_restart", "completed"],
      ]);
      expect(run.items.at(-1)?.text).toBe("steered: go left");
      expect(ofType(events, "steer.applied").map((e) => e.via)).toEqual(["interrupt_restart"]);
      expect(ofType(events, "warning")).toEqual([]);
    } finally {
      await cleanup();
    }
  });
});

describe("a10: an approval inside a subagent the provider never announced", () => {
  it("is routed to the run, answerable, and the run completes", async () => {
    const adapter = createScriptedAdapter({
      capabilities: { subagents: { emitsSubagentLifecycle: false } },
      script: () => [
        { type: "subagent", agent: "worker", prompt: "p", steps: [{ type: "command", command: "make", output: "ok", approval: true }] },
        { type: "text", text: "after" },
      ],
    });
    const { rt, events, cleanup } = await openTestRuntime({ s: adapter });
    try {
      const { threadId } = await rt.createThread({ providerTarget: "s" });
      const { runId } = await rt.sendMessage({ threadId, text: "go" });
      const opened = await nextEvent(rt, "request.opened", (e) => e.runId === runId);
      expect((await rt.readThread(threadId)).runs[0]!.status).toBe("waiting");
      await rt.respond({ requestId: opened.event.requestId, response: { kind: "decision", decision: "accept" } });
      const run = await rt.waitForRun(runId);
      expect(run.status).toBe("completed");
      const subagent = run.items.find((i) => i.kind === "subagent");
      expect(subagent).toBeDefined();
      expect(run.items.find((i) => i.kind === "approval")?.parentId).toBe(subagent!.id);
      expect(run.items.at(-1)).toMatchObject({ kind: "assistant_message", text: "after" });
      expect(ofType(events, "warning")).toEqual([]);
    } finally {
      await cleanup();
    }
  });
});

describe("ids across lives of a data directory", () => {
  it("a fresh sequentialIds() never reissues a thread, run, session or provider-thread id of the previous life", async () => {
    const first = await openTestRuntime({ s: createScriptedAdapter() });
    const old = await first.rt.createThread({ providerTarget: "s" });
    const oldRun = await first.rt.sendMessage({ threadId: old.threadId, text: "one" });
    await first.rt.waitForRun(oldRun.runId);
    await first.rt.close();

    const second = await openTestRuntime({ s: createScriptedAdapter() }, { dataDir: first.dataDir });
    try {
      const fresh = await second.rt.createThread({ providerTarget: "s" });
      const freshRun = await second.rt.sendMessage({ threadId: fresh.threadId, text: "two" });
      await second.rt.waitForRun(freshRun.runId);
      expect(fresh.threadId).not.toBe(old.threadId);
      expect(freshRun.runId).not.toBe(oldRun.runId);
      expect(second.rt.listThreads().map((t) => [t.threadId, t.runs])).toEqual([
        [old.threadId, 1],
        [fresh.threadId, 1],
      ]);
      const allocated = (records: typeof first.events) =>
        records.flatMap((r) => {
          const e = r.event;
          if (e.type === "thread.created") return [e.threadId];
          if (e.type === "run.created") return [e.runId, e.userMessageId];
          if (e.type === "session.started") return [e.sessionId];
          if (e.type === "provider_thread.bound") return [e.providerThreadId];
          return [];
        });
      const ids = [...allocated(first.events), ...allocated(second.events)];
      expect(ids.length).toBeGreaterThanOrEqual(10);
      expect(new Set(ids).size).toBe(ids.length);
    } finally {
      await second.cleanup();
    }
  });
});
