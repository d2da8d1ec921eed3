import { describe, expect, it } from "vitest";
import { keyedScript, ScriptedBackend } from "../../src/index.js";
import type { ScriptStep } from "../../src/index.js";
import { tempDir } from "../support/files.js";
import { scripted } from "../support/policies.js";
import { nextEvent, openTestRuntime, sendAndWait } from "../support/runtime.js";

/**
 * A run's checkpoints through the runtime: a run cut short by close() still gets its final
 * checkpoint, and each run's baseline follows the previous run's final one. The checkpoint
 * store itself: test/checkpoints/.
 */

const hangAfterWrite: ScriptStep[] = [
  { type: "file_change", path: "b.txt", diff: "+b", content: "b" },
  { type: "text", text: "wrote" },
  { type: "hang" },
];

describe("run checkpoints", () => {
  it("a run cancelled by close() still gets its final checkpoint (review)", async () => {
    const work = await tempDir("tiller-review-ckclose-");
    const backend = new ScriptedBackend();
    const providers = () => ({ a: scripted({}, keyedScript({ "[hang]": hangAfterWrite }), backend) });
    const first = await openTestRuntime(providers(), { checkpoints: true });
    try {
      const { threadId } = await first.rt.createThread({ providerTarget: "a", cwd: work.dir });
      const r1 = await sendAndWait(first.rt, threadId, "one");
      const { runId } = await first.rt.sendMessage({ threadId, text: "[hang] two" });
      // The text follows the file change in the script: once it streams, b.txt is written.
      await nextEvent(first.rt, "node.delta", (e) => e.runId === runId && e.delta.includes("wrote"));
      await first.rt.close();

      const { rt, cleanup } = await openTestRuntime(providers(), { dataDir: first.dataDir, checkpoints: true });
      try {
        expect((await rt.readThread(threadId)).runs.map((r) => [r.runId, r.status, r.reason])).toEqual([
          [r1.runId, "completed", null],
          [runId, "cancelled", "runtime_closed"],
        ]);
        const finals = rt.views
          .checkpointsOf(threadId)
          .filter((c) => c.runId === runId && c.scope === "root_run" && c.phase === "final");
        expect(finals.map((c) => c.status)).toEqual(["ready"]);
        expect(finals[0]!.files.map((f) => f.path)).toEqual(["b.txt"]);
        expect(rt.views.finalCheckpoint(runId)?.checkpointId).toBe(finals[0]!.checkpointId);
      } finally {
        await cleanup();
      }
    } finally {
      await first.cleanup();
      await work.cleanup();
    }
  });

  it(
    "run 2's baseline has run 1's final checkpoint as parent " + "and does not repeat run 1's change (review)",
    async () => {
      const work = await tempDir("tiller-review-ckparent-");
      const script = keyedScript({
        "[w]": [
          { type: "file_change", path: "b.txt", diff: "+b", content: "b" },
          { type: "text", text: "w" },
        ],
      });
      const { rt, cleanup } = await openTestRuntime({ a: scripted({}, script) }, { checkpoints: true });
      try {
        const { threadId } = await rt.createThread({ providerTarget: "a", cwd: work.dir });
        const s1 = await rt.sendMessage({ threadId, text: "[w] one" });
        const s2 = await rt.sendMessage({ threadId, text: "two", mode: "queue" });
        expect((await rt.waitForRun(s2.runId)).status).toBe("completed");
        expect((await rt.waitForRun(s1.runId)).status).toBe("completed");
        await rt.readThread(threadId);
        const of = (runId: string, phase: string) =>
          rt.views
            .checkpointsOf(threadId)
            .find((c) => c.runId === runId && c.phase === phase && c.scope === "root_run")!;
        const [b1, f1, b2, f2] = [
          of(s1.runId, "baseline"),
          of(s1.runId, "final"),
          of(s2.runId, "baseline"),
          of(s2.runId, "final"),
        ];
        expect(f1.parentCheckpointId).toBe(b1.checkpointId);
        expect(b2.parentCheckpointId).toBe(f1.checkpointId);
        expect(f2.parentCheckpointId).toBe(b2.checkpointId);
        expect(f1.files.map((f) => f.path)).toEqual(["b.txt"]);
        expect(b2.files).toEqual([]);
        expect(f2.files).toEqual([]);
      } finally {
        await cleanup();
        await work.cleanup();
      }
    },
  );
});
