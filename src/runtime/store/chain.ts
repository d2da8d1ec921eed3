import { createHash, type Hash } from "node:crypto";
import { open, type FileHandle } from "node:fs/promises";

/**
 * The log's chained digest: what lets a projection snapshot prove that it is a fold of *this* log's prefix without
 * reading the prefix at open.
 *
 * The file's bytes are cut into blocks of `CHAIN_BLOCK` bytes. The chain after k whole blocks is
 * `D_k = sha256(D_(k-1) || block k)`, from `D_0 = sha256("tiller-log-chain/1")`; its digest at any byte `end` is
 * `sha256(D_k || bytes [k * CHAIN_BLOCK, end))`. The log feeds every batch it writes to its chain (one running hash,
 * no bytes kept), so a snapshot taken at line `seq` names the digest at that line's end for free. Open then checks
 * the snapshot's last, partial block against the file (at most one block read), and the whole blocks before it
 * (`D_k`) in the background (`chainOf`): a prefix that changed in any byte gives another `D_k`.
 */

export const CHAIN_BLOCK = 1 << 20;
const SEED = createHash("sha256").update("tiller-log-chain/1").digest();

/** The chain at one byte of the log: `blocks` whole blocks (`blocksDigest` is D_k), `digest` the chain at `end`. */
export interface ChainPoint {
  end: number;
  blocks: number;
  blocksDigest: string;
  digest: string;
}

export class LogChain {
  /** D_k, the chain of the whole blocks so far. */
  #blocksDigest: Buffer;
  #blocks: number;
  /** sha256(D_k || what the current block holds so far). */
  #partial: Hash;
  #end: number;

  private constructor(blocksDigest: Buffer, blocks: number) {
    this.#blocksDigest = blocksDigest;
    this.#blocks = blocks;
    this.#partial = createHash("sha256").update(blocksDigest);
    this.#end = blocks * CHAIN_BLOCK;
  }

  /** The chain of an empty log. */
  static empty(): LogChain {
    return new LogChain(SEED, 0);
  }

  /** The chain taken up at `blocks` whole blocks whose chain is `blocksDigest` (the caller then feeds the rest). */
  static resume(blocks: number, blocksDigest: string): LogChain {
    return new LogChain(Buffer.from(blocksDigest, "hex"), blocks);
  }

  /** Bytes of the log, in file order from where the chain is. */
  update(bytes: Uint8Array): void {
    for (let at = 0; at < bytes.length;) {
      const room = CHAIN_BLOCK - (this.#end - this.#blocks * CHAIN_BLOCK);
      const piece = bytes.subarray(at, at + room);
      this.#partial.update(piece);
      this.#end += piece.length;
      at += piece.length;
      if (piece.length === room) {
        this.#blocksDigest = this.#partial.digest();
        this.#blocks++;
        this.#partial = createHash("sha256").update(this.#blocksDigest);
      }
    }
  }

  get end(): number {
    return this.#end;
  }

  /** Where the chain is now. */
  point(): ChainPoint {
    return {
      end: this.#end,
      blocks: this.#blocks,
      blocksDigest: this.#blocksDigest.toString("hex"),
      digest: this.#partial.copy().digest("hex"),
    };
  }
}

/** Reads bytes [start, end) of an open file (fewer if it ends first). */
export async function readSpan(fh: FileHandle, start: number, end: number): Promise<Buffer> {
  const buffer = Buffer.alloc(Math.max(0, end - start));
  let done = 0;
  while (done < buffer.length) {
    const { bytesRead } = await fh.read(buffer, done, buffer.length - done, start + done);
    if (bytesRead === 0) break;
    done += bytesRead;
  }
  return buffer.subarray(0, done);
}

/**
 * D_k of `file`'s first `blocks` whole blocks, read a block at a time; each block waits for the event loop
 * (`setImmediate`) so a long check never holds the runtime up. `signal` stops it (it then resolves null).
 */
export async function chainOf(file: string, blocks: number, signal?: AbortSignal): Promise<string | null> {
  const chain = LogChain.empty();
  const fh = await open(file, "r");
  try {
    for (let k = 0; k < blocks; k++) {
      await new Promise(setImmediate);
      if (signal?.aborted) return null;
      const block = await readSpan(fh, k * CHAIN_BLOCK, (k + 1) * CHAIN_BLOCK);
      if (block.length < CHAIN_BLOCK) return `short:${k}`; // the file ends inside the prefix: no D_k matches this
      chain.update(block);
    }
  } finally {
    await fh.close();
  }
  return chain.point().blocksDigest;
}
