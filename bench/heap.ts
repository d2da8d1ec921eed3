import { mkdtemp, rm } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { createRuntime, createScriptedAdapter } from "../src/index.js";

/** heapUsed after full GCs (needs --expose-gc). */
function settledHeap(): number {
  const gc = globalThis.gc;
  if (!gc) throw new Error("run node with --expose-gc");
  for (let i = 0; i < 3; i++) gc();
  return process.memoryUsage().heapUsed;
}

async function withRuntime<T>(fn: (rt: Awaited<ReturnType<typeof createRuntime>>) => Promise<T>): Promise<T> {
  const dataDir = await mkdtemp(join(tmpdir(), "tiller-bench-heap-"));
  const runtime = await createRuntime({ dataDir, providers: { scripted: createScriptedAdapter() } });
  try {
    return await fn(runtime);
  } finally {
    await runtime.close();
    await rm(dataDir, { recursive: true, force: true });
  }
}

const createThreads = (rt: Awaited<ReturnType<typeof createRuntime>>, n: number) =>
  Promise.all(Array.from({ length: n }, (_, i) => rt.createThread({ providerTarget: "scripted", title: `idle ${i}` })));

/** Bytes of heap each idle thread (created, never run) keeps alive in an open runtime. */
export async function measureHeapPerThread(
  threads: number,
): Promise<{ bytesPerThread: number; before: number; after: number }> {
  await withRuntime((rt) => createThreads(rt, 100)); // warm-up: compile and allocate the code paths first
  return withRuntime(async (rt) => {
    const before = settledHeap();
    const created = await createThreads(rt, threads);
    const after = settledHeap();
    if (created.length !== threads) throw new Error("thread count mismatch");
    return { bytesPerThread: (after - before) / threads, before, after };
  });
}
