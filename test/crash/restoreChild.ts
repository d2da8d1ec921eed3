/**
 * A runtime in its own process that rolls a thread back to its first run: run 1 writes
 * one.txt, run 2 rewrites it, adds two.txt and rewrites the user's 0600 secret.env; then the
 * rollback to run 1 restores the files from run 1's checkpoint. The parent gives it a git
 * double that holds the restore's work-tree write (test/checkpoints/gitDouble.ts) and
 * SIGKILLs it there.
 */
import { createRuntime, createScriptedAdapter, keyedScript } from "../../src/index.js";
import type { ScriptStep } from "../../src/index.js";

const [dataDir, cwd] = process.argv.slice(2);
if (!dataDir || !cwd) throw new Error("usage: restoreChild.ts <dataDir> <cwd>");
const change = (path: string, content: string): ScriptStep => ({
  type: "file_change",
  path,
  diff: `+${content}`,
  content,
});
const script = keyedScript({
  "[r1]": [change("one.txt", "one\n"), { type: "text", text: "wrote one" }],
  "[r2]": [
    change("one.txt", "one changed\n"),
    change("two.txt", "two\n"),
    change("secret.env", "KEY=changed\n"),
    { type: "text", text: "wrote two" },
  ],
});
// No provider rollback: the provider thread is divergent, so the reopened runtime can run on a fresh one.
const adapter = createScriptedAdapter({ script, capabilities: { threads: { canRollbackThread: false } } });
const rt = await createRuntime({ dataDir, checkpoints: true, providers: { s: adapter } });
const { threadId } = await rt.createThread({ providerTarget: "s", cwd, title: "restore crash" });
const r1 = await rt.waitForRun((await rt.sendMessage({ threadId, text: "[r1] first" })).runId);
await rt.waitForRun((await rt.sendMessage({ threadId, text: "[r2] second" })).runId);
await rt.rollback({ threadId, toRunId: r1.runId }); // held by the git double until the parent kills us
