import { createHash } from "node:crypto";
import { open, readdir, readFile, rename, rm, stat } from "node:fs/promises";
import { dirname, join } from "node:path";
import { z } from "zod";
import { CHAIN_BLOCK, chainOf, LogChain, readSpan, type ChainPoint } from "../store/chain.js";
import { PRIVATE_FILE_MODE } from "../store/files.js";
import { INDEX_STRIDE, parseLine, type VerifiedStart } from "../store/jsonl.js";
import { decodeState } from "./state.js";
import { syncDir, textFileName } from "./texts.js";
import { TEXT_BLOCK, TextStore, type TextCover } from "./textStore.js";

/**
 * The projection snapshot file (`projections.snapshot` beside `events.jsonl`): a seal line, a header line and the body.
 *
 * The seal is the sha256 of everything after it: no byte of the header or the body can change unnoticed.
 * The header says what the body is the fold of:
 * - the log's records 1..`seq`, whose line `seq` ends at byte `offset` and is `line.bytes` long;
 * - the log's chained digest at `offset` (store/chain.ts), so that the prefix is proven the one it was taken of;
 * - the log's sparse index up to it;
 * - the data directory it belongs to (`directory`, from runtime.json), which a snapshot copied from another cannot
 *   share;
 * - its text file (texts.ts): the generation, the length it relies on, what it uses of it, and the sum of each block.
 *
 * The body is the projections' state (codec.ts). Open uses a snapshot only when all of this holds against the files
 * as they are, checking at once what costs one block of the log at most (`readSnapshot`); the whole blocks of the
 * log before it and the text file's blocks are checked in the background and as they are read (`checkPrefix`,
 * texts.ts). Whatever does not hold: the snapshot is ignored and the log replayed, or, found after open, the runtime
 * stops with `store_corrupt` and the snapshot is removed.
 */

export const SNAPSHOT_FILE = "projections.snapshot";
/** The file's layout: bump when the header or the codec changes. (The fold's meaning has FOLD_VERSION.) */
export const SNAPSHOT_FORMAT = 6;
/** What a snapshot being written is called until it is renamed into place: `projections.snapshot.<pid>.tmp`. */
export const SNAPSHOT_TEMP = /^projections\.snapshot\.\d+\.tmp$/;

const sha256 = (bytes: Uint8Array) => createHash("sha256").update(bytes).digest("hex");
const Hex64 = z.string().regex(/^[0-9a-f]{64}$/);

const HeaderSchema = z.object({
  format: z.literal(SNAPSHOT_FORMAT),
  fold: z.number().int(),
  directory: z.string().min(1),
  seq: z.number().int().positive(),
  offset: z.number().int().positive(),
  line: z.object({ bytes: z.number().int().positive() }),
  chain: z.object({ blocks: z.number().int().nonnegative(), blocksDigest: Hex64, digest: Hex64 }),
  index: z.array(z.number().int().nonnegative()),
  text: z.object({
    gen: z.number().int().nonnegative(),
    bytes: z.number().int().nonnegative(),
    live: z.number().int().nonnegative(),
    blocks: z.array(Hex64),
  }),
});
type Header = z.infer<typeof HeaderSchema>;

/** What a snapshot says of the log at its point: its line `seq`, and the log's chain there. */
export interface LogPoint {
  seq: number;
  /** Line `seq`'s length (its end is the chain's). */
  lineBytes: number;
  chain: ChainPoint;
}

/** Reads bytes [start, end) of a file. */
async function readRange(file: string, start: number, end: number): Promise<Buffer> {
  const fh = await open(file, "r");
  try {
    return await readSpan(fh, start, end);
  } finally {
    await fh.close();
  }
}

/**
 * Writes the snapshot atomically: a temporary file, fdatasynced, renamed over the old one, then the directory synced
 * (a crash leaves the old snapshot or the new one, never a part; a temporary file left by a crash is removed at the
 * next open, `removeStaleTemps`).
 */
