/**
 * `npm run bench`: the figures of issue 16, measured side by side in one run (see bench/README.md).
 * Prints the table of targets and the context figures, writes bench/results.json. Measures only;
 * asserts nothing.
 *
 * Flags: `--profile` (or `--profile=pipeline,codex,concurrent,reopen`) prints the top self-time
 * functions of those parts afterwards; `--no-providers` leaves out the real-provider start-up
 * figures (bench/startup.ts); `--only=pipeline,codex,...` measures those parts alone (for quick
 * tries: results.json is then written partial). Environment: BENCH_REOPEN_EVENTS (default
 * 1,000,000), BENCH_THREADS (default 1,000).
 */
import { writeFile } from "node:fs/promises";
import { loadavg } from "node:os";
import { measureCodexReplay } from "./codexReplay.js";
import { measureConcurrent } from "./concurrent.js";
import { measureHeapPerThread } from "./heap.js";
import { runPipeline, type PipelineResult } from "./pipeline.js";
import { profile } from "./profile.js";
import { captureFrames, measureRaw } from "./raw.js";
import { captureRecords, measureReadModels } from "./readModels.js";
import { measureReopen } from "./reopen.js";
import { measureStartRatios } from "./startup.js";
import { printTable } from "./targets.js";
import type { Workload } from "./workload.js";

if (typeof globalThis.gc !== "function") {
  throw new Error(
    "the heap figures need a forced GC: run `node --expose-gc --import tsx bench/run.ts` (npm run bench)",
  );
}

const PARTS = ["pipeline", "codex", "concurrent", "heap", "reopen", "providers"] as const;
type Part = (typeof PARTS)[number];
const flag = (name: string) => process.argv.slice(2).find((a) => a === `--${name}` || a.startsWith(`--${name}=`));
const listFlag = (name: string, all: readonly string[]) => {
  const found = flag(name);
  if (!found) return null;
  return found.includes("=") ? found.slice(found.indexOf("=") + 1).split(",") : [...all];
};
const only = listFlag("only", PARTS);
const wanted = (part: Part) => (only ? only.includes(part) : part !== "providers" || !flag("no-providers"));
const profiled = listFlag("profile", ["pipeline"]) ?? [];
for (const part of [...(only ?? []), ...profiled])
  if (!(PARTS as readonly string[]).includes(part)) throw new Error(`no bench part named ${part}: ${PARTS.join(", ")}`);

const WORKLOAD: Workload = { turns: 10, textChars: 30_000, chunkSize: 6 };
// The raw side is warmed up by a pass of at least half a second; the pipeline by whole runs of the workload, until
// its code is as optimized as the raw loop's (the first runs of a process are up to twice as slow).
const WARMUP_RUNS = 3;
const PIPELINE_RUNS = 5; // the median is reported: wall-clock numbers on a shared machine are noisy
// A turn of 100 agent messages, each streaming its recorded deltas 40 times over (about 100 deltas a message, as a
// long Codex message streams): about 10,200 frames a turn, 122,000 in all.
const CODEX = { turns: 12, copies: 100, repeats: 40 };
const THREADS = Number(process.env.BENCH_THREADS ?? 1_000);
// The threads start over a 3 s ramp, as a load test ramps up, then stream 90 deltas each, one every 100 ms (see
// bench/README.md for why the ramp). One short warm-up run, then the median of 3 runs (by ratio) is reported.
const CONCURRENT = { threads: THREADS, deltas: 90, chunkDelayMs: 100, groupCommitMs: 2, rampMs: 3_000 };
const CONCURRENT_RUNS = 3;
const REOPEN_EVENTS = Number(process.env.BENCH_REOPEN_EVENTS ?? 1_000_000);

const round = (n: number) => Number(n.toPrecision(4));
const results: Record<string, unknown> = {
  node: process.version,
  date: new Date().toISOString(),
  loadavg_at_start: loadavg().map(round), // the machine is shared: how busy it was
};
const context: Array<[string, string]> = [];
const note = (label: string, value: string) => context.push([label, value]);

