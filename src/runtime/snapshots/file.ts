import { createHash } from "node:crypto";
import { open, readFile, rename, rm, stat } from "node:fs/promises";
import { dirname, join } from "node:path";
import { z } from "zod";
import { PRIVATE_FILE_MODE } from "../store/files.js";
import { INDEX_STRIDE, parseLine, type VerifiedStart } from "../store/jsonl.js";
import { decodeState } from "./state.js";
import { syncDir, TextStore, textFileName } from "./texts.js";

/**
 * The projection snapshot file (`projections.snapshot` beside `events.jsonl`): two lines, a header and the body.
 *
 * The header says what the body is the fold of: the log's records 1..`seq`, whose line `seq` ends at byte `offset`
 * and is `line.bytes` long with the sha256 `line.sha256`, and the log's sparse index up to it. The body is the
 * projections' state (codec.ts), checked by its own length and sha256. Open trusts a snapshot only when all of it
 * holds against the log as it is now; otherwise it is ignored and the log replayed (`readSnapshot`).
 */

export const SNAPSHOT_FILE = "projections.snapshot";
/** The file's layout: bump when the header or the codec changes. (The fold's meaning has FOLD_VERSION.) */
export const SNAPSHOT_FORMAT = 5;

const sha256 = (bytes: Uint8Array) => createHash("sha256").update(bytes).digest("hex");
const Hex64 = z.string().regex(/^[0-9a-f]{64}$/);

const HeaderSchema = z.object({
  format: z.literal(SNAPSHOT_FORMAT),
  fold: z.number().int(),
  seq: z.number().int().positive(),
  offset: z.number().int().positive(),
  line: z.object({ bytes: z.number().int().positive(), sha256: Hex64 }),
  index: z.array(z.number().int().nonnegative()),
  body: z.object({ bytes: z.number().int().nonnegative(), sha256: Hex64 }),
  /** The text file (texts.ts) its long texts are in, and how much of it they take. */
  text: z.object({ gen: z.number().int().nonnegative(), bytes: z.number().int().nonnegative() }),
});
type Header = z.infer<typeof HeaderSchema>;

/** What a snapshot says of the log line it was taken at. */
export interface LineCheck {
  seq: number;
  /** Where the line ends (the byte after its newline). */
  offset: number;
  bytes: number;
  sha256: string;
}

/** Reads bytes [start, end) of a file. */
async function readRange(file: string, start: number, end: number): Promise<Buffer> {
  const fh = await open(file, "r");
  try {
    const buffer = Buffer.alloc(end - start);
    let done = 0;
    while (done < buffer.length) {
      const { bytesRead } = await fh.read(buffer, done, buffer.length - done, start + done);
      if (bytesRead === 0) break;
      done += bytesRead;
    }
    return buffer.subarray(0, done);
  } finally {
    await fh.close();
  }
}

/** The check of log line `seq`, which spans bytes [start, end) of `logFile`. */
export async function checkLine(logFile: string, seq: number, start: number, end: number): Promise<LineCheck> {
  const bytes = await readRange(logFile, start, end);
  return { seq, offset: end, bytes: bytes.length, sha256: sha256(bytes) };
}

/**
 * Writes the snapshot atomically: a temporary file, fdatasynced, renamed over the old one, then the directory synced
 * (a crash leaves the old snapshot or the new one, never a part).
 */
export async function writeSnapshot(
  dataDir: string,
  snapshot: { fold: number; line: LineCheck; index: readonly number[]; body: string; text: Header["text"] },
): Promise<void> {
  const body = Buffer.from(snapshot.body, "utf8");
  const { seq, offset, bytes, sha256: lineSha } = snapshot.line;
  const header: Header = {
    format: SNAPSHOT_FORMAT,
    fold: snapshot.fold,
    seq,
    offset,
    line: { bytes, sha256: lineSha },
    index: [...snapshot.index],
    body: { bytes: body.length, sha256: sha256(body) },
    text: snapshot.text,
  };
  const file = join(dataDir, SNAPSHOT_FILE);
  const temporary = `${file}.${process.pid}.tmp`;
  const fh = await open(temporary, "w", PRIVATE_FILE_MODE);
  try {
    await fh.chmod(PRIVATE_FILE_MODE);
    await fh.writeFile(Buffer.concat([Buffer.from(JSON.stringify(header) + "\n", "utf8"), body]));
    await fh.datasync();
  } catch (error) {
    await fh.close().catch(() => undefined);
    await rm(temporary, { force: true }).catch(() => undefined); // a full disk keeps no half file
    throw error;
  }
  await fh.close();
  try {
    await rename(temporary, file);
  } catch (error) {
    await rm(temporary, { force: true }).catch(() => undefined);
    throw error;
  }
  await syncDir(dirname(file));
}

