import { createReadStream } from "node:fs";
import { mkdir, open, type FileHandle } from "node:fs/promises";
import { dirname } from "node:path";
import { z } from "zod";
import { StoreCorruptError } from "../../domain/errors.js";
import { LogChain } from "./chain.js";
import { PRIVATE_DIR_MODE, PRIVATE_FILE_MODE } from "./files.js";

/**
 * The log's file format: one JSON record per line (`{"seq","at","event"}`), read back with
 * byte offsets so a torn tail can be cut exactly.
 */

/** One index entry (byte offset) per this many records, for catch-up reads near a seq. */
export const INDEX_STRIDE = 1024;

const RecordShape = z.object({
  seq: z.number().int().positive(),
  at: z.string(),
  event: z.looseObject({ type: z.string() }),
});

type Line = { text: string; bytes: Buffer; start: number; end: number; terminated: boolean };

/** Streams lines with their byte offsets (readline hides offsets, which truncation needs). */
export async function* scanLines(file: string, from = 0): AsyncGenerator<Line> {
  let carry: Buffer[] = [];
  let lineStart = from;
  let pos = from;
  for await (const chunk of createReadStream(file, { start: from }) as AsyncIterable<Buffer>) {
    let cut = 0;
    for (let nl = chunk.indexOf(0x0a); nl !== -1; nl = chunk.indexOf(0x0a, cut)) {
      const piece = chunk.subarray(cut, nl);
      const bytes = carry.length > 0 ? Buffer.concat([...carry, piece]) : piece;
      const end = pos + nl + 1;
      yield { text: bytes.toString("utf8"), bytes, start: lineStart, end, terminated: true };
      carry = [];
      lineStart = end;
      cut = nl + 1;
    }
    if (cut < chunk.length) carry.push(chunk.subarray(cut));
    pos += chunk.length;
  }
  if (carry.length > 0) {
    const bytes = Buffer.concat(carry);
    yield { text: bytes.toString("utf8"), bytes, start: lineStart, end: pos, terminated: false };
  }
}

function describeIssue(error: z.ZodError): { field: string; message: string } {
  const issue = error.issues[0];
  return { field: issue?.path.map(String).join(".") || "(root)", message: issue?.message ?? "invalid" };
}

/** A valid record, or the reason the line is not one. */
export function parseLine(text: string): { seq: number } | string {
  let value: unknown;
  try {
    value = JSON.parse(text);
  } catch {
    return "not valid JSON";
  }
  const result = RecordShape.safeParse(value);
  if (result.success) return result.data;
  const { field, message } = describeIssue(result.error);
  return `invalid record at ${field}: ${message}`;
}

/** What open cut from the end of the log, and why: a torn write, or a complete last line that does not parse. */
export type CutTail = { line: number; bytes: number; complete: boolean; reason: string };

export type Recovered = {
  records: number;
  goodEnd: number;
  truncatedBytes: number;
  index: number[];
  cut: CutTail | null;
  /** The chain (chain.ts) of the records kept, at `goodEnd`: the log goes on feeding it. */
  chain: LogChain;
};

/**
 * Where a verified snapshot says the log's first `seq` lines end (`offset`), with the sparse index of those lines and
 * the log's chain taken up at `offset`: open scans only what follows.
 */
export type VerifiedStart = { seq: number; offset: number; index: readonly number[]; chain: LogChain };

const NEWLINE = Buffer.from("\n");

/**
 * Validates the file (or, from a verified start, what follows it); only the final line may be bad (a torn write) and
 * is cut.
 */
