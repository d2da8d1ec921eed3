import { createHash } from "node:crypto";
import { open, readdir, rm } from "node:fs/promises";
import { join } from "node:path";
import { StoreCorruptError } from "../../domain/errors.js";
import { PRIVATE_FILE_MODE } from "../store/files.js";
import { TEXT_BLOCK, TextStore, type TextCover, type TextRef } from "./textStore.js";

/**
 * Long texts of a projection snapshot (streamed message text, command output, handoff summaries) live in a text file
 * beside it (`projections.text.<gen>`, raw UTF-8, appended to), not in its body: open reads none of them, and each is
 * read from the file the first time something reads its field (`lazyText`). A log that is mostly streamed text thus
 * reopens in the time of its structure, and keeps in memory only the texts that were read.
 *
 * The file only grows while snapshots use it: a snapshot names the generation and the length it relies on, and the
 * next one appends after that length (bytes past it are from an attempt that did not complete, and are overwritten).
 * A runtime that started without a usable snapshot starts a new generation, and so does one whose file holds more
 * than twice what its snapshot uses (plus `COMPACT_SLACK`): the file stays within a small multiple of the live text.
 * The older generations are removed once a snapshot naming the new one is installed.
 *
 * The file is never trusted: the snapshot names the sha256 of each of its blocks (`TEXT_BLOCK` bytes; the last one
 * partial) up to the length it relies on, and a read checks the blocks it touches (once each) before it returns a
 * text (textStore.ts). A block that does not match is `store_corrupt`, told to its owner (`onCorrupt`), never served.
 * Only well-formed text goes to the file (`toTextFile`): a string with a lone surrogate has no UTF-8 form, and stays
 * in the snapshot's JSON body, which keeps it exactly.
 */

/** Strings at least this long (UTF-16 units) in an object's field go to the text file. */
export const LAZY_TEXT_MIN = 256;
/** A text file is rewritten in a new generation once it exceeds twice what its snapshot uses by this much. */
export const COMPACT_SLACK = 1 << 20;

export const textFileName = (gen: number) => `projections.text.${gen}`;
export const TEXT_FILE_PATTERN = /^projections\.text\.(\d+)$/;

const sha256 = (bytes: Uint8Array) => createHash("sha256").update(bytes).digest("hex");

/** Whether `value` goes to the text file: a long string that has a UTF-8 form (no lone surrogate). */
export function toTextFile(value: unknown): value is string {
  // String.prototype.isWellFormed is in Node 20 (ES2024), not yet in the ES2023 lib this project compiles with.
  return (
    typeof value === "string" &&
    value.length >= LAZY_TEXT_MIN &&
    (value as string & { isWellFormed(): boolean }).isWellFormed()
  );
}

/** The fields not read yet, by object: what the next snapshot refers to again instead of reading. */
const unread = new WeakMap<object, Record<string, TextRef>>();
/**
 * The fields read since, with the text they were read as: while a field still holds that very text, the next
 * snapshot refers to it where it is (a text read is not written again, so reading never grows the file).
 */
const readFrom = new WeakMap<object, Record<string, ReadFrom>>();
/** A field read from the file: the text (or, for a parsed field, the sha256 of the text) it was read as. */
type ReadFrom = { ref: TextRef; value: unknown; digest?: string };

export function unreadTexts(target: object): ReadonlyMap<string, TextRef> | undefined {
  const fields = unread.get(target);
  return fields && new Map(Object.entries(fields));
}

/** The field becomes an ordinary one holding `value` (read from `ref` as `text`, or set). */
function settle(target: object, key: string, value: unknown, read?: { ref: TextRef; text: string }): void {
  const fields = unread.get(target);
  if (fields) delete fields[key];
  if (read) {
    // A parsed value can change in place: what tells it did not is the same text made of it again (`again`).
    const from: ReadFrom = read.ref.parse
      ? { ref: read.ref, value: undefined, digest: sha256(Buffer.from(read.text, "utf8")) }
      : { ref: read.ref, value };
    const fields = readFrom.get(target);
    if (fields) fields[key] = from;
    else readFrom.set(target, { [key]: from });
  }
  try {
    Object.defineProperty(target, key, { value, writable: true, enumerable: true, configurable: true });
  } catch {
    // a frozen copy keeps the accessor; it still answers
  }
}

