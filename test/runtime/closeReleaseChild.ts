/**
 * Opens and closes runtimes that each ran a turn (so a session idle timer was armed), then
 * forces a garbage collection: prints how many closed runtimes are still reachable.
 * Run with `node --expose-gc --import tsx`.
 */
import { mkdtemp, rm } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { createRuntime, createScriptedAdapter } from "../../src/index.js";

const CYCLES = 30;
const gc = (globalThis as { gc?: () => void }).gc;
if (!gc) throw new Error("run with --expose-gc");
const root = await mkdtemp(join(tmpdir(), "tiller-close-"));
/** One open/turn/close cycle in its own frame, so nothing on this module's stack holds the runtime. */
async function cycle(i: number): Promise<WeakRef<object>> {
  const rt = await createRuntime({
    dataDir: join(root, String(i)),
    providers: { s: createScriptedAdapter() },
    sessionIdleMs: 3_600_000,
  });
  const { threadId } = await rt.createThread({ providerTarget: "s", cwd: root });
  await rt.waitForRun((await rt.sendMessage({ threadId, text: "hello" })).runId);
  await rt.close();
  return new WeakRef(rt);
}
const refs: Array<WeakRef<object>> = [];
for (let i = 0; i < CYCLES; i++) refs.push(await cycle(i));
for (let i = 0; i < 10; i++) {
  await new Promise((done) => setImmediate(done));
  gc();
}
await rm(root, { recursive: true, force: true });
process.stdout.write(
  JSON.stringify({
    cycles: CYCLES,
    alive: refs.filter((r) => r.deref() !== undefined).length,
    which: refs.map((r, i) => (r.deref() ? i : -1)).filter((i) => i >= 0),
  }) + "\n",
);
