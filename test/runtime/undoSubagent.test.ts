import { readFile, writeFile } from "node:fs/promises";
import { join } from "node:path";
import { describe, expect, it } from "vitest";
import { keyedScript, ScriptedBackend } from "../../src/index.js";
import type { CapabilityOverrides, ScriptStep } from "../../src/index.js";
import { snapshotFiles, tempDir } from "../support/files.js";
import { policies, rejectsWith, row, scripted, streaming } from "../support/policies.js";
import { nextEvent, ofType, openTestRuntime, sendAndWait } from "../support/runtime.js";
import { isolateHomeForFile } from "../checkpoints/isolated.js";

/**
 * Undoing one subagent's file edits through the app-owned nested checkpoint scopes, whatever
 * the provider's own nested scopes (`checkpointing.supportsNestedCheckpointScopes` only says
 * whether the provider's conversation could follow): the files the subagent changed go back,
 * the rest of its run's edits and other runs' stay.
 */

isolateHomeForFile();

const write = (path: string, content: string): ScriptStep => ({
  type: "file_change",
  path,
  diff: `+${content}`,
  content,
});
const subagent = (agent: string, steps: ScriptStep[]): ScriptStep => ({ type: "subagent", agent, prompt: "go", steps });

/**
 * Run 1 writes `base.txt` and `shared.txt`. Run 2: subagent `a` adds `a.txt` and rewrites
 * `shared.txt`; subagent `b` adds `b.txt`; then the root itself writes `root.txt`. The gates
 * after each subagent hold the turn until its scope is captured (the test opens them).
 */
const script = keyedScript({
  "[setup]": [write("base.txt", "base\n"), write("shared.txt", "before\n"), { type: "text", text: "set up" }],
  "[delegate]": [
    subagent("a", [write("a.txt", "from a\n"), write("shared.txt", "a was here\n")]),
    { type: "gate", name: "after-a" },
    subagent("b", [write("b.txt", "from b\n")]),
    { type: "gate", name: "after-b" },
    write("root.txt", "root\n"),
    { type: "text", text: "delegated" },
  ],
  "[hang]": [{ type: "text", text: "working" }, { type: "hang" }],
});

async function delegated(caps: CapabilityOverrides, options: { checkpoints?: boolean } = {}) {
  const work = await tempDir("tiller-undo-subagent-");
  const backend = new ScriptedBackend();
  const t = await openTestRuntime({ s: scripted(caps, script, backend) }, { checkpoints: options.checkpoints ?? true });
  const { rt } = t;
  const { threadId } = await rt.createThread({ providerTarget: "s", cwd: work.dir });
  const r1 = await sendAndWait(rt, threadId, "[setup]");
  const { runId } = await rt.sendMessage({ threadId, text: "[delegate]" });
  let after = 0;
  for (const gate of ["after-a", "after-b"]) {
    // A subagent's scope ends when it does: its checkpoint is captured before the root goes on.
    if (options.checkpoints !== false)
      after = (await nextEvent(rt, "checkpoint.captured", (e) => e.scope === "subagent", after)).seq;
    backend.openGate(gate);
  }
  const r2 = await rt.waitForRun(runId);
  expect([r1.status, r2.status]).toEqual(["completed", "completed"]);
  const [a, b] = r2.items.filter((i) => i.kind === "subagent");
  expect([a, b].map((i) => i?.kind)).toEqual(["subagent", "subagent"]);
  const cleanup = async () => {
    await t.cleanup();
    await work.cleanup();
  };
  return { ...t, cleanup, work, backend, threadId, r1, r2, a: a!.id, b: b!.id };
}

const files = (dir: string) => snapshotFiles(dir);

