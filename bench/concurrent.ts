import { closeSync, fdatasyncSync, openSync, writeSync } from "node:fs";
import { mkdtemp, rm } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { performance } from "node:perf_hooks";
import { createRuntime, createScriptedAdapter, type ScriptSource } from "../src/index.js";
import { deltaText, tapFrames } from "./frameTap.js";

/**
 * Many threads streaming at once through one runtime (the measured window is while all of them
 * stream: after the last thread's first delta, before the first thread's last): the latency from a provider frame (the
 * moment the runtime takes it from the scripted adapter's stream) to the subscriber receiving
 * the record that holds its text, for every delta. Each delta is one marker, unique across
 * threads, so a record that coalesces several frames' text counts each of them. Against it:
 * the commit window plus the p99 of a bare write + fdatasync on the same disk, same run.
 */

export interface ConcurrentOptions {
  threads: number;
  /** Deltas each thread streams. */
  deltas: number;
  /** The scripted provider's pause between two deltas of a thread: sets the offered load. */
  chunkDelayMs: number;
  groupCommitMs: number;
  /** The threads' first messages are sent evenly over this many ms (a ramp-up, as load tests have). */
  rampMs: number;
}

export interface ConcurrentResult {
  deltas: number;
  p50Ms: number;
  /** While every thread streams: emitted after the last thread's first delta, before the first thread's last. */
  p99Ms: number;
  maxMs: number;
  /** Deltas in that window. */
  windowDeltas: number;
  /** p99 of every delta, the start-up of all the runs and their endings included. */
  allP99Ms: number;
  fdatasyncP99Ms: number;
  seconds: number;
}

const MARK = 8; // characters of one marker: 3 for the thread, 4 for the delta, then ";"
const marker = (thread: number, delta: number) =>
  `${thread.toString(36).padStart(3, "0")}${delta.toString(36).padStart(4, "0")};`;
/** Where a marker's times are kept: thread-major, one slot per delta. */
const slotOf = (text: string, at: number, deltas: number) =>
  Number.parseInt(text.slice(at, at + 3), 36) * deltas + Number.parseInt(text.slice(at + 3, at + 7), 36);

/** The thread number is the user's message text; the reply is its markers, one per delta. */
const markerScript =
  (deltas: number): ScriptSource =>
  ({ text }) => {
    const thread = Number(text);
    let reply = "";
    for (let d = 0; d < deltas; d++) reply += marker(thread, d);
    return [{ type: "text", text: reply, chunkSize: MARK }];
  };

const quantile = (sorted: Float64Array, q: number) =>
  sorted[Math.min(sorted.length - 1, Math.floor(q * sorted.length))]!;

/** Times of a small write followed by fdatasync, in a loop, on a file in `dir`. */
function bareFdatasyncTimes(dir: string, rounds = 300): Float64Array {
  const fd = openSync(join(dir, "fdatasync-probe"), "a");
  const line = Buffer.from(`${"x".repeat(199)}\n`);
  const times = new Float64Array(rounds);
  try {
    for (let i = 0; i < rounds; i++) {
      const start = performance.now();
      writeSync(fd, line);
      fdatasyncSync(fd);
      times[i] = performance.now() - start;
    }
  } finally {
    closeSync(fd);
  }
  return times;
}

export async function measureConcurrent(o: ConcurrentOptions): Promise<ConcurrentResult> {
  const dataDir = await mkdtemp(join(tmpdir(), "tiller-bench-concurrent-"));
  try {
    // The disk's latency drifts with what else the machine does: sampled before and after the streams.
    const before = bareFdatasyncTimes(dataDir);
    // The bench's own bookkeeping allocates nothing per delta: a marker's times sit in typed arrays at its slot.
    const emittedAt = new Float64Array(o.threads * o.deltas).fill(Number.NaN);
    let lastFirstDelta = 0;
    let firstLastDelta = Infinity;
    const scripted = createScriptedAdapter({ script: markerScript(o.deltas), chunkDelayMs: o.chunkDelayMs });
    const adapter = tapFrames(scripted, (frame) => {
      const text = deltaText(frame);
      if (text.length !== MARK) return;
      const now = performance.now();
      const slot = slotOf(text, 0, o.deltas);
      emittedAt[slot] = now;
      const delta = slot % o.deltas;
      if (delta === 0) lastFirstDelta = now;
      if (delta === o.deltas - 1 && now < firstLastDelta) firstLastDelta = now;
    });
    const runtime = await createRuntime({ dataDir, providers: { scripted: adapter }, groupCommitMs: o.groupCommitMs });
    const latencies = new Float64Array(o.threads * o.deltas).fill(Number.NaN);
    let measured = 0;
    let terminals = 0;
    let allEnded!: () => void;
    const ended = new Promise<void>((resolve) => (allEnded = resolve));
    let seconds: number;
    try {
      const threadIds = await Promise.all(
        Array.from({ length: o.threads }, (_, i) =>
          runtime.createThread({ providerTarget: "scripted", title: `t${i}` }).then((t) => t.threadId),
        ),
      );
      const unsubscribe = runtime.subscribe({ afterSeq: runtime.head }, (record) => {
        const event = record.event;
        if (event.type === "node.delta") {
          const now = performance.now();
          for (let i = 0; i + MARK <= event.delta.length; i += MARK) {
            const slot = slotOf(event.delta, i, o.deltas);
            if (!(slot >= 0 && slot < latencies.length) || !Number.isNaN(latencies[slot]!)) continue;
            latencies[slot] = now - emittedAt[slot]!;
            measured++;
          }
        } else if (event.type === "run.terminal" && ++terminals === o.threads) allEnded();
      });
      const start = performance.now();
      // A ramp-up: thread i's message goes i/threads of the ramp after the first thread's, so the threads' deltas
      // spread over each period (their offsets 2 ms apart with the bench's figures) instead of landing in one instant.
      await Promise.all(
        threadIds.map(
          (threadId, i) =>
            new Promise((sent) =>
              setTimeout(() => sent(runtime.sendMessage({ threadId, text: String(i) })), (i * o.rampMs) / o.threads),
            ),
        ),
      );
      await ended;
      seconds = (performance.now() - start) / 1000;
      unsubscribe();
    } finally {
      await runtime.close();
    }
    if (measured !== o.threads * o.deltas)
      throw new Error(`concurrent: ${measured} deltas reached the subscriber, ${o.threads * o.deltas} were streamed`);
    const steady = latencies.filter((_, i) => emittedAt[i]! > lastFirstDelta && emittedAt[i]! < firstLastDelta).sort();
    if (steady.length === 0) throw new Error("concurrent: the threads never all streamed at once (raise deltas)");
    const sorted = latencies.sort();
    const after = bareFdatasyncTimes(dataDir);
    const fdatasync = new Float64Array(before.length + after.length);
    fdatasync.set(before);
    fdatasync.set(after, before.length);
    const fdatasyncP99Ms = quantile(fdatasync.sort(), 0.99);
    return {
      deltas: measured,
      p50Ms: quantile(sorted, 0.5),
      p99Ms: quantile(steady, 0.99),
      maxMs: steady[steady.length - 1]!,
      windowDeltas: steady.length,
      allP99Ms: quantile(sorted, 0.99),
      fdatasyncP99Ms,
      seconds,
    };
  } finally {
    await rm(dataDir, { recursive: true, force: true });
  }
}
