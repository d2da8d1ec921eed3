/**
 * `npm run bench`: pipeline throughput vs the raw JSON-parse limit, heap per idle thread, and
 * what folding the workload's records into the read models costs (bench/readModels.ts).
 * Prints a table and writes bench/results.json. Measures only; asserts nothing.
 */
import { writeFile } from "node:fs/promises";
import { runPipeline } from "./pipeline.js";
import { captureFrames, measureRaw } from "./raw.js";
import { measureHeapPerThread } from "./heap.js";
import { captureRecords, measureReadModels } from "./readModels.js";
import type { Workload } from "./workload.js";

if (typeof globalThis.gc !== "function") {
  throw new Error(
    "the heap measurement needs a forced GC: run with `node --expose-gc --import tsx bench/run.ts` (npm run bench)",
  );
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

const folds = await measureReadModels(await captureRecords(WORKLOAD));

const heap = await measureHeapPerThread(THREADS);

const pipelinePerS = pipelineRate(pipeline);
const rawPerS = raw.events / raw.seconds;
const round = (n: number) => Number(n.toPrecision(4));
/** A fold's time per record as a share of the pipeline's time per record. */
const shareOfPipeline = (foldPerS: number) => pipelinePerS / foldPerS;
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
  // (a) Projections.apply, (b) one immutable @xstate/store of every UI model (text deltas included),
  // (c) (a) plus the store of low-rate models the runtime's `select` uses (no text delta reaches it).
  readmodels_records: folds.records,
  readmodels_projections_records_per_s: Math.round(folds.projections),
  readmodels_store_records_per_s: Math.round(folds.store),
  readmodels_hybrid_records_per_s: Math.round(folds.hybrid),
  readmodels_store_vs_projections: round(folds.store / folds.projections),
  readmodels_hybrid_vs_projections: round(folds.hybrid / folds.projections),
  readmodels_projections_vs_pipeline: round(folds.projections / pipelinePerS),
  readmodels_store_vs_pipeline: round(folds.store / pipelinePerS),
  readmodels_hybrid_vs_pipeline: round(folds.hybrid / pipelinePerS),
  // What each store adds per record, as a share of the pipeline's time per record (carries the rate under ~0.05):
  // (b) comes on top of the projections the runtime needs anyway; (c) adds its difference to (a).
  readmodels_store_added_share_of_pipeline: round(shareOfPipeline(folds.store)),
  readmodels_hybrid_added_share_of_pipeline: round(shareOfPipeline(folds.hybrid) - shareOfPipeline(folds.projections)),
  readmodels_notifications: { store: folds.storeNotifications, hybrid: folds.hybridNotifications },
};

const percent = (share: number) => `${(share * 100).toFixed(2)}%`;
const rows: Array<[string, string, string]> = [
  ["pipeline throughput", results.pipeline_events_per_s.toLocaleString("en-US"), "events/s"],
  ["raw parse+dispatch", results.raw_events_per_s.toLocaleString("en-US"), "events/s"],
  ["ratio pipeline/raw", results.ratio.toString(), ""],
  ["events measured", `${pipeline.events} (${frames.length} frames)`, "records"],
  ["pipeline wall time", results.pipeline_seconds.toString(), "s (median run)"],
  ["pipeline runs", results.pipeline_runs_events_per_s.join(" / "), "events/s"],
  ["heap per idle thread", results.heap_bytes_per_idle_thread.toLocaleString("en-US"), `bytes (${THREADS} threads)`],
  [
    "fold (a) projections",
    results.readmodels_projections_records_per_s.toLocaleString("en-US"),
    `records/s (${folds.records} records)`,
  ],
  [
    "fold (b) full store",
    results.readmodels_store_records_per_s.toLocaleString("en-US"),
    `records/s (x${results.readmodels_store_vs_projections} of a)`,
  ],
  [
    "fold (c) hybrid",
    results.readmodels_hybrid_records_per_s.toLocaleString("en-US"),
    `records/s (x${results.readmodels_hybrid_vs_projections} of a)`,
  ],
  ["(b) adds to pipeline", percent(results.readmodels_store_added_share_of_pipeline), "of its time per record"],
  ["(c) adds to pipeline", percent(results.readmodels_hybrid_added_share_of_pipeline), "of its time per record"],
];
const width = (i: 0 | 1) => Math.max(...rows.map((r) => r[i].length), i === 0 ? 6 : 5);
console.log(`${"metric".padEnd(width(0))}  ${"value".padStart(width(1))}  unit`);
for (const [metric, value, unit] of rows)
  console.log(`${metric.padEnd(width(0))}  ${value.padStart(width(1))}  ${unit}`);

const out = new URL("./results.json", import.meta.url);
await writeFile(out, JSON.stringify(results, null, 2) + "\n");
console.log(`\nwrote ${out.pathname}`);