/** One accessor per field name, shared by every object (a closure per field costs too much for a whole log). */
const accessors = new Map<string, PropertyDescriptor>();
function accessorOf(key: string): PropertyDescriptor {
  let descriptor = accessors.get(key);
  if (!descriptor) {
    descriptor = {
      enumerable: true,
      configurable: true,
      get(this: object) {
        const ref = unread.get(this)?.[key];
        if (!ref) return undefined;
        const text = ref.store.read(ref.start, ref.bytes);
        const value = ref.parse ? ref.parse(text) : text;
        settle(this, key, value, { ref, text });
        return value;
      },
      set(this: object, value: unknown) {
        settle(this, key, value);
      },
    };
    accessors.set(key, descriptor);
  }
  return descriptor;
}

/**
 * Makes `target[key]` the text at `ref`, read on first access (then an ordinary field). Setting it first replaces it
 * without reading.
 */
export function lazyText(target: Record<string, unknown>, key: string, ref: TextRef): void {
  const fields = unread.get(target);
  if (fields) fields[key] = ref;
  else unread.set(target, { [key]: ref });
  Object.defineProperty(target, key, accessorOf(key));
}

/**
 * The texts a snapshot being encoded adds to its text file: appended after `start` (the length the last installed
 * snapshot relies on), in a generation that is `store`'s, or a new one (store null: every text is written again).
 * It counts what the snapshot uses of the file (`live`), which says when the file is due for a new generation.
 */
export class TextSink {
  readonly start: number;
  #end: number;
  #live = 0;
  readonly #chunks: Buffer[] = [];
  readonly #placed: Array<{ target: object; key: string; text: string; start: number; bytes: number }> = [];
  /** Unread texts copied from another generation: their refs point at the copy once it is installed. */
  readonly #moved: Array<{ ref: TextRef; start: number }> = [];

  constructor(
    readonly store: TextStore | null,
    start: number,
  ) {
    this.start = this.#end = start;
  }

  /** Where `text` will be: [start, bytes]. With `field`, the field holding it (see `release`). */
  put(text: string, field?: { target: object; key: string }): [number, number] {
    const bytes = Buffer.from(text, "utf8");
    const at = this.#end;
    this.#chunks.push(bytes);
    this.#end += bytes.length;
    this.#live += bytes.length;
    if (field) this.#placed.push({ ...field, text, start: at, bytes: bytes.length });
    return [at, bytes.length];
  }

  /**
   * Where field `key` of `target` goes in the text file, or null when it stays in the body: an unread text where it
   * is (or copied), a text read and unchanged since where it was read from, a long well-formed string appended.
   */
  field(target: object, key: string): [number, number] | null {
    const ref = unread.get(target)?.[key];
    if (ref) return this.keep(ref);
    const value = (target as Record<string, unknown>)[key];
    if (!toTextFile(value)) return null;
    const read = readFrom.get(target)?.[key];
    if (read && read.value === value && this.holds(read.ref)) return this.keep(read.ref);
    return this.put(value, { target, key });
  }

  /**
   * Where `json`, made again of the parsed field `key` of `target` (a run's items), goes: where the field was read
   * from when it came out the same (nothing in it changed), else appended.
   */
  again(target: object, key: string, json: string): [number, number] {
    const read = readFrom.get(target)?.[key];
    if (read?.digest && this.holds(read.ref)) {
      const bytes = Buffer.from(json, "utf8");
      if (bytes.length === read.ref.bytes && sha256(bytes) === read.digest) return this.keep(read.ref);
    }
    return this.put(json);
  }

