/**
 * `npm run bench`: pipeline throughput vs the raw JSON-parse limit, and heap per idle thread.
 * Prints a table and writes bench/results.json. Measures only; asserts nothing.
 */
import { writeFile } from "node:fs/promises";
import { runPipeline } from "./pipeline.js";
import { captureFrames, measureRaw } from "./raw.js";
import { measureHeapPerThread } from "./heap.js";
import type { Workload } from "./workload.js";

if (typeof globalThis.gc !== "function") {
  throw new Error("the heap measurement needs a forced GC: run with `node --expose-gc --import tsx bench/run.ts` (npm run bench)");
}

const WORKLOAD: Workload = { turns: 10, textChars: 30_000, chunkSize: 6 };
const WARMUP: Workload = { ...WORKLOAD, turns: 2 };
const THREADS = 1_000;
const PIPELINE_RUNS = 3; // the median is reported: wall-clock numbers on a shared machine are noisy

await runPipeline(WARMUP);
const runs = [];
for (let i = 0; i < PIPELINE_RUNS; i++) runs.push(await runPipeline(WORKLOAD));
const pipelineRate = (r: { events: number; seconds: number }) => r.events / r.seconds;
const pipeline = [...runs].sort((a, b) => pipelineRate(a) - pipelineRate(b))[Math.floor(PIPELINE_RUNS / 2)]!;

const frames = await captureFrames(WORKLOAD);
const raw = measureRaw(frames);

const heap = await measureHeapPerThread(THREADS);

const pipelinePerS = pipelineRate(pipeline);
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
  pipeline_runs_events_per_s: runs.map((r) => Math.round(pipelineRate(r))),
  threads: THREADS,
  workload: WORKLOAD,
};

const rows: Array<[string, string, string]> = [
  ["pipeline throughput", results.pipeline_events_per_s.toLocaleString("en-US"), "events/s"],
  ["raw parse+dispatch", results.raw_events_per_s.toLocaleString("en-US"), "events/s"],
  ["ratio pipeline/raw", results.ratio.toString(), ""],
  ["events measured", `${pipeline.events} (${frames.length} frames)`, "records"],
  ["pipeline wall time", results.pipeline_seconds.toString(), "s (median run)"],
  ["pipeline runs", results.pipeline_runs_events_per_s.join(" / "), "events/s"],
  ["heap per idle thread", results.heap_bytes_per_idle_thread.toLocaleString("en-US"), `bytes (${THREADS} threads)`],
];
const width = (i: 0 | 1) => Math.max(...rows.map((r) => r[i].length), i === 0 ? 6 : 5);
console.log(`${"metric".padEnd(width(0))}  ${"value".padStart(width(1))}  unit`);
for (const [metric, value, unit] of rows) console.log(`${metric.padEnd(width(0))}  ${value.padStart(width(1))}  ${unit}`);

const out = new URL("./results.json", import.meta.url);
await writeFile(out, JSON.stringify(results, null, 2) + "\n");
console.log(`\nwrote ${out.pathname}`);
