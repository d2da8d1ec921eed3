import { createWriteStream } from "node:fs";
import { mkdtemp, readFile, rm, stat } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { createRuntime, createScriptedAdapter } from "../src/index.js";
import { runPipeline } from "./pipeline.js";
import type { Workload } from "./workload.js";

/**
 * Reopen of a large data directory against the time to JSON.parse every line of its log.
 * The directory is built from the records of one real pipeline run (threads, runs, attempts,
 * nodes, deltas, terminals; two turns at a provider's pace), written over and over with fresh
 * ids (every app id and native ref of a copy gets the copy's suffix) and consecutive seqs,
 * straight into events.jsonl.
 * The first open may write what a runtime keeps beside its log (snapshots); the second is timed.
 */

export interface ReopenResult {
  events: number;
  /** Records of the source run: the log is that many records' copies, each with its own thread. */
  recordsPerCopy: number;
  logBytes: number;
  /** createRuntime on the built directory (its first life there): context only. */
  firstOpenSeconds: number;
  /** The timed reopen: until createRuntime resolves (close untimed). */
  reopenSeconds: number;
  /** Reading the file, splitting lines and JSON.parse of each. */
  parseSeconds: number;
}

/** App ids (`thr_…`, `nod_…`, base64url for derived ones) and the scripted provider's native refs. */
const ID =
  /\b(?:thr|run|att|nod|req|ses|pth|ptu|msg|cmd|hnd|xfr|chk)_[A-Za-z0-9_-]+|\bs(?:thread|turn|item)-[0-9a-f]+-\d+/g;

/**
 * The source run streams at a provider's pace (a chunk every millisecond or so), not at full
 * speed: a record then holds a delta or a few, as in a live session. At full speed the runtime
 * coalesces thousands of deltas into one record, and a million such records would stand for a
 * log of gigabytes no session writes.
 */
const SOURCE: Workload = { turns: 2, textChars: 3_000, chunkSize: 6 };
const SOURCE_CHUNK_DELAY_MS = 1;

/** Each source record's `at` and its event JSON cut around the ids: [text, id, text, id, ..., text]. */
async function sourceTemplates(): Promise<Array<{ at: string; parts: string[] }>> {
  const templates: Array<{ at: string; parts: string[] }> = [];
  await runPipeline(SOURCE, {
    chunkDelayMs: SOURCE_CHUNK_DELAY_MS,
    chunksPerWake: 1,
    onRecord: (record) => {
      const json = JSON.stringify(record.event);
      const parts: string[] = [];
      let last = 0;
      for (const match of json.matchAll(ID)) {
        parts.push(json.slice(last, match.index), match[0]);
        last = match.index + match[0].length;
      }
      parts.push(json.slice(last));
      templates.push({ at: JSON.stringify(record.at), parts });
    },
  });
  return templates;
}

/** Writes the log; returns how many records one copy (one source run) has. */
async function writeLog(file: string, events: number): Promise<number> {
  const templates = await sourceTemplates();
  const out = createWriteStream(file, { mode: 0o600 });
  let buffer = "";
  for (let seq = 1; seq <= events; seq++) {
    const copy = Math.floor((seq - 1) / templates.length);
    const { at, parts } = templates[(seq - 1) % templates.length]!;
    const suffix = `x${copy.toString(36)}`;
    let event = parts[0]!;
    for (let i = 1; i < parts.length; i += 2) event += parts[i]! + suffix + parts[i + 1]!;
    buffer += `{"seq":${seq},"at":${at},"event":${event}}\n`;
    if (buffer.length > 1 << 20 || seq === events) {
      if (!out.write(buffer)) await new Promise<void>((resolve) => out.once("drain", () => resolve()));
      buffer = "";
    }
  }
  await new Promise<void>((resolve, reject) => out.end((error?: Error | null) => (error ? reject(error) : resolve())));
  return templates.length;
}

/** Reads the file, splits it into lines and parses each: the floor any replay of the log pays. */
async function parseEveryLine(file: string): Promise<{ seconds: number; lines: number }> {
  const start = process.hrtime.bigint();
  const bytes = await readFile(file);
  let lines = 0;
  for (let from = 0, nl = bytes.indexOf(10); nl !== -1; from = nl + 1, nl = bytes.indexOf(10, from)) {
    JSON.parse(bytes.toString("utf8", from, nl));
    lines++;
  }
  return { seconds: Number(process.hrtime.bigint() - start) / 1e9, lines };
}

/**
 * `profileOpen`, when given, is handed one more open of the same directory after the measured
 * ones (bench/run.ts profiles it with `--profile=reopen`).
 */
export async function measureReopen(
  events: number,
  profileOpen?: (open: () => Promise<number>) => Promise<void>,
): Promise<ReopenResult> {
  const dataDir = await mkdtemp(join(tmpdir(), "tiller-bench-reopen-"));
  const file = join(dataDir, "events.jsonl");
  try {
    const recordsPerCopy = await writeLog(file, events);
    const logBytes = (await stat(file)).size;
    const open = async () => {
      const start = process.hrtime.bigint();
      const runtime = await createRuntime({ dataDir, providers: { scripted: createScriptedAdapter() } });
      const seconds = Number(process.hrtime.bigint() - start) / 1e9;
      await runtime.close();
      return seconds;
    };
    const firstOpenSeconds = await open();
    globalThis.gc?.();
    const reopenSeconds = await open();
    globalThis.gc?.();
    const parsed = await parseEveryLine(file);
    if (parsed.lines < events) throw new Error(`reopen: the log has ${parsed.lines} lines, ${events} were written`);
    await profileOpen?.(open);
    return { events, recordsPerCopy, logBytes, firstOpenSeconds, reopenSeconds, parseSeconds: parsed.seconds };
  } finally {
    await rm(dataDir, { recursive: true, force: true });
  }
}
