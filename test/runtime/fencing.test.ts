import { describe, expect, it } from "vitest";
import { createScriptedAdapter } from "../../src/index.js";
import { gateEvents, ofType, openTestRuntime } from "../support/runtime.js";

/**
 * Found by the model-based suite: a superseded attempt's item completion is fenced (recorded,
 * not applied), so the completion barrier must still close that item; otherwise it streams
 * forever in the read model of a finished run.
 */
describe("a completion fenced after an interrupt-restart steer", () => {
  it("still leaves no item of the finished run streaming", async () => {
    const scripted = createScriptedAdapter({
      capabilities: { turns: { supportsActiveSteering: false } },
      script: ({ text }) => (text === "first" ? [{ type: "text", text: "working" }, { type: "hang" }] : [{ type: "text", text: "steered" }]),
    });
    // Hold the first message's completion (and everything after it) until the steer was taken.
    const gated = gateEvents(scripted, (e) => e.event.type === "item.completed");
    const { rt, events, cleanup } = await openTestRuntime({ scripted: gated.adapter });
    try {
      const { threadId } = await rt.createThread({ providerTarget: "scripted" });
      const { runId } = await rt.sendMessage({ threadId, text: "first" });
      while (!rt.views.runs.get(runId)!.items.some((i) => i.kind === "assistant_message")) await new Promise((r) => setTimeout(r, 1));
      const steer = await rt.sendMessage({ threadId, text: "second", mode: "steer" });
      expect(steer).toMatchObject({ disposition: "steered", via: "interrupt_restart" });
      gated.release();
      const run = await rt.waitForRun(runId);
      expect(run.status).toBe("completed");
      expect(run.attempts.map((a) => a.status)).toEqual(["superseded", "completed"]);
      expect(ofType(events, "event.fenced").map((e) => e.providerEventType)).toContain("node.completed");
      expect(run.items.filter((i) => i.status === "streaming")).toEqual([]);
    } finally {
      await cleanup();
    }
  });
});