  /**
   * Once the snapshot is installed: the fields whose text it wrote, and that still hold it, read it from the file
   * from now on (the next snapshot refers to it where it is instead of writing it again, and the heap lets it go);
   * the unread texts it copied from another generation are read from the copy.
   */
  release(store: TextStore): void {
    for (const { target, key, text, start, bytes } of this.#placed.splice(0)) {
      if (Object.getOwnPropertyDescriptor(target, key)?.value !== text) continue; // changed since: kept as it is
      try {
        lazyText(target as Record<string, unknown>, key, { store, start, bytes });
      } catch {
        // a frozen object keeps its text in memory
      }
    }
    for (const { ref, start } of this.#moved.splice(0)) Object.assign(ref, { store, start });
  }

  /** Whether `ref` is in the file this sink appends to (its place stays valid). */
  holds(ref: TextRef): boolean {
    return this.store !== null && ref.store.path === this.store.path;
  }

  /** A text not read yet: where it already is, or (from another generation) copied. */
  keep(ref: TextRef): [number, number] {
    if (this.holds(ref)) {
      this.#live += ref.bytes;
      return [ref.start, ref.bytes];
    }
    const at = this.put(ref.store.read(ref.start, ref.bytes));
    this.#moved.push({ ref, start: at[0] });
    return at;
  }

  get end(): number {
    return this.#end;
  }

  /** The bytes of the file this snapshot refers to (texts kept where they are count once each time referred to). */
  get live(): number {
    return this.#live;
  }

  /** The bytes to write at `start`, in order. */
  get chunks(): readonly Buffer[] {
    return this.#chunks;
  }
}

/**
 * Writes what `sink` added to its text file (a new generation when it has none), fdatasynced, with the sums of the
 * blocks it changed: the text file a snapshot can then rely on, up to `cover.bytes`.
 */
export async function writeTexts(
  dataDir: string,
  sink: TextSink,
): Promise<{ store: TextStore; gen: number; cover: TextCover }> {
  let store = sink.store;
  if (!store) {
    const gens = (await readdir(dataDir))
      .map((name) => TEXT_FILE_PATTERN.exec(name)?.[1])
      .filter(Boolean)
      .map(Number);
    const gen = Math.max(0, ...gens) + 1;
    const path = join(dataDir, textFileName(gen));
    await (await open(path, "wx", PRIVATE_FILE_MODE)).close();
    store = TextStore.open(path, gen, { bytes: 0, blocks: [] });
  }
  // The sums of the blocks before the one `start` is in stay; that block is summed again from its first byte.
  const firstBlock = Math.floor(sink.start / TEXT_BLOCK);
  const blocks = store.cover.blocks.slice(0, firstBlock);
  let block = createHash("sha256");
  let inBlock = 0;
  const sum = (bytes: Buffer) => {
    for (let at = 0; at < bytes.length;) {
      const piece = bytes.subarray(at, at + TEXT_BLOCK - inBlock);
      block.update(piece);
      inBlock += piece.length;
      at += piece.length;
      if (inBlock === TEXT_BLOCK) {
        blocks.push(block.digest("hex"));
        block = createHash("sha256");
        inBlock = 0;
      }
    }
  };
  const fh = await open(store.path, "r+");
  try {
    await fh.chmod(PRIVATE_FILE_MODE);
    const head = Buffer.alloc(sink.start - firstBlock * TEXT_BLOCK);
    for (let done = 0; done < head.length;) {
      const { bytesRead } = await fh.read(head, done, head.length - done, firstBlock * TEXT_BLOCK + done);
      if (bytesRead === 0) throw new StoreCorruptError(`${store.path} is shorter than its snapshot says`, {});
      done += bytesRead;
    }
    if (head.length > 0 && sha256(head) !== store.cover.blocks[firstBlock]) {
      throw new StoreCorruptError(`${store.path}: its last block is not what the snapshot wrote`, { file: store.path });
    }
    sum(head);
    let at = sink.start;
    // In pieces of a few MB: the texts of a whole log may not fit one buffer.
    for (let i = 0; i < sink.chunks.length;) {
      const batch: Buffer[] = [];
      for (let size = 0; i < sink.chunks.length && size < 1 << 23; i++) {
        batch.push(sink.chunks[i]!);
        size += sink.chunks[i]!.length;
      }
      const data = Buffer.concat(batch);
      for (let done = 0; done < data.length;)
        done += (await fh.write(data, done, data.length - done, at + done)).bytesWritten;
      sum(data);
      at += data.length;
    }
    await fh.datasync();
  } finally {
    await fh.close();
  }
  if (inBlock > 0) blocks.push(block.digest("hex"));
  if (!sink.store) await syncDir(dataDir);
  return { store, gen: store.gen, cover: { bytes: sink.end, blocks } };
}

/** Removes the text files of other generations than `keep` (what no installed snapshot names any more). */
export async function removeTextFiles(dataDir: string, keep: number): Promise<void> {
  for (const name of await readdir(dataDir)) {
    const gen = TEXT_FILE_PATTERN.exec(name)?.[1];
    if (gen !== undefined && Number(gen) !== keep) await rm(join(dataDir, name), { force: true });
  }
}

/** Makes a directory's entries (a rename, a new file) durable. Windows cannot open a directory for fsync. */
export async function syncDir(dir: string): Promise<void> {
  if (process.platform === "win32") return;
  const fh = await open(dir, "r");
  await fh.sync().finally(() => fh.close());
}