if (wanted("pipeline")) {
  const frames = await captureFrames(WORKLOAD);
  for (let i = 0; i < WARMUP_RUNS; i++) await runPipeline(WORKLOAD);
  measureRaw(frames); // warms up the raw side too
  // Each pipeline run is paired with a raw pass right after it, and the ratio is the median of the
  // pairs': on a shared machine the load drifts, and a pair sees about the same load.
  const runs: Array<PipelineResult & { rawPerS: number; ratio: number }> = [];
  for (let i = 0; i < PIPELINE_RUNS; i++) {
    const run = await runPipeline(WORKLOAD);
    const raw = measureRaw(frames);
    const rawPerS = raw.events / raw.seconds;
    runs.push({ ...run, rawPerS, ratio: frames.length / run.seconds / rawPerS });
  }
  const median = [...runs].sort((a, b) => a.ratio - b.ratio)[Math.floor(PIPELINE_RUNS / 2)]!;
  // Context: the same workload streamed one chunk per event-loop turn (each frame a macrotask of its own).
  const single = await runPipeline(WORKLOAD, { chunksPerWake: 1 });
  const singleRaw = measureRaw(frames);
  const singleRatio = frames.length / single.seconds / (singleRaw.events / singleRaw.seconds);
  const rawPerS = median.rawPerS;
  const framesPerS = frames.length / median.seconds;
  const contentBytes = frames.reduce((sum, line) => sum + Buffer.byteLength(deltaOfLine(line)), 0);

  // An untimed run that counts what the adapter yields up to its last turn.terminal (the session's
  // stop at close comes after): the frames the ratio divides by are those.
  let tapped = 0;
  let upToLastTerminal = 0;
  const records = await captureRecords(WORKLOAD, (frame) => {
    tapped++;
    if (frame.event.type === "turn.terminal") upToLastTerminal = tapped;
  });
  if (upToLastTerminal !== frames.length)
    throw new Error(`pipeline: the adapter yielded ${upToLastTerminal} frames, raw has ${frames.length}`);
  const folds = await measureReadModels(records);

  Object.assign(results, {
    ratio: round(median.ratio),
    log_bytes_per_content_byte: round(median.logBytes / contentBytes),
    pipeline_frames_per_s: Math.round(framesPerS),
    raw_frames_per_s: Math.round(rawPerS),
    pipeline_records_per_s: Math.round(median.records / median.seconds),
    provider_frames: frames.length,
    records_measured: median.records,
    pipeline_seconds: round(median.seconds),
    pipeline_runs_frames_per_s: runs.map((r) => Math.round(frames.length / r.seconds)),
    pipeline_runs_raw_frames_per_s: runs.map((r) => Math.round(r.rawPerS)),
    pipeline_runs_ratio: runs.map((r) => round(r.ratio)),
    ratio_one_chunk_per_wake: round(singleRatio),
    log_bytes: median.logBytes,
    content_bytes: contentBytes,
    workload: WORKLOAD,
    // The read-model folds of issue 13 (bench/readModels.ts), per record the subscriber received.
    readmodels_records: folds.records,
    readmodels_projections_records_per_s: Math.round(folds.projections),
    readmodels_store_records_per_s: Math.round(folds.store),
    readmodels_hybrid_records_per_s: Math.round(folds.hybrid),
    readmodels_hybrid_vs_projections: round(folds.hybrid / folds.projections),
  });
  note("pipeline", `${results.pipeline_frames_per_s} frames/s, raw ${results.raw_frames_per_s} frames/s`);
  note("pipeline runs", `ratio ${runs.map((r) => round(r.ratio)).join(" / ")} (median taken)`);
  note("one chunk a wake", `ratio ${round(singleRatio)} (each frame a macrotask of its own)`);
  note("pipeline records", `${median.records} records for ${frames.length} frames in ${round(median.seconds)} s`);
  note("log", `${median.logBytes} bytes for ${contentBytes} bytes of streamed content`);
}

if (wanted("codex")) {
  const codex = await measureCodexReplay(CODEX.turns, CODEX.copies, CODEX.repeats);
  const perS = codex.frames / codex.seconds;
  const turnRatios = [...codex.turnRatios].sort((a, b) => a - b);
  Object.assign(results, {
    codex_replay_ratio: round(turnRatios[Math.floor(turnRatios.length / 2)]!),
    codex_replay_turn_ratios: codex.turnRatios.map(round),
    codex_replay_frames_per_s: Math.round(perS),
    codex_raw_frames_per_s: Math.round(codex.rawFramesPerS),
    codex_replay_frames: codex.frames,
    codex_replay_frame_bytes: Math.round(codex.frameBytes),
    codex_replay_seconds: round(codex.seconds),
  });
  note("codex replay", `${Math.round(perS)} frames/s, raw ${Math.round(codex.rawFramesPerS)} frames/s`);
  note("codex turns", `ratio ${codex.turnRatios.map(round).join(" / ")} (median taken)`);
  note("codex frames", `${codex.frames} frames of ${Math.round(codex.frameBytes)} B in ${round(codex.seconds)} s`);
}

