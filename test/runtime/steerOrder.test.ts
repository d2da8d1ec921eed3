import { describe, expect, it } from "vitest";
import { createScriptedAdapter, ScriptedBackend } from "../../src/index.js";
import { nextEvent, ofType, openTestRuntime, override } from "../support/runtime.js";

/**
 * A native steer is recorded once the provider acknowledged it, and a fast provider may have
 * answered it by then (seen with the Codex replay host): the transcript still shows the
 * steer where the user sent it, before the answer.
 */
describe("a native steer acknowledged after the provider answered it", () => {
  it("appears in the transcript before the answer", async () => {
    const backend = new ScriptedBackend();
    const scripted = createScriptedAdapter({
      backend,
      script: () => [
        { type: "text", text: "working" },
        { type: "gate", name: "g" },
        { type: "text", text: " done" },
      ],
    });
    let answered!: () => void;
    const answeredSeen = new Promise<void>((resolve) => (answered = resolve));
    // The acknowledgement waits until the turn has answered the steer.
    const slowAck = override(scripted, {
      steerRun: async (input) => {
        await scripted.steerRun!(input);
        backend.openGate("g");
        await answeredSeen;
      },
    });
    const { rt, events, cleanup } = await openTestRuntime({ scripted: slowAck });
    try {
      rt.subscribe({ afterSeq: 0 }, (r) => {
        if (r.event.type === "node.delta" && r.event.delta.includes("(steered")) answered();
      });
      const { threadId } = await rt.createThread({ providerTarget: "scripted" });
      const { runId } = await rt.sendMessage({ threadId, text: "go" });
      await nextEvent(rt, "node.started", (e) => e.runId === runId && e.kind === "assistant_message");
      await rt.sendMessage({ threadId, text: "and this", mode: "steer" });
      const run = await rt.waitForRun(runId);
      // In the log the acknowledgement comes after the answer; in the transcript the steer comes first.
      const types = ofType(events, "steer.applied");
      expect(types).toHaveLength(1);
      const said = run.items.map((i) => (i.kind === "user_message" ? `user:${i.text}` : `${i.kind}:${i.text ?? ""}`));
      const steerAt = said.indexOf("user:and this");
      const answerAt = said.findIndex((s) => s.includes("(steered: and this)"));
      expect(steerAt).toBeGreaterThan(-1);
      expect(answerAt).toBeGreaterThan(steerAt);
    } finally {
      await cleanup();
    }
  });
});
