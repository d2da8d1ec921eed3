/**
 * The full-disk story, run inside a private mount namespace whose data directory is a small
 * tmpfs (see fullDisk.test.ts). Prints one JSON line: what it saw at each step.
 *
 * 1. Fill the disk until the event log cannot be written while runs are streaming and callers
 *    wait on them: every waiter must reject at once with `store_failed`, `onFailure` must be
 *    told, and `close()` must still give everything back.
 * 2. Reopen while the disk is still full: a typed `store_failed`.
 * 3. Free the space and reopen: every event a subscriber saw (durable, acknowledged) is there,
 *    unchanged, and no run is left running.
 */
import { open, rm, writeFile } from "node:fs/promises";
import { join } from "node:path";
import { createScriptedAdapter, keyedScript, type LogRecord, type DomainEvent } from "../../src/index.js";
import { openRuntime } from "../support/internals.js";

const [mount] = process.argv.slice(2);
if (!mount) throw new Error("usage: fullDiskChild.ts <tmpfs mount>");
const dataDir = join(mount, "data");
const filler = join(mount, "filler");
const script = keyedScript({ "[long]": [{ type: "text", text: "x".repeat(10_000), chunkSize: 100 }] });
const adapter = () => createScriptedAdapter({ script });

const report: Record<string, unknown> = {};
const failures: Array<{ kind: string; code?: string }> = [];
const seen = new Map<number, string>();

const rt = await openRuntime({
  dataDir,
  providers: { s: adapter() },
  onFailure: (f) => failures.push({ kind: f.kind, code: (f.error as { code?: string }).code }),
});
rt.subscribe({ afterSeq: 0 }, (r: LogRecord<DomainEvent>) => void seen.set(r.seq, JSON.stringify(r.event)));
const { threadId } = await rt.createThread({ providerTarget: "s" });
// Leave about 64 KiB free: a few runs of streamed text fill it.
const fh = await open(filler, "w");
const chunk = Buffer.alloc(64 * 1024, 1);
try {
  for (;;) await fh.write(chunk);
} catch {
  // full
} finally {
  await fh.close();
}
await rm(filler);
await writeFile(filler, Buffer.alloc(0));
{
  // Re-fill, keeping 64 KiB back.
  const { statfs } = await import("node:fs/promises");
  const s = await statfs(mount);
  const free = s.bavail * s.bsize;
  await writeFile(filler, Buffer.alloc(Math.max(0, free - 64 * 1024), 1));
}
const waits: Array<Promise<unknown>> = [];
let sendError: unknown = null;
for (let i = 0; i < 20 && failures.length === 0; i++) {
  try {
    const { runId } = await rt.sendMessage({ threadId, text: `[long] ${i}`, mode: "queue" });
    waits.push(
      rt.waitForRun(runId).then(
        () => "resolved",
        (e: { code?: string }) => e.code ?? String(e),
      ),
    );
    waits.push(
      rt.waitForRun(runId, { timeoutMs: 600_000 }).then(
        () => "resolved",
        (e: { code?: string }) => e.code ?? String(e),
      ),
    );
  } catch (error) {
    sendError = (error as { code?: string }).code ?? String(error);
    break;
  }
}
report.waiters = await Promise.all(waits);
report.failures = failures;
report.sendError = sendError;
report.afterFailure = await rt.createThread({ providerTarget: "s" }).then(
  () => "accepted",
  (e: { code?: string }) => e.code,
);
report.close = await rt.close().then(
  () => "closed",
  (e: unknown) => String(e),
);
report.acknowledged = seen.size;

report.reopenFull = await openRuntime({ dataDir, providers: { s: adapter() } }).then(
  async (r) => (await r.close(), "opened"),
  (e: { code?: string }) => e.code ?? String(e),
);

await rm(filler);
const again = await openRuntime({ dataDir, providers: { s: adapter() } });
// Nothing stuck: runs the failure interrupted were settled at reopen, queued ones resume and end.
const ends = await Promise.all(
  [...again.views.runs.keys()].map((runId) =>
    again.waitForRun(runId, { timeoutMs: 60_000 }).then(
      (r) => r.status,
      (e: { code?: string }) => e.code,
    ),
  ),
);
report.running = ends.filter((s) => !["completed", "interrupted", "failed", "cancelled"].includes(s ?? ""));
report.ends = [...new Set(ends)];
const replayed = new Map<number, string>();
const head = again.views.head;
await new Promise<void>((done) => {
  const stop = again.subscribe({ afterSeq: 0 }, (r) => {
    replayed.set(r.seq, JSON.stringify(r.event));
    if (r.seq >= head) (stop(), done());
  });
});
report.lost = [...seen].filter(([seq, event]) => replayed.get(seq) !== event).map(([seq]) => seq);
report.recovery = (again as unknown as { log?: { recovery?: unknown } }).log?.recovery ?? null;
await again.close();
process.stdout.write(JSON.stringify(report) + "\n");
