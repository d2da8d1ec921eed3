import { describe, expect, it } from "vitest";
import { createScriptedAdapter, keyedScript, type ScriptStep } from "../../src/index.js";
import { nextEvent, ofType, openTestRuntime } from "../support/runtime.js";

/**
 * A run's end cancels its own pending requests (each run's are kept apart), never another run's: two threads wait on an
 * approval each, one is interrupted, the other's approval stays pending and can still be answered.
 */
const asks: ScriptStep[] = [{ type: "command", command: "npm test", output: "ok", approval: true }];

describe("a run's end and the requests of other runs", () => {
  it("cancels the ended run's pending request only", async () => {
    const scripted = createScriptedAdapter({ script: keyedScript({ "[ask]": asks }) });
    const { rt, events, cleanup } = await openTestRuntime({ scripted });
    try {
      const a = await rt.createThread({ providerTarget: "scripted", title: "a" });
      const b = await rt.createThread({ providerTarget: "scripted", title: "b" });
      const runA = await rt.sendMessage({ threadId: a.threadId, text: "[ask] a" });
      const askedA = await nextEvent(rt, "request.opened", (e) => e.runId === runA.runId);
      const runB = await rt.sendMessage({ threadId: b.threadId, text: "[ask] b" });
      const askedB = await nextEvent(rt, "request.opened", (e) => e.runId === runB.runId);

      // Every record up to the one `done` accepts (delivered in order, from the start).
      const through = (done: (r: (typeof events)[number]) => boolean) =>
        new Promise<void>((resolve) => {
          const stop = rt.subscribe({ afterSeq: 0 }, (r) => {
            if (done(r)) (stop(), resolve());
          });
        });
      const terminal = (runId: string) => (r: (typeof events)[number]) =>
        r.event.type === "run.terminal" && r.event.runId === runId;

      await rt.interrupt({ runId: runA.runId });
      await through(terminal(runA.runId));
      const settledA = events.filter(
        (r) =>
          (r.event.type === "request.closed" || r.event.type === "request.resolved") &&
          r.event.requestId === askedA.event.requestId,
      );
      expect(settledA).toHaveLength(1);
      const settledB = () =>
        events.filter(
          (r) =>
            (r.event.type === "request.closed" || r.event.type === "request.resolved") &&
            r.event.requestId === askedB.event.requestId,
        );
      expect(settledB()).toHaveLength(0);

      await rt.respond({ requestId: askedB.event.requestId, response: { kind: "decision", decision: "accept" } });
      await through(terminal(runB.runId));
      expect(settledB().map((r) => r.event.type)).toEqual(["request.resolved"]);
      expect(ofType(events, "run.terminal").map((e) => [e.runId, e.status])).toEqual([
        [runA.runId, "interrupted"],
        [runB.runId, "completed"],
      ]);
    } finally {
      await cleanup();
    }
  });
});
