import { mkdtemp, rm } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { createRuntime, createScriptedAdapter, type DomainEvent, type LogRecord } from "../src/index.js";
import { turnText, workloadScript, type Workload } from "./workload.js";

export interface PipelineResult {
  /** Records the subscriber received after the first send, up to the last run.terminal. */
  events: number;
  seconds: number;
}

/**
 * Whole pipeline: scripted frames -> normalizer -> actors -> durable log -> one subscriber.
 * Turns are sent one after another on one thread; each next send waits until the
 * subscriber has seen the previous run's `run.terminal`. `onRecord` sees every record the
 * subscriber receives (bench/readModels.ts keeps them to fold again).
 */
export async function runPipeline(
  w: Workload,
  onRecord?: (record: LogRecord<DomainEvent>) => void,
): Promise<PipelineResult> {
  const dataDir = await mkdtemp(join(tmpdir(), "tiller-bench-"));
  const runtime = await createRuntime({
    dataDir,
    providers: { scripted: createScriptedAdapter({ script: workloadScript(w), chunkDelayMs: 0 }) },
  });
  try {
    let startSeq = Infinity;
    let events = 0;
    const ended = new Set<string>();
    let waiting: { runId: string; done: () => void } | undefined;
    const unsubscribe = runtime.subscribe({ afterSeq: 0 }, (record) => {
      if (record.seq > startSeq) events++;
      onRecord?.(record);
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
    return { events, seconds };
  } finally {
    await runtime.close();
    await rm(dataDir, { recursive: true, force: true });
  }
}
