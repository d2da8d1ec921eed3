import { describe, expect, it } from "vitest";
import { createScriptedAdapter, keyedScript, ScriptedBackend } from "../../src/index.js";
import { allTurns, hang, scripted, streaming } from "../support/policies.js";
import { deferred, nextEvent, ofType, openTestRuntime, override, recordCalls, said } from "../support/runtime.js";

/**
 * The thread's queue: a restart runs ahead of older queued runs without anyone missing a run,
 * and a model change on a queued message is the queued run's alone.
 */

describe("the queue", () => {
  it(
    "a restart runs ahead of an older queued run, " +
      "and a provider returning later still gets the run it missed (review s4)",
    async () => {
      const alpha = recordCalls(
        createScriptedAdapter({
          script: ({ text }) => (text === "one" ? hang : [{ type: "text", text: `alpha: ${text}` }]),
        }),
      );
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
        const r4 = await rt.waitForRun(
          (await rt.sendMessage({ threadId, text: "what did beta learn?", providerTarget: "alpha" })).runId,
        );
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
    },
  );

  it.each([
    ["starting", false],
    ["starting", true],
    ["streaming", false],
  ] as const)(
    "a model change on a queued message leaves the active run alone (active run %s, in-session switch: %s) (review)",
    async (phase, inSession) => {
      const backend = new ScriptedBackend();
      const script = keyedScript({
        "[gate]": [
          { type: "text", text: "working" },
          { type: "gate", name: "go" },
          { type: "text", text: " done" },
        ],
      });
      const base = scripted({ sessions: { supportsModelSwitchInSession: inSession } }, script, backend);
      // The first session start is held, so a "starting" run is caught between its session and its turn.
      const starting = deferred();
      const startGate = deferred();
      const held = override(base, {
        startSession: async (input) => {
          starting.resolve();
          await startGate.promise;
          return base.startSession(input);
        },
      });
      const { adapter, calls } = recordCalls(held);
      const { rt, events, cleanup } = await openTestRuntime({ a: adapter });
      try {
        const { threadId } = await rt.createThread({ providerTarget: "a", model: "m1" });
        const s1 = await rt.sendMessage({ threadId, text: "[gate] one" });
        if (phase === "starting") {
          await starting.promise;
        } else {
          startGate.resolve();
          await streaming(rt, s1.runId);
        }
        const s2 = await rt.sendMessage({ threadId, text: "two", mode: "queue", model: "m2" });
        expect(s2.disposition).toBe("queued");
        expect((await rt.readThread(threadId)).thread.model).toBe("m2");
        expect(["starting", "running"]).toContain(rt.views.runs.get(s1.runId)!.status);
        startGate.resolve();
        backend.openGate("go");

        const r1 = await rt.waitForRun(s1.runId);
        const r2 = await rt.waitForRun(s2.runId);
        expect([r1.status, r2.status]).toEqual(["completed", "completed"]);
        expect(said(r1.items)).toBe("working done");
        expect([r1.model, r2.model]).toEqual(["m1", "m2"]);
        const sessions = ofType(events, "session.started").map((e) => e.sessionId);
        expect(calls.filter((c) => c.method === "startSession").map((c) => c.input.model)).toEqual(
          inSession ? ["m1"] : ["m1", "m2"],
        );
        expect(sessions).toHaveLength(inSession ? 1 : 2);
        // The active run was sent on its own session with its own model; the queued one with the new model.
        expect(
          calls.filter((c) => c.method === "sendRun").map((c) => [c.input.text, c.input.model, c.input.sessionId]),
        ).toEqual([
          ["[gate] one", "m1", sessions[0]],
          ["two", "m2", inSession ? sessions[0] : sessions[1]],
        ]);
        expect(allTurns(backend)).toEqual([
          [
            ["[gate] one", null],
            ["two", null],
          ],
        ]);
      } finally {
        startGate.resolve();
        backend.openGate("go");
        await cleanup();
      }
    },
  );
});
