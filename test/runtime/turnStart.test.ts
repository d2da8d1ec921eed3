import { afterEach, describe, expect, it, vi } from "vitest";
import { createScriptedAdapter } from "../../src/index.js";
import type { ProviderAdapter, ProviderAdapterEvent } from "../../src/index.js";
import { deferred, nextEvent, ofType, openTestRuntime, override, recordCalls, said } from "../support/runtime.js";

/**
 * A turn's start: the reply to sendRun and the turn's own events travel separately, so the
 * runtime sees them in either order (a request before the reply, a failed reply after the turn
 * started, a reply after the turn's terminal) and ends in the same state each way.
 */

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

afterEach(() => {
  vi.restoreAllMocks();
});

describe("the reply to sendRun and the turn's events, in either order", () => {
  it(
    "a request opened while the run is still starting is applied (not fenced), " +
      "the run waits, and answering it completes the run (review a3)",
    async () => {
      const base = createScriptedAdapter({
        capabilities: { turns: { emitsTurnStarted: false } },
        script: () => [
          { type: "command", command: "rm -rf build", output: "ok", approval: true },
          { type: "text", text: "done" },
        ],
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
    },
  );

  it(
    "a sendRun that fails after the turn already started ends " +
      "the run failed instead of leaving it running (review a12)",
    async () => {
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
        const states = ofType(events, "run.state")
          .filter((e) => e.runId === runId)
          .map((e) => e.status);
        expect(states).toEqual(["starting", "running"]);
        expect(run.attempts.map((a) => a.status)).toEqual(["failed"]);
        expect(rt.actors.runs.has(runId)).toBe(false);
        // The half-started provider turn was stopped, so the thread's next run works.
        const next = await rt.waitForRun((await rt.sendMessage({ threadId, text: "again" })).runId);
        // this adapter's sendRun always fails, but not with "a turn is already running"
        expect(next.status).toBe("failed");
        expect(next.failure?.message).toBe("sendRun RPC timed out");
      } finally {
        await cleanup();
      }
    },
  );

  it(
    "a sendRun reply that arrives after the turn's terminal still binds the turn, " +
      "returns the session to ready, and later handoffs cover only what was missed (review s5)",
    async () => {
      const warn = vi.spyOn(console, "warn");
      const mk = (name: string) =>
        createScriptedAdapter({ script: ({ text }) => [{ type: "text", text: `${name}: ${text}` }] });
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
        expect(alphaSends.map((s) => s.context)).toEqual([
          null,
          { kind: "handoff", text: handoffs[1]!.text, delivery: "developer" },
        ]);
        expect(ofType(events, "session.state").map((e) => e.status)).toEqual([
          "running",
          "ready",
          "running",
          "ready",
          "running",
          "ready",
        ]);
        expect(ofType(events, "warning")).toEqual([]);
        expect(warn).not.toHaveBeenCalled();
      } finally {
        await cleanup();
      }
    },
  );
});