if (wanted("concurrent")) {
  await measureConcurrent({ ...CONCURRENT, threads: Math.ceil(THREADS / 5), deltas: 20, rampMs: 200 });
  const ratioOf = (run: { p99Ms: number; fdatasyncP99Ms: number }) =>
    run.p99Ms / (CONCURRENT.groupCommitMs + run.fdatasyncP99Ms);
  const runs = [];
  for (let i = 0; i < CONCURRENT_RUNS; i++) {
    // Each run starts from a collected heap: the garbage of what ran before is not collected inside its window.
    globalThis.gc!();
    runs.push(await measureConcurrent(CONCURRENT));
  }
  const c = [...runs].sort((a, b) => ratioOf(a) - ratioOf(b))[CONCURRENT_RUNS >> 1]!;
  Object.assign(results, {
    concurrent_p99_ratio: round(ratioOf(c)),
    concurrent_runs_ratio: runs.map((run) => round(ratioOf(run))),
    concurrent_p99_ms: round(c.p99Ms),
    concurrent_p50_ms: round(c.p50Ms),
    concurrent_max_ms: round(c.maxMs),
    concurrent_p99_with_startup_ms: round(c.allP99Ms),
    concurrent_window_deltas: c.windowDeltas,
    concurrent_fdatasync_p99_ms: round(c.fdatasyncP99Ms),
    concurrent_deltas: c.deltas,
    concurrent_seconds: round(c.seconds),
    concurrent: CONCURRENT,
  });
  note("concurrent runs", `ratio ${runs.map((run) => round(ratioOf(run))).join(" / ")} (median taken)`);
  note("concurrent, all streaming", `p99 ${round(c.p99Ms)} ms, max ${round(c.maxMs)} ms (${c.windowDeltas} deltas)`);
  note("concurrent, every delta", `p50 ${round(c.p50Ms)} ms, p99 ${round(c.allP99Ms)} ms (start-up included)`);
  note("bare fdatasync p99", `${round(c.fdatasyncP99Ms)} ms (+ ${CONCURRENT.groupCommitMs} ms window)`);
  note("concurrent load", `${c.deltas} deltas, ${THREADS} threads, ${round(c.seconds)} s`);
}

if (wanted("heap")) {
  const heap = await measureHeapPerThread(THREADS);
  Object.assign(results, { heap_bytes_per_idle_thread: Math.round(heap.bytesPerThread), threads: THREADS });
}

if (wanted("reopen")) {
  const profileOpen = profiled.includes("reopen")
    ? async (open: () => Promise<number>) => printProfile("reopen (one more open)", await profile(open))
    : undefined;
  const r = await measureReopen(REOPEN_EVENTS, profileOpen);
  Object.assign(results, {
    reopen_ratio: round(r.reopenSeconds / r.parseSeconds),
    reopen_seconds: round(r.reopenSeconds),
    reopen_first_open_seconds: round(r.firstOpenSeconds),
    reopen_parse_seconds: round(r.parseSeconds),
    reopen_events: r.events,
    reopen_records_per_copy: r.recordsPerCopy,
    reopen_log_bytes: r.logBytes,
  });
  note("reopen", `${round(r.reopenSeconds)} s (first open ${round(r.firstOpenSeconds)} s)`);
  note("parse every line", `${round(r.parseSeconds)} s for ${r.events} lines, ${r.logBytes} bytes`);
  note("reopen directory", `${Math.ceil(r.events / r.recordsPerCopy)} copies of a ${r.recordsPerCopy}-record run`);
}

if (wanted("providers")) Object.assign(results, await measureStartRatios());

results.loadavg_at_end = loadavg().map(round);
printTable(results, context);
const out = new URL("./results.json", import.meta.url);
await writeFile(out, JSON.stringify(results, null, 2) + "\n");
console.log(`\nwrote ${out.pathname}${only ? ` (only ${only.join(", ")})` : ""}`);

for (const part of profiled) {
  if (part === "pipeline") printProfile("scripted pipeline", await profile(() => runPipeline(WORKLOAD)));
  else if (part === "codex")
    printProfile(
      "codex replay",
      await profile(() => measureCodexReplay(CODEX.turns, CODEX.copies, CODEX.repeats, false)),
    );
  else if (part === "concurrent") printProfile("concurrent", await profile(() => measureConcurrent(CONCURRENT)));
  // reopen is profiled inside its measurement (the directory only exists there); heap and providers are not profiled.
}

function printProfile(title: string, lines: Awaited<ReturnType<typeof profile>>): void {
  console.log(`\nCPU profile, ${title}: top self time`);
  for (const { fn, self } of lines) console.log(`${(self * 100).toFixed(1).padStart(5)}%  ${fn}`);
}

function deltaOfLine(line: string): string {
  const frame = JSON.parse(line) as { event: { type: string; delta?: string } };
  return frame.event.type === "item.delta" ? (frame.event.delta ?? "") : "";
}
