import { closeSync, openSync, readSync } from "node:fs";
import { open, readdir, rm } from "node:fs/promises";
import { join } from "node:path";
import { StoreCorruptError } from "../../domain/errors.js";
import { PRIVATE_FILE_MODE } from "../store/files.js";

/**
 * Long texts of a projection snapshot (streamed message text, command output, handoff summaries) live in a text file
 * beside it (`projections.text.<gen>`, raw UTF-8, appended to), not in its body: open reads none of them, and each is
 * read from the file the first time something reads its field (`lazyText`). A log that is mostly streamed text thus
 * reopens in the time of its structure, and keeps in memory only the texts that were read.
 *
 * The file only grows while snapshots use it: a snapshot names the generation and the length it relies on, and the
 * next one appends after that length (bytes past it are from an attempt that did not complete, and are overwritten).
 * A runtime that started without a usable snapshot starts a new generation; the older ones are removed once a
 * snapshot naming the new one is installed.
 */

/** Strings at least this long (UTF-16 units) in an object's field go to the text file. */
export const LAZY_TEXT_MIN = 256;

export const textFileName = (gen: number) => `projections.text.${gen}`;
export const TEXT_FILE_PATTERN = /^projections\.text\.(\d+)$/;

/** A text file of one generation, open for reading while the texts read from it may still be asked for. */
export class TextStore {
  #fd: number | null;

  private constructor(
    readonly path: string,
    readonly gen: number,
    fd: number,
  ) {
    this.#fd = fd;
  }

  static open(path: string, gen: number): TextStore {
    return new TextStore(path, gen, openSync(path, "r"));
  }

  read(start: number, bytes: number): string {
    const buffer = Buffer.allocUnsafe(bytes);
    // Once closed (the runtime closed), by its path again: a read of a closed runtime's views still works.
    const fd = this.#fd ?? openSync(this.path, "r");
    try {
      for (let done = 0; done < bytes;) {
        const read = readSync(fd, buffer, done, bytes - done, start + done);
        if (read === 0) throw new StoreCorruptError(`${this.path} ends before byte ${start + bytes}`, {});
        done += read;
      }
    } finally {
      if (fd !== this.#fd) closeSync(fd);
    }
    return buffer.toString("utf8");
  }

  close(): void {
    if (this.#fd !== null) closeSync(this.#fd);
    this.#fd = null;
  }
}

/** Where a field's text is. */
export interface TextRef {
  store: TextStore;
  start: number;
  bytes: number;
  /** What the field holds is made of the text (a run's items, from their JSON); absent: the text itself. */
  parse?: ((text: string) => unknown) | undefined;
}

/** The fields not read yet, by object: what the next snapshot refers to again instead of reading. */
const unread = new WeakMap<object, Record<string, TextRef>>();

export function unreadTexts(target: object): ReadonlyMap<string, TextRef> | undefined {
  const fields = unread.get(target);
  return fields && new Map(Object.entries(fields));
}

/** The field becomes an ordinary one holding `value` (the text read, or what was set). */
function settle(target: object, key: string, value: unknown): void {
  const fields = unread.get(target);
  if (fields) delete fields[key];
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
        settle(this, key, value);
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
 */
export class TextSink {
  readonly start: number;
  #end: number;
  readonly #chunks: Buffer[] = [];
  readonly #placed: Array<{ target: object; key: string; text: string; start: number; bytes: number }> = [];

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
    if (field) this.#placed.push({ ...field, text, start: at, bytes: bytes.length });
    return [at, bytes.length];
  }

  /**
   * Once the snapshot is installed: the fields whose text it wrote, and that still hold it, read it from the file
   * from now on (the next snapshot refers to it where it is instead of writing it again, and the heap lets it go).
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
  }

  /** Whether `ref` is in the file this sink appends to (its place stays valid). */
  holds(ref: TextRef): boolean {
    return this.store !== null && ref.store.path === this.store.path;
  }

  /** A text not read yet: where it already is, or (from another generation) copied. */
  keep(ref: TextRef): [number, number] {
    if (this.holds(ref)) return [ref.start, ref.bytes];
    return this.put(ref.store.read(ref.start, ref.bytes));
  }

  get end(): number {
    return this.#end;
  }

  /** The bytes to write at `start`, in order. */
  get chunks(): readonly Buffer[] {
    return this.#chunks;
  }
}

/**
 * Writes what `sink` added to its text file (a new generation when it has none), fdatasynced: the text file a snapshot
 * can then rely on, up to `bytes`.
 */
export async function writeTexts(
  dataDir: string,
  sink: TextSink,
): Promise<{ store: TextStore; gen: number; bytes: number }> {
  let store = sink.store;
  if (!store) {
    const gens = (await readdir(dataDir))
      .map((name) => TEXT_FILE_PATTERN.exec(name)?.[1])
      .filter(Boolean)
      .map(Number);
    const gen = Math.max(0, ...gens) + 1;
    const path = join(dataDir, textFileName(gen));
    await (await open(path, "wx", PRIVATE_FILE_MODE)).close();
    store = TextStore.open(path, gen);
  }
  const fh = await open(store.path, "r+");
  try {
    await fh.chmod(PRIVATE_FILE_MODE);
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
      at += data.length;
    }
    await fh.datasync();
  } finally {
    await fh.close();
  }
  if (!sink.store) await syncDir(dataDir);
  return { store, gen: store.gen, bytes: sink.end };
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