/** A snapshot that holds against the log: where the log's open starts, and the projections' state at `start.seq`. */
export interface VerifiedSnapshot {
  start: VerifiedStart;
  state: unknown;
  /** Its long texts' file, open: whoever takes the snapshot closes it. */
  texts: { store: TextStore; bytes: number };
}

/**
 * The data directory's snapshot, checked against its log: `snapshot` when everything holds, else `ignored` says why
 * (nothing at all when there is no snapshot). Never throws for what is in the files: a snapshot is never trusted.
 */
export async function readSnapshot(
  dataDir: string,
  logFile: string,
  fold: number,
): Promise<{ snapshot: VerifiedSnapshot | null; ignored: string | null }> {
  const ignore = (why: string) => ({ snapshot: null, ignored: `${SNAPSHOT_FILE} was ignored: ${why}` });
  let data: Buffer;
  try {
    data = await readFile(join(dataDir, SNAPSHOT_FILE));
  } catch (error) {
    if ((error as NodeJS.ErrnoException).code === "ENOENT") return { snapshot: null, ignored: null };
    return ignore(`it cannot be read (${(error as NodeJS.ErrnoException).code ?? String(error)})`);
  }
  try {
    const newline = data.indexOf(0x0a);
    if (newline < 0) return ignore("it has no header line");
    const parsed = HeaderSchema.safeParse(JSON.parse(data.toString("utf8", 0, newline)));
    if (!parsed.success) return ignore("its header is not one this version writes");
    const header = parsed.data;
    if (header.fold !== fold) return ignore(`it was taken with fold version ${header.fold}, this is ${fold}`);
    const why = await mismatch(header, logFile);
    if (why) return ignore(why);
    const body = data.subarray(newline + 1);
    if (body.length !== header.body.bytes || sha256(body) !== header.body.sha256) {
      return ignore("its body does not match its hash");
    }
    const textFile = join(dataDir, textFileName(header.text.gen));
    const textBytes = await stat(textFile).then(
      (s) => s.size,
      () => -1,
    );
    if (textBytes < header.text.bytes)
      return ignore(`its text file ${textFileName(header.text.gen)} is missing or short`);
    const texts = { store: TextStore.open(textFile, header.text.gen), bytes: header.text.bytes };
    try {
      const state = decodeState(body.toString("utf8"), texts);
      const start = { seq: header.seq, offset: header.offset, index: header.index };
      return { snapshot: { start, state, texts }, ignored: null };
    } catch (error) {
      texts.store.close();
      throw error;
    }
  } catch (error) {
    return ignore(`it cannot be read back (${error instanceof Error ? error.message : String(error)})`);
  }
}

/** Why the log is not the one the snapshot was taken of (null: its line `seq` is where and what it says). */
async function mismatch(header: Header, logFile: string): Promise<string | null> {
  const size = await stat(logFile).then(
    (s) => s.size,
    () => 0,
  );
  if (size < header.offset)
    return `the log is ${size} bytes, shorter than its line ${header.seq} end (${header.offset})`;
  const expectedSlots = Math.floor((header.seq - 1) / INDEX_STRIDE) + 1;
  if (header.index.length !== expectedSlots || header.index.some((at) => at >= header.offset)) {
    return "its index does not cover the records it holds";
  }
  const start = header.offset - header.line.bytes;
  if (start < 0) return "its line check is out of range";
  const line = await readRange(logFile, start, header.offset);
  if (line.length !== header.line.bytes || sha256(line) !== header.line.sha256) {
    return `log line ${header.seq} is not the one it was taken at`;
  }
  if (start > 0 && (await readRange(logFile, start - 1, start))[0] !== 0x0a) {
    return `log line ${header.seq} does not start a line`;
  }
  const parsed = line.at(-1) === 0x0a ? parseLine(line.toString("utf8", 0, line.length - 1)) : "no newline";
  if (typeof parsed === "string" || parsed.seq !== header.seq)
    return `log line ${header.seq} is not record ${header.seq}`;
  return null;
}
