/**
 * Everything a runtime stores under the widest umask (000): a hosted provider (host records),
 * checkpoints of a thread's workspace (the private git store), a rollback (a file restore), a
 * crash-free close and a reopen. Prints every path under the data directory with its mode.
 */
import { lstat, mkdir, mkdtemp, readdir, writeFile } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join, relative } from "node:path";
import { createRuntime } from "../../src/index.js";
import { createScriptedHostAdapter } from "../../src/adapters/scripted/adapter.js";

process.umask(0o000);
const root = await mkdtemp(join(tmpdir(), "tiller-modes-"));
const dataDir = join(root, "data");
const workspace = join(root, "workspace");
await mkdir(workspace);
await writeFile(join(workspace, "secret.txt"), "private\n", { mode: 0o600 });
const adapter = () =>
  createScriptedHostAdapter({
    scripts: {
      "[write]": [
        { type: "file_change", path: "out.txt", diff: "+x", content: "x\n" },
        { type: "text", text: "done" },
      ],
    },
  });

const rt = await createRuntime({ dataDir, providers: { s: adapter() }, checkpoints: true, sandbox: "full-access" });
const { threadId } = await rt.createThread({ providerTarget: "s", cwd: workspace });
const first = await rt.sendMessage({ threadId, text: "[write] one" });
await rt.waitForRun(first.runId);
const second = await rt.sendMessage({ threadId, text: "[write] two" });
await rt.waitForRun(second.runId);
await rt.rollback({ threadId, toRunId: first.runId });
await rt.close();
const again = await createRuntime({ dataDir, providers: { s: adapter() }, checkpoints: true });
await again.close();

const entries: Array<{ path: string; kind: "dir" | "file" | "other"; mode: number }> = [];
async function walk(dir: string): Promise<void> {
  for (const name of await readdir(dir)) {
    const path = join(dir, name);
    const stat = await lstat(path);
    const kind = stat.isDirectory() ? "dir" : stat.isFile() ? "file" : "other";
    entries.push({ path: relative(dataDir, path), kind, mode: stat.mode & 0o777 });
    if (stat.isDirectory()) await walk(path);
  }
}
const top = await lstat(dataDir);
entries.push({ path: ".", kind: "dir", mode: top.mode & 0o777 });
await walk(dataDir);
const restored = await lstat(join(workspace, "secret.txt"));
process.stdout.write(JSON.stringify({ root, entries, workspaceSecretMode: restored.mode & 0o777 }) + "\n");
