import { open } from "node:fs/promises";
import { fileURLToPath } from "node:url";

/**
 * Setup file of the adverse runs (test/support/adverse.config.ts): with
 * TILLER_TEST_FDATASYNC_DELAY_MS=N, every fdatasync and fsync of this test process takes N ms
 * longer, as on a slow disk. A double at the disk boundary (the FileHandle the event log, the
 * documents and the lock write through), for proving that no test depends on disk speed.
 * Child processes a test spawns keep the real disk.
 */
const delayMs = Number(process.env.TILLER_TEST_FDATASYNC_DELAY_MS ?? 0);

if (delayMs > 0) {
  const probe = await open(fileURLToPath(import.meta.url), "r");
  const fileHandle = Object.getPrototypeOf(probe) as Record<"datasync" | "sync", (...args: unknown[]) => Promise<void>>;
  await probe.close();
  for (const method of ["datasync", "sync"] as const) {
    const original = fileHandle[method];
    fileHandle[method] = async function slowed(this: unknown, ...args: unknown[]) {
      await new Promise((resolve) => setTimeout(resolve, delayMs));
      return original.apply(this, args);
    };
  }
}