describe("undoing one subagent's edits", () => {
  it.each([false, true])(
    "supportsNestedCheckpointScopes=%s: the subagent's files go back, the rest of the run's edits stay",
    async (nested) => {
      const s = await delegated({ checkpointing: { supportsNestedCheckpointScopes: nested } });
      const { rt, events, threadId, r2 } = s;
      try {
        expect(await files(s.work.dir)).toEqual({
          "base.txt": "base\n",
          "shared.txt": "a was here\n",
          "a.txt": "from a\n",
          "b.txt": "from b\n",
          "root.txt": "root\n",
        });
        // Each subagent has its own scope: b's opens where a's ended.
        const scopes = rt.views.checkpointsOf(threadId).filter((c) => c.scope === "subagent");
        expect(scopes.map((c) => [c.nodeId, c.phase, c.files.map((f) => f.path)])).toEqual([
          [s.a, "final", ["a.txt", "shared.txt"]],
          [s.b, "final", ["b.txt"]],
        ]);
        expect(ofType(events, "checkpoint.skipped")).toEqual([]);

        const receipt = await rt.undoSubagent({ threadId, nodeId: s.a, commandId: "undo-a" });
        expect(receipt).toMatchObject({
          threadId,
          runId: r2.runId,
          nodeId: s.a,
          checkpointId: scopes[0]!.checkpointId,
          conversation: "kept",
          files: [
            { path: "a.txt", change: "deleted" },
            { path: "shared.txt", change: "modified" },
          ],
        });
        expect(await files(s.work.dir)).toEqual({
          "base.txt": "base\n",
          "shared.txt": "before\n",
          "b.txt": "from b\n",
          "root.txt": "root\n",
        });
        // The runs stand: nothing was rolled back, the provider's conversation is as it was.
        expect((await rt.readThread(threadId)).runs.map((r) => r.status)).toEqual(["completed", "completed"]);
        expect(ofType(events, "rollback.applied")).toEqual([]);
        // The thread's own turns (the subagents' child threads, kept by the provider, are theirs).
        const own = [...s.backend.threads.values()].filter((t) => t.parentId === undefined);
        expect(own.flatMap((t) => t.turns)).toHaveLength(2);
        // What the provider's record changes: a named degradation where it has no nested scopes of its own.
        const kept = policies(events, "root_checkpoint_only");
        const warned = ofType(events, "warning").filter((w) => w.message.includes("no adapter call rolls back"));
        if (nested) {
          expect(kept).toEqual([]);
          expect(warned.map((w) => w.runId)).toEqual([r2.runId]);
        } else {
          expect(kept.map(row)).toEqual([
            [threadId, r2.runId, "checkpointing.supportsNestedCheckpointScopes", "fallback"],
          ]);
          expect(warned).toEqual([]);
        }
        // The same command id answers with the same receipt, once.
        expect(await rt.undoSubagent({ threadId, nodeId: s.a, commandId: "undo-a" })).toEqual(receipt);

        // Undoing b as well leaves only what the root and run 1 wrote.
        expect((await rt.undoSubagent({ threadId, nodeId: s.b })).files).toEqual([
          { path: "b.txt", change: "deleted" },
        ]);
        expect(await files(s.work.dir)).toEqual({
          "base.txt": "base\n",
          "shared.txt": "before\n",
          "root.txt": "root\n",
        });
        // Undone already: nothing left to change, and nothing recorded.
        const again = await rt.undoSubagent({ threadId, nodeId: s.a });
        expect(again.files).toEqual([]);
        expect(policies(events, "root_checkpoint_only")).toHaveLength(nested ? 0 : 2);
      } finally {
        await s.cleanup();
      }
    },
  );

  it("a file the subagent changed that has changed again since is a conflict, and nothing changes", async () => {
    const s = await delegated({});
    const { rt, threadId } = s;
    try {
      await writeFile(join(s.work.dir, "shared.txt"), "the user's edit\n");
      const before = await files(s.work.dir);
      const error = await rejectsWith(rt.undoSubagent({ threadId, nodeId: s.a }), "conflict");
      expect(error.message).toContain("shared.txt");
      expect(error.details).toMatchObject({ files: [{ path: "shared.txt", change: "modified" }] });
      expect(await files(s.work.dir)).toEqual(before);
      // Put back as the subagent left it, the undo goes through.
      await writeFile(join(s.work.dir, "shared.txt"), "a was here\n");
      expect((await rt.undoSubagent({ threadId, nodeId: s.a })).files.map((f) => f.path)).toEqual([
        "a.txt",
        "shared.txt",
      ]);
    } finally {
      await s.cleanup();
    }
  });

  it(
    "refused: an unknown subagent (not_found); " + "while a run is active, or once its run is rolled back (conflict)",
    async () => {
      const s = await delegated({});
      const { rt, threadId } = s;
      try {
        await rejectsWith(rt.undoSubagent({ threadId, nodeId: "nod_unknown" }), "not_found");
        await rejectsWith(rt.undoSubagent({ threadId: "thr_unknown", nodeId: s.a }), "not_found");
        await rejectsWith(rt.undoSubagent({ threadId, nodeId: "not-an-id" }), "invalid_input");

        const { runId } = await rt.sendMessage({ threadId, text: "[hang]" });
        await streaming(rt, runId);
        const before = await files(s.work.dir);
        await rejectsWith(rt.undoSubagent({ threadId, nodeId: s.a }), "conflict");
        expect(await files(s.work.dir)).toEqual(before);
        await rt.interrupt({ runId });
        expect((await rt.waitForRun(runId)).status).toBe("interrupted");

        await rt.rollback({ threadId, toRunId: s.r1.runId });
        const error = await rejectsWith(rt.undoSubagent({ threadId, nodeId: s.a }), "conflict");
        expect(error.message).toContain("rolled back");
      } finally {
        await s.cleanup();
      }
    },
  );

  it("without app checkpoints the undo is refused as capability_unsupported, with its policy recorded", async () => {
    const s = await delegated({}, { checkpoints: false });
    const { rt, events, threadId } = s;
    try {
      const error = await rejectsWith(rt.undoSubagent({ threadId, nodeId: s.a }), "capability_unsupported");
      expect(error.details).toMatchObject({ capability: "checkpointing.appCanCheckpointFilesystem" });
      const policy = await nextEvent(rt, "policy.applied", (e) => e.policy === "subagent_undo_unsupported");
      expect(row(policy.event)).toEqual([threadId, s.r2.runId, "checkpointing.appCanCheckpointFilesystem", "refused"]);
      expect(ofType(events, "checkpoint.captured")).toEqual([]);
      expect(await readFile(join(s.work.dir, "a.txt"), "utf8")).toBe("from a\n");
    } finally {
      await s.cleanup();
    }
  });
});
