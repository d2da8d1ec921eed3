/**
 * `npm run bench`: pipeline throughput vs the raw JSON-parse limit, and heap per idle thread.
 * Prints a table and writes bench/results.json. Measures only; asserts nothing.
 */
import { spawnSync } from "node:child_process";
import { writeFile } from "node:fs/promises";
import { runPipeline } from "./pipeline.js";
import { captureFrames, measureRaw } from "./raw.js";
import { measureHeapPerThread } from "./heap.js";
import type { Workload } from "./workload.js";

// The heap measurement needs a forced GC: re-run this same command with --expose-gc
// (process.execArgv carries tsx's loader flags).
if (typeof globalThis.gc !== "function") {
  const child = spawnSync(process.execPath, ["--expose-gc", ...process.execArgv, ...process.argv.slice(1)], { stdio: "inherit" });
  process.exit(child.status ?? 1);
}

const WORKLOAD: Workload = { turns: 10, textChars: 30_000, chunkSize: 6 };
const WARMUP: Workload = { ...WORKLOAD, turns: 2 };
const THREADS = 1_000;

await runPipeline(WARMUP);
const pipeline = await runPipeline(WORKLOAD);

const frames = await captureFrames(WORKLOAD);
const raw = measureRaw(frames);

const heap = await measureHeapPerThread(THREADS);

const pipelinePerS = pipeline.events / pipeline.seconds;
const rawPerS = raw.events / raw.seconds;
const results = {
  pipeline_events_per_s: Math.round(pipelinePerS),
  raw_events_per_s: Math.round(rawPerS),
  ratio: Number((pipelinePerS / rawPerS).toPrecision(4)),
  heap_bytes_per_idle_thread: Math.round(heap.bytesPerThread),
  node: process.version,
  date: new Date().toISOString(),
  events_measured: pipeline.events,
  provider_frames: frames.length,
  pipeline_seconds: Number(pipeline.seconds.toFixed(3)),
  threads: THREADS,
  workload: WORKLOAD,
};

const rows: Array<[string, string, string]> = [
  ["pipeline throughput", results.pipeline_events_per_s.toLocaleString("en-US"), "events/s"],
  ["raw parse+dispatch", results.raw_events_per_s.toLocaleString("en-US"), "events/s"],
  ["ratio pipeline/raw", results.ratio.toString(), ""],
  ["events measured", `${pipeline.events} (${frames.length} frames)`, "records"],
  ["pipeline wall time", results.pipeline_seconds.toString(), "s"],
  ["heap per idle thread", results.heap_bytes_per_idle_thread.toLocaleString("en-US"), `bytes (${THREADS} threads)`],
];
const width = (i: 0 | 1) => Math.max(...rows.map((r) => r[i].length), i === 0 ? 6 : 5);
console.log(`${"metric".padEnd(width(0))}  ${"value".padStart(width(1))}  unit`);
for (const [metric, value, unit] of rows) console.log(`${metric.padEnd(width(0))}  ${value.padStart(width(1))}  ${unit}`);

const out = new URL("./results.json", import.meta.url);
await writeFile(out, JSON.stringify(results, null, 2) + "\n");
console.log(`\nwrote ${out.pathname}`);