export async function writeSnapshot(
  dataDir: string,
  snapshot: {
    fold: number;
    directory: string;
    at: LogPoint;
    index: readonly number[];
    body: string;
    text: { gen: number; live: number; cover: TextCover };
  },
): Promise<void> {
  const { seq, lineBytes, chain } = snapshot.at;
  const header: Header = {
    format: SNAPSHOT_FORMAT,
    fold: snapshot.fold,
    directory: snapshot.directory,
    seq,
    offset: chain.end,
    line: { bytes: lineBytes },
    chain: { blocks: chain.blocks, blocksDigest: chain.blocksDigest, digest: chain.digest },
    index: [...snapshot.index],
    text: {
      gen: snapshot.text.gen,
      bytes: snapshot.text.cover.bytes,
      live: snapshot.text.live,
      blocks: [...snapshot.text.cover.blocks],
    },
  };
  const sealed = Buffer.concat([
    Buffer.from(JSON.stringify(header) + "\n", "utf8"),
    Buffer.from(snapshot.body, "utf8"),
  ]);
  const file = join(dataDir, SNAPSHOT_FILE);
  const temporary = `${file}.${process.pid}.tmp`;
  const fh = await open(temporary, "w", PRIVATE_FILE_MODE);
  try {
    await fh.chmod(PRIVATE_FILE_MODE);
    await fh.writeFile(Buffer.concat([Buffer.from(sha256(sealed) + "\n", "utf8"), sealed]));
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

/** Removes what writes of snapshots cut short by a crash left (under the directory's lock: no writer is running). */
export async function removeStaleTemps(dataDir: string): Promise<void> {
  for (const name of await readdir(dataDir)) {
    if (SNAPSHOT_TEMP.test(name)) await rm(join(dataDir, name), { force: true });
  }
}

/** Removes the snapshot (found not to hold after open): the next open replays the log. */
export async function removeSnapshot(dataDir: string): Promise<void> {
  await rm(join(dataDir, SNAPSHOT_FILE), { force: true });
  await syncDir(dataDir);
}

/** A snapshot that holds against the log: where the log's open starts, and the projections' state at `start.seq`. */
export interface VerifiedSnapshot {
  start: VerifiedStart;
  state: unknown;
  /** Its long texts' file, open: whoever takes the snapshot closes it. `live`: what the snapshot uses of it. */
  texts: { store: TextStore; bytes: number; live: number };
  /** What open did not check: the log's whole blocks before the snapshot's last one (`checkPrefix`). */
  prefix: { blocks: number; blocksDigest: string };
}

/**
 * The data directory's snapshot, checked against its log: `snapshot` when everything open checks holds, else
 * `ignored` says why (nothing at all when there is no snapshot). Never throws for what is in the files: a snapshot is
 * never trusted.
 */
export async function readSnapshot(
  dataDir: string,
  logFile: string,
  expected: { fold: number; directory: string },
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
    const sealEnd = data.indexOf(0x0a);
    if (sealEnd !== 64 || data.toString("latin1", 0, 64) !== sha256(data.subarray(65))) {
      return ignore("its seal does not match its contents");
    }
    const headerEnd = data.indexOf(0x0a, 65);
    if (headerEnd < 0) return ignore("it has no header line");
    const parsed = HeaderSchema.safeParse(JSON.parse(data.toString("utf8", 65, headerEnd)));
    if (!parsed.success) return ignore("its header is not one this version writes");
    const header = parsed.data;
    if (header.fold !== expected.fold)
      return ignore(`it was taken with fold version ${header.fold}, this is ${expected.fold}`);
    if (header.directory !== expected.directory) return ignore("it was taken of another data directory");
    const logCheck = await checkLog(header, logFile);
    if (typeof logCheck === "string") return ignore(logCheck);
    const textFile = join(dataDir, textFileName(header.text.gen));
    const textBytes = await stat(textFile).then(
      (s) => s.size,
      () => -1,
    );
    if (textBytes < header.text.bytes)
      return ignore(`its text file ${textFileName(header.text.gen)} is missing or short`);
    if (header.text.blocks.length !== Math.ceil(header.text.bytes / TEXT_BLOCK))
      return ignore("its text file's sums do not cover it");
    const cover = { bytes: header.text.bytes, blocks: header.text.blocks };
    const texts = {
      store: TextStore.open(textFile, header.text.gen, cover),
      bytes: cover.bytes,
      live: header.text.live,
    };
    try {
      const state = decodeState(data.toString("utf8", headerEnd + 1), texts);
      const start = { seq: header.seq, offset: header.offset, index: header.index, chain: logCheck };
      const prefix = { blocks: header.chain.blocks, blocksDigest: header.chain.blocksDigest };
      return { snapshot: { start, state, texts, prefix }, ignored: null };
    } catch (error) {
      texts.store.close();
      throw error;
    }
  } catch (error) {
    return ignore(`it cannot be read back (${error instanceof Error ? error.message : String(error)})`);
  }
}

/**
 * Why the log is not the one the snapshot was taken of, as far as one block of it tells; else the log's chain taken
 * up at the snapshot's point (its last partial block read and summed: it matched the header's digest).
 */
async function checkLog(header: Header, logFile: string): Promise<LogChain | string> {
  const size = await stat(logFile).then(
    (s) => s.size,
    () => 0,
  );
  if (size < header.offset)
    return `the log is ${size} bytes, shorter than its line ${header.seq} end (${header.offset})`;
  const expectedSlots = Math.floor((header.seq - 1) / INDEX_STRIDE) + 1;
  if (
    header.index.length !== expectedSlots ||
    header.index[0] !== 0 ||
    header.index.some((at, i) => at >= header.offset || (i > 0 && at <= header.index[i - 1]!))
  ) {
    return "its index does not cover the records it holds";
  }
  const { blocks, blocksDigest, digest } = header.chain;
  if (blocks !== Math.floor(header.offset / CHAIN_BLOCK)) return "its chain does not end at its line";
  const chain = LogChain.resume(blocks, blocksDigest);
  chain.update(await readRange(logFile, blocks * CHAIN_BLOCK, header.offset));
  if (chain.point().digest !== digest)
    return `the log's last block up to line ${header.seq} is not the one it was taken of`;
  const misplaced = await indexMisses(logFile, header.index, blocks * CHAIN_BLOCK, header.offset);
  if (misplaced) return misplaced;
  const start = header.offset - header.line.bytes;
  if (start < 0) return "its line check is out of range";
  const line = await readRange(logFile, Math.max(0, start - 1), header.offset);
  if (start > 0 && line[0] !== 0x0a) return `log line ${header.seq} does not start a line`;
  const text = line.subarray(start > 0 ? 1 : 0);
  const parsed = text.at(-1) === 0x0a ? parseLine(text.toString("utf8", 0, text.length - 1)) : "no newline";
  if (typeof parsed === "string" || parsed.seq !== header.seq)
    return `log line ${header.seq} is not record ${header.seq}`;
  return chain;
}

/**
 * The background check of a snapshot open used: the log's whole blocks before its last one, then its text file.
 * Resolves null when both hold (or `signal` stopped it), else why not.
 */
export async function checkPrefix(
  logFile: string,
  snapshot: Pick<VerifiedSnapshot, "prefix" | "texts" | "start">,
  signal?: AbortSignal,
): Promise<string | null> {
  const { blocks, blocksDigest } = snapshot.prefix;
  const found = await chainOf(logFile, blocks, signal);
  if (found !== null && found !== blocksDigest) {
    return `events.jsonl before byte ${blocks * CHAIN_BLOCK} is not the log the projection snapshot was taken of`;
  }
  if (signal?.aborted) return null;
  const misplaced = await indexMisses(logFile, snapshot.start.index, 0, blocks * CHAIN_BLOCK);
  return misplaced ?? snapshot.texts.store.checkAll(signal);
}

/**
 * Whether the index entries that fall in bytes [from, to) of the log start their records (`{"seq":N,` after a line
 * end): the chain proves the log's bytes, this the snapshot's index of them (catch-up reads start there).
 */
async function indexMisses(
  logFile: string,
  index: readonly number[],
  from: number,
  to: number,
): Promise<string | null> {
  const fh = await open(logFile, "r");
  try {
    for (let slot = 0; slot < index.length; slot++) {
      const at = index[slot]!;
      if (at < from || at >= to) continue;
      const head = `{"seq":${slot * INDEX_STRIDE + 1},`;
      const bytes = await readSpan(fh, Math.max(0, at - 1), at + head.length);
      const line = at === 0 ? bytes : bytes.subarray(1);
      if ((at > 0 && bytes[0] !== 0x0a) || line.toString("latin1") !== head) {
        return `its index says record ${slot * INDEX_STRIDE + 1} starts at byte ${at}, and it does not`;
      }
    }
    return null;
  } finally {
    await fh.close();
  }
}