export async function recover(file: string, start?: VerifiedStart): Promise<Recovered> {
  const corrupt = (line: number, reason: string) =>
    new StoreCorruptError(`${file} line ${line}: ${reason}`, { file, line });
  let lineNo = start?.seq ?? 0;
  let expected = lineNo + 1;
  let goodEnd = start?.offset ?? 0;
  let fileEnd = goodEnd;
  let bad: { line: number; reason: string; complete: boolean } | undefined;
  const index: number[] = start ? [...start.index] : [];
  const chain = start?.chain ?? LogChain.empty();
  for await (const line of scanLines(file, goodEnd)) {
    lineNo++;
    if (bad) throw corrupt(bad.line, bad.reason); // something follows the bad line: not a torn tail
    fileEnd = line.end;
    const parsed = line.terminated ? parseLine(line.text) : "no trailing newline";
    if (typeof parsed === "string") {
      bad = { line: lineNo, reason: parsed, complete: line.terminated };
      continue;
    }
    if (parsed.seq !== expected) throw corrupt(lineNo, `expected seq ${expected}, found ${parsed.seq}`);
    if ((expected - 1) % INDEX_STRIDE === 0) index.push(line.start);
    chain.update(line.bytes);
    chain.update(NEWLINE);
    expected++;
    goodEnd = line.end;
  }
  const truncatedBytes = fileEnd - goodEnd;
  const cut = bad ? { line: bad.line, bytes: truncatedBytes, complete: bad.complete, reason: bad.reason } : null;
  return { records: expected - 1, goodEnd, truncatedBytes, index, cut, chain };
}

/** Where line `seq` starts and ends in the file, from the sparse index (reads at most one index stride). */
export async function lineRange(
  file: string,
  index: readonly number[],
  seq: number,
): Promise<{ start: number; end: number }> {
  const slot = Math.floor((seq - 1) / INDEX_STRIDE);
  const offset = index[slot];
  let at = offset === undefined ? 0 : slot * INDEX_STRIDE;
  for await (const line of scanLines(file, offset ?? 0)) {
    if (++at === seq) return { start: line.start, end: line.end };
  }
  throw new StoreCorruptError(`${file} ends before seq ${seq}`, { file });
}

/** The records after `afterSeq` up to `upTo`, parsed, starting at the nearest indexed record; each seq checked. */
export async function* readRecords<R extends { seq: number }>(
  file: string,
  index: readonly number[],
  afterSeq: number,
  upTo: number,
): AsyncGenerator<R> {
  if (afterSeq >= upTo) return;
  const slot = Math.floor(afterSeq / INDEX_STRIDE);
  const offset = index[slot];
  let seq = offset === undefined ? 0 : slot * INDEX_STRIDE;
  for await (const line of scanLines(file, offset ?? 0)) {
    seq++;
    let record: R;
    try {
      record = JSON.parse(line.text) as R;
    } catch {
      throw new StoreCorruptError(`${file}: the line of seq ${seq} is not JSON`, { file });
    }
    if (record?.seq !== seq)
      throw new StoreCorruptError(`${file}: expected seq ${seq}, found ${record?.seq}`, { file });
    if (seq > afterSeq) yield record;
    if (seq >= upTo) return;
  }
  throw new StoreCorruptError(`${file} ends before seq ${upTo}`, { file });
}

/** Frozen all the way down: a record every reader shares. */
export function deepFreeze<T>(value: T): T {
  if (typeof value !== "object" || value === null || Object.isFrozen(value)) return value;
  Object.freeze(value);
  // for-in, not Object.keys: no array of keys made for each object of every record.
  for (const key in value) if (Object.hasOwn(value, key)) deepFreeze((value as Record<string, unknown>)[key]);
  return value;
}

/**
 * Opens the log file for appending (private, whatever the umask or an older version left), validates it from `start`
 * (`recover`), cuts a torn tail, and makes the file's directory entry durable (matters when the file was just made).
 */
export async function openLogFile(
  file: string,
  start: VerifiedStart | undefined,
): Promise<{ fh: FileHandle; found: Recovered }> {
  await mkdir(dirname(file), { recursive: true, mode: PRIVATE_DIR_MODE });
  const fh = await open(file, "a", PRIVATE_FILE_MODE);
  try {
    await fh.chmod(PRIVATE_FILE_MODE);
    const found = await recover(file, start);
    if (found.truncatedBytes > 0) {
      await fh.truncate(found.goodEnd);
      await fh.datasync();
    }
    // Windows cannot open a directory for fsync.
    if (process.platform !== "win32") {
      const dir = await open(dirname(file), "r");
      await dir.sync().finally(() => dir.close());
    }
    return { fh, found };
  } catch (error) {
    await fh.close();
    throw error;
  }
}
