import { createHash } from "node:crypto";
import { closeSync, openSync, readSync } from "node:fs";
import { StoreCorruptError } from "../../domain/errors.js";

/**
 * A snapshot's text file as it is read (texts.ts says what is in it and how it is written): never trusted, each block
 * it reads checked against the sum the snapshot names before a text in it is returned.
 */

/** The text file's blocks, each checked by its sha256 before a text in it is read. */
export const TEXT_BLOCK = 1 << 16;

const sha256 = (bytes: Uint8Array) => createHash("sha256").update(bytes).digest("hex");

/** How much of a text file a snapshot relies on: its length, and the sha256 of each block of it. */
export interface TextCover {
  bytes: number;
  blocks: readonly string[];
}

/** A text file of one generation, open for reading while the texts read from it may still be asked for. */
export class TextStore {
  #fd: number | null;
  #cover: TextCover;
  /** Whole blocks checked against `#cover` (they never change: the file is only appended to past its cover). */
  readonly #checked = new Set<number>();
  /** Told when a block does not match (before the read throws): the owner stops trusting the snapshot. */
  onCorrupt: ((error: StoreCorruptError) => void) | undefined;

  private constructor(
    readonly path: string,
    readonly gen: number,
    fd: number,
    cover: TextCover,
  ) {
    this.#fd = fd;
    this.#cover = cover;
  }

  static open(path: string, gen: number, cover: TextCover): TextStore {
    return new TextStore(path, gen, openSync(path, "r"), cover);
  }

  get cover(): TextCover {
    return this.#cover;
  }

  /** A newer snapshot relies on more of the file (what it appended, and the blocks' sums). */
  extend(cover: TextCover): void {
    this.#cover = cover;
  }

  read(start: number, bytes: number): string {
    if (start + bytes > this.#cover.bytes) this.#corrupt(`a text at ${start} runs past the ${this.#cover.bytes} bytes`);
    // Once closed (the runtime closed), by its path again: a read of a closed runtime's views still works.
    const fd = this.#fd ?? openSync(this.path, "r");
    try {
      const last = bytes === 0 ? -1 : Math.floor((start + bytes - 1) / TEXT_BLOCK);
      for (let block = Math.floor(start / TEXT_BLOCK); block <= last; block++) this.#check(fd, block);
      return this.#bytes(fd, start, bytes).toString("utf8");
    } finally {
      if (fd !== this.#fd) closeSync(fd);
    }
  }

  /**
   * Checks every block not checked yet, one per turn of the event loop (a background check: `read` checks what it
   * reads anyway). Resolves null, or why the file does not match (then told to `onCorrupt` too); stops when `signal`
   * is aborted.
   */
  async checkAll(signal?: AbortSignal): Promise<string | null> {
    const blocks = this.#cover.blocks.length;
    for (let block = 0; block < blocks; block++) {
      await new Promise(setImmediate);
      if (signal?.aborted || this.#fd === null) return null;
      try {
        this.#check(this.#fd, block);
      } catch (error) {
        return error instanceof Error ? error.message : String(error);
      }
    }
    return null;
  }

  #check(fd: number, block: number): void {
    if (this.#checked.has(block)) return;
    const start = block * TEXT_BLOCK;
    const end = Math.min(start + TEXT_BLOCK, this.#cover.bytes);
    const expected = this.#cover.blocks[block];
    if (expected === undefined || sha256(this.#bytes(fd, start, end - start)) !== expected) {
      this.#corrupt(`block ${block} (bytes ${start}..${end}) is not what the snapshot wrote`);
    }
    if (end - start === TEXT_BLOCK) this.#checked.add(block); // a partial last block may be extended: checked again
  }

  #bytes(fd: number, start: number, bytes: number): Buffer {
    const buffer = Buffer.allocUnsafe(bytes);
    for (let done = 0; done < bytes;) {
      const read = readSync(fd, buffer, done, bytes - done, start + done);
      if (read === 0) this.#corrupt(`it ends before byte ${start + bytes}`);
      done += read;
    }
    return buffer;
  }

  #corrupt(why: string): never {
    const error = new StoreCorruptError(`${this.path}: ${why}`, { file: this.path });
    try {
      this.onCorrupt?.(error);
    } catch {
      // the owner's trouble: the read still fails with the corruption
    }
    throw error;
  }

  close(): void {
    if (this.#fd !== null) closeSync(this.#fd);
    this.#fd = null;
  }
}

/** `text`, a part of a snapshot's text file (a list of items, receipts...), parsed; or `store_corrupt`. */
export function parseJson(text: string, what: string): unknown {
  try {
    return JSON.parse(text);
  } catch (error) {
    throw new StoreCorruptError(`the projection snapshot's ${what} are not JSON (${String(error)})`, {});
  }
}

/** The JSON at `ref`, a part of the text file; or `store_corrupt`. */
export function readJson(ref: TextRef, what = "parts"): unknown {
  return parseJson(ref.store.read(ref.start, ref.bytes), what);
}

/** Where a field's text is. */
export interface TextRef {
  store: TextStore;
  start: number;
  bytes: number;
  /** What the field holds is made of the text (a run's items, from their JSON); absent: the text itself. */
  parse?: ((text: string) => unknown) | undefined;
}
