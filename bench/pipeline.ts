import { mkdtemp, rm, stat } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import {
  createRuntime,
  createScriptedAdapter,
  type DomainEvent,
  type LogRecord,
  type ProviderAdapterEvent,
} from "../src/index.js";
import { tapFrames } from "./frameTap.js";
import { turnText, workloadScript, type Workload } from "./workload.js";

/**
 * Frames a provider's stream hands the runtime at once, at full speed: a read from a provider's pipe holds many
 * frames (64 KiB of frames of about 150 bytes is over 400 of them). The scripted provider streams this many chunks
 * each time it wakes.
 */
export const PIPE_BURST = 64;

export interface PipelineResult {
  /** Records the subscriber received after the first send, up to the last run.terminal. */
  records: number;
  /** From the first send to the subscriber seeing the last run.terminal. */
  seconds: number;
  /** Size of the runtime's events.jsonl once it closed. */
  logBytes: number;
}

export interface PipelineOptions {
  /** The scripted provider's pause between streamed chunks (default 0: full speed). */
  chunkDelayMs?: number;
  /** Chunks the scripted provider streams each time it wakes (default PIPE_BURST). */
  chunksPerWake?: number;
  /** Every record the subscriber receives (bench/readModels.ts keeps them to fold again). */
  onRecord?: (record: LogRecord<DomainEvent>) => void;
  /** Every frame the adapter yields (adds a promise per frame: leave it out of timed runs). */
  onFrame?: (frame: ProviderAdapterEvent) => void;
}

/**
 * Whole pipeline: scripted frames -> normalizer -> actors -> durable log -> one subscriber.
 * Turns are sent one after another on one thread; each next send waits until the
 * subscriber has seen the previous run's `run.terminal`. Every frame the adapter emits comes
 * after the first send (the session starts with the first run), so the frames of a run are
 * those `captureFrames` records for the same workload.
 */
export async function runPipeline(w: Workload, hooks: PipelineOptions = {}): Promise<PipelineResult> {
  const dataDir = await mkdtemp(join(tmpdir(), "tiller-bench-"));
  const scripted = createScriptedAdapter({
    script: workloadScript(w),
    chunkDelayMs: hooks.chunkDelayMs ?? 0,
    chunksPerWake: hooks.chunksPerWake ?? PIPE_BURST,
  });
  const runtime = await createRuntime({
    dataDir,
    providers: { scripted: hooks.onFrame ? tapFrames(scripted, hooks.onFrame) : scripted },
  });
  let closed = false;
  try {
    let startSeq = Infinity;
    let records = 0;
    const ended = new Set<string>();
    let waiting: { runId: string; done: () => void } | undefined;
    const unsubscribe = runtime.subscribe({ afterSeq: 0 }, (record) => {
      if (record.seq > startSeq) records++;
      hooks.onRecord?.(record);
      if (record.event.type !== "run.terminal") return;
      ended.add(record.event.runId);
      if (waiting?.runId === record.event.runId) waiting.done();
    });
    const { threadId } = await runtime.createThread({ providerTarget: "scripted", title: "bench" });
    startSeq = (await runtime.readThread(threadId)).seq;

    const start = process.hrtime.bigint();
    for (let i = 0; i < w.turns; i++) {
      const { runId } = await runtime.sendMessage({ threadId, text: turnText(i) });
      if (!ended.has(runId)) await new Promise<void>((done) => (waiting = { runId, done }));
    }
    const seconds = Number(process.hrtime.bigint() - start) / 1e9;
    unsubscribe();
    await runtime.close();
    closed = true;
    const logBytes = (await stat(join(dataDir, "events.jsonl"))).size;
    return { records, seconds, logBytes };
  } finally {
    if (!closed) await runtime.close();
    await rm(dataDir, { recursive: true, force: true });
  }
}
