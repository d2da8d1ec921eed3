/**
 * Append-only JSONL event log with group commit.
 *
 * Durability model: `append` is synchronous and only *assigns* a seq; the record becomes
 * durable when the batch it landed in has been written and fdatasynced. Everything that
 * leaves the log to readers (onCommit, subscribe, readAll) is durable, so a reader can
 * never observe an event that a crash could take back.
 *
 * Memory model: records are not retained after commit. Catch-up reads the file, helped
 * by a sparse seq -> byte offset index (one entry per INDEX_STRIDE records).
 *
 * Cost model: each line is built once (JSON.stringify) and never parsed back; readers share one deeply frozen record.
 * Consecutive pieces of one stream queued in the same group are coalesced (`coalesce`) into one record, so a burst
 * of small deltas becomes one line, not one line each.
 */
import type { FileHandle } from "node:fs/promises";
import { ClosedError, InvalidInputError, StoreFailedError, type TillerError } from "../../domain/errors.js";
import type { ChainPoint, LogChain } from "./chain.js";
import { BatchLines, jsonOf } from "./lines.js";
import { guarded, LogReaders, type LogRecord } from "./logReaders.js";
import {
  deepFreeze,
  INDEX_STRIDE,
  lineRange,
  readRecords,
  openLogFile,
  type CutTail,
  type Recovered,
  type VerifiedStart,
} from "./jsonl.js";

export type { LogRecord } from "./logReaders.js";

export interface EventLogOptions<E> {
  /**
   * The group-commit window: a commit that the log starts from idle starts no sooner than this long after the last one
   * ended (or the log opened), so appends within it are grouped into one write + fdatasync; an append that finds the
   * log idle for longer commits at once. Default 2.
   */
  groupWindowMs?: number;
  /** An urgent event makes its batch commit immediately instead of waiting for the window. */
  isUrgent?: (event: E) => boolean;
  /** Clock for `at`. Default `() => new Date()`. */
  now?: () => Date;
  /**
   * Consecutive pieces of one stream queued in the same group become one record: `joins(last, next)` says whether
   * `next` continues the latest queued record (not yet being written); `merge` makes the record of the pieces when
   * its batch is written (a new object, JSON-safe). The merged record keeps the first piece's seq and `at`; the
   * pieces after it get no seq of their own.
   */
  coalesce?: { joins(last: E, next: E): boolean; merge(pieces: readonly E[]): E };
  /** Receives exceptions thrown by listeners/filters and subscriber catch-up failures. */
  onListenerError?: (error: unknown) => void;
  /**
   * Told once when the log stops: a write or fdatasync failed (a full disk...: StoreFailedError), or its owner found
   * it corrupt (`fail`). The log accepts nothing more.
   */
  onFailed?: (error: TillerError) => void;
  /**
   * What a projection snapshot verified against this file (its line `seq` ends at `offset`): open takes the lines up
   * to it as they are and validates only what follows (a torn tail after it is still cut).
   */
  start?: VerifiedStart | undefined;
}

/** A record takes at most this many pieces: a line stays bounded (with `joins` bounding each piece). */
export const MAX_JOINED_PIECES = 1024;

type Waiter = { seq: number; resolve: () => void; reject: (error: unknown) => void };
type ChainWaiter = { seq: number; resolve: (point: ChainPoint) => void; reject: (error: unknown) => void };
/**
 * A record waiting to be written. `json` (its event's) is made at append; once later pieces joined it (`joined`), its
 * event and json are made again when its batch is taken. Its line is written around `json` (`BatchLines`).
 */
type Queued<E> = { seq: number; at: string; event: E; json: string | null; joined: E[] | null };

export class EventLog<E extends { type: string }> {
  static async open<E extends { type: string }>(file: string, options: EventLogOptions<E> = {}): Promise<EventLog<E>> {
    const windowMs = options.groupWindowMs ?? 2;
    if (!Number.isFinite(windowMs) || windowMs < 0) {
      throw new InvalidInputError("groupWindowMs", "must be a non-negative number");
    }
    const { fh, found } = await openLogFile(file, options.start);
    return new EventLog<E>(file, fh, options, windowMs, found);
  }

  /** What open found: the records kept, and the tail it cut (a torn write or an unparseable last line), if any. */
  readonly recovery: { records: number; truncatedBytes: number; cut: CutTail | null };
  /** The records open took as they were (from a verified snapshot's start): it validated only those after. */
  readonly scannedFrom: number;
  readonly #file: string;
  readonly #fh: FileHandle;
  readonly #options: EventLogOptions<E>;
  readonly #windowMs: number;
  readonly #index: number[];
  #head: number;
  #durableHead: number;
  #endOffset: number;
  #queue: Queued<E>[] = [];
  /** `at` of the last clock reading, and the millisecond it was read at: one ISO string per millisecond. */
  #at = { ms: Number.NaN, iso: "" };
  #timer: NodeJS.Timeout | undefined;
  /** When the last commit ended (performance.now()), or the log opened: the window counts from there. */
  #lastCommitEnd = performance.now();
  readonly #lines = new BatchLines();
  #flushing: Promise<void> | undefined;
  #waiters: Waiter[] = [];
  /** The file's chained digest (chain.ts), fed every batch written. */
  readonly #chain: LogChain;
  #chainWaiters: ChainWaiter[] = [];
  readonly #readers: LogReaders<E>;
  #closing = false;
  /** Reads of records up to `seq` wait for `verdict` (see `holdReads`). */
  #held: { seq: number; verdict: Promise<Error | null> } | undefined;
  #closed: Promise<void> | undefined;
  #failed: { error: unknown } | undefined;

  private constructor(file: string, fh: FileHandle, options: EventLogOptions<E>, windowMs: number, found: Recovered) {
    this.#file = file;
    this.#fh = fh;
    this.#options = options;
    this.#readers = new LogReaders<E>((afterSeq, upTo) => this.#read(afterSeq, upTo), options.onListenerError);
    this.#windowMs = windowMs;
    this.#index = found.index;
    this.#head = this.#durableHead = found.records;
    this.#endOffset = found.goodEnd;
    this.#chain = found.chain;
    this.recovery = { records: found.records, truncatedBytes: found.truncatedBytes, cut: found.cut };
    this.scannedFrom = options.start?.seq ?? 0;
  }

  /** Last assigned seq (0 when empty). */
  get head(): number {
    return this.#head;
  }

  /** Last seq known to be fdatasynced. */
  get durableHead(): number {
    return this.#durableHead;
  }

  /** Bytes of the durable records (where the next written line starts). */
  get durableBytes(): number {
    return this.#endOffset;
  }

  /**
   * Nothing is queued: every assigned record is written or being written, so none of them can change any more (a
   * queued record can still take more pieces: see `coalesce`).
   */
  get sealed(): boolean {
    return this.#queue.length === 0;
  }

  /** The sparse index (byte offset of records 1, 1 + INDEX_STRIDE, ...) up to durable record `seq`. */
  indexUpTo(seq: number): number[] {
    return this.#index.slice(0, seq < 1 ? 0 : Math.floor((seq - 1) / INDEX_STRIDE) + 1);
  }

  /** Where durable line `seq` starts and ends in the file (reads at most one index stride). */
  async lineRange(seq: number): Promise<{ start: number; end: number }> {
    if (!Number.isInteger(seq) || seq < 1 || seq > this.#durableHead) {
      throw new InvalidInputError("seq", `must be an integer in 1..${this.#durableHead}`);
    }
    return lineRange(this.#file, this.#index, seq);
  }

  /**
   * The log's chained digest at the end of record `seq`, which must be the head of a sealed log (what a projection
   * snapshot is taken of): at once when it is durable, else when the batch in flight (which ends with it) is.
   */
  chainAt(seq: number): Promise<ChainPoint> {
    if (this.#failed) return Promise.reject(this.#failed.error);
    if (seq !== this.#head || !this.sealed) {
      return Promise.reject(new InvalidInputError("seq", `must be the head (${this.#head}) of a sealed log`));
    }
    if (seq === this.#durableHead) return Promise.resolve(this.#chain.point());
    return new Promise((resolve, reject) => this.#chainWaiters.push({ seq, resolve, reject }));
  }

  /**
   * Assigns the next seq and queues the record (synchronously; it becomes durable later). The returned record holds
   * the caller's event; when the event was coalesced into the record queued before it, the returned seq is that
   * record's. Readers get the committed record (the coalesced one), deeply frozen, shared by all of them.
   */
  append(event: E): LogRecord<E> {
    if (this.#failed) throw this.#failed.error;
    if (this.#closing) throw new ClosedError("event log");
    // Never write a line that open() would later reject as corrupt.
    if (typeof event !== "object" || event === null || typeof event.type !== "string") {
      throw new InvalidInputError("event.type", "expected a string");
    }
    const urgent = this.#options.isUrgent?.(event) ?? false; // may throw: do it before any state change
    const last = this.#queue[this.#queue.length - 1];
    const coalesce = this.#options.coalesce;
    const joinable = last && (last.joined?.length ?? 1) < MAX_JOINED_PIECES;
    if (joinable && coalesce?.joins(last.joined?.at(-1) ?? last.event, event)) {
      (last.joined ??= [last.event]).push(event);
      last.json = null;
      if (urgent) this.#startFlush();
      return { seq: last.seq, at: last.at, event };
    }
    const queued: Queued<E> = { seq: this.#head + 1, at: this.#now(), event, json: null, joined: null };
    try {
      queued.json = jsonOf(event);
    } catch (error) {
      throw new InvalidInputError("event", `cannot be serialized: ${String(error)}`);
    }
    this.#head = queued.seq;
    this.#queue.push(queued);
    // An urgent record skips the group window, not the current macrotask: what the same
    // synchronous step and its microtasks append (a command's work and then its receipt) lands
    // in the same batch, so a crash never keeps one without the other.
    if (urgent) this.#startFlush();
    else if (!this.#flushing && this.#timer === undefined) this.#scheduleFlush();
    // While a flush is in flight its loop picks the record up right after: appends that
    // arrive during an fsync form the next group.
    return { seq: queued.seq, at: queued.at, event };
  }

  /** A record pieces joined: its event is their merge, from now on. */
  #jsonOfJoined(item: Queued<E>): string {
    if (item.joined) item.event = this.#options.coalesce!.merge(item.joined);
    item.joined = null;
    return jsonOf(item.event);
  }

  #now(): string {
    const ms = this.#options.now ? this.#options.now().getTime() : Date.now();
    if (ms !== this.#at.ms) this.#at = { ms, iso: new Date(ms).toISOString() };
    return this.#at.iso;
  }

  whenDurable(seq: number = this.#head): Promise<void> {
    if (!Number.isInteger(seq) || seq < 0 || seq > this.#head) {
      return Promise.reject(new InvalidInputError("seq", `must be an integer in 0..${this.#head}`));
    }
    if (seq <= this.#durableHead) return Promise.resolve();
    if (this.#failed) return Promise.reject(this.#failed.error);
    return new Promise((resolve, reject) => this.#waiters.push({ seq, resolve, reject }));
  }

  onCommit(listener: (records: readonly LogRecord<E>[]) => void): () => void {
    return this.#readers.onCommit(listener);
  }

  /**
   * Delivers every durable record with seq > afterSeq exactly once, in order, then live
   * commits. Delivery is always asynchronous (never inside this call).
   */
  subscribe(
    afterSeq: number,
    listener: (record: LogRecord<E>) => void,
    filter?: (record: LogRecord<E>) => boolean,
  ): () => void {
    if (this.#closing) throw new ClosedError("event log");
    if (!Number.isInteger(afterSeq) || afterSeq < 0 || afterSeq > this.#head) {
      throw new InvalidInputError("afterSeq", `must be an integer in 0..${this.#head}`);
    }
    return this.#readers.subscribe(afterSeq, this.#durableHead, listener, filter);
  }

  /** Streams durable records with seq > afterSeq, up to durableHead as of this call. */
  readAll(afterSeq = 0): AsyncGenerator<LogRecord<E>> {
    return this.#read(afterSeq, this.#durableHead);
  }

  /**
   * Reads that reach records up to `seq` (catch-up, `readAll`) wait for `verdict` from now on, and fail with the error
   * it gives: the records before a projection snapshot are read only once they are proven to be those it was taken of.
   */
  holdReads(seq: number, verdict: Promise<Error | null>): void {
    this.#held = { seq, verdict };
  }

  async *#read(afterSeq: number, upTo: number): AsyncGenerator<LogRecord<E>> {
    const held = this.#held;
    if (held && afterSeq < held.seq) {
      const error = await held.verdict;
      if (error) throw error;
    }
    yield* readRecords<LogRecord<E>>(this.#file, this.#index, afterSeq, upTo);
  }

  /** Commits what is queued and closes the file. Rejects if the log is in a failed state. */
  close(): Promise<void> {
    this.#closed ??= this.#close();
    return this.#closed;
  }

  async #close(): Promise<void> {
    this.#closing = true;
    this.#startFlush();
    await this.#flushing;
    this.#readers.close();
    for (const waiter of this.#waiters.splice(0)) waiter.reject(new ClosedError("event log"));
    await this.#fh.close();
    if (this.#failed) throw this.#failed.error;
  }

  /**
   * A commit from idle: once the window since the last commit ended has passed (a commit in flight is followed at once
   * by the next, for what came meanwhile); a record after a longer quiet spell waits for no timer, only for the end of
   * this macrotask, as every commit does.
   */
  #scheduleFlush(): void {
    const wait = this.#lastCommitEnd + this.#windowMs - performance.now();
    if (wait <= 0) this.#startFlush();
    else this.#timer = setTimeout(() => this.#startFlush(), wait);
  }

  #startFlush(): void {
    clearTimeout(this.#timer);
    this.#timer = undefined;
    // With nothing to write the loop would finish synchronously, before the assignment.
    if (this.#flushing || this.#queue.length === 0 || this.#failed) return;
    this.#flushing = this.#flushLoop();
  }

  /** The only writer: one batch in flight at a time, each batch is one write + one fdatasync. */
  async #flushLoop(): Promise<void> {
    while (this.#queue.length > 0 && !this.#failed) {
      // Let producers add to the batch: without this, fast storage shrinks groups to a record or two.
      await new Promise(setImmediate);
      const batch = this.#queue;
      this.#queue = [];
      for (const item of batch) item.json ??= this.#jsonOfJoined(item);
      const { data, ends } = this.#lines.write(batch);
      try {
        // write() may be short in theory; loop so a batch never lands half-written.
        for (let done = 0; done < data.length;) {
          done += (await this.#fh.write(data, done)).bytesWritten;
        }
        await this.#fh.datasync();
      } catch (error) {
        this.#fail(StoreFailedError.from(error, `writing ${this.#file}`));
        break;
      }
      this.#chain.update(data);
      const startOffset = this.#endOffset;
      for (let i = 0; i < batch.length; i++) {
        if ((batch[i]!.seq - 1) % INDEX_STRIDE === 0) this.#index.push(startOffset + (i === 0 ? 0 : ends[i - 1]!));
      }
      this.#endOffset = startOffset + data.length;
      this.#lastCommitEnd = performance.now();
      const records: readonly LogRecord<E>[] = Object.freeze(this.#readers.any ? batch.map(committed) : []);
      this.#durableHead = batch[batch.length - 1]?.seq ?? this.#durableHead;
      const ready = this.#waiters.filter((w) => w.seq <= this.#durableHead);
      this.#waiters = this.#waiters.filter((w) => w.seq > this.#durableHead);
      for (const waiter of ready) waiter.resolve();
      if (this.#chainWaiters.length > 0) this.#chainCommitted();
      this.#readers.committed(records);
    }
    // Cleared in the same tick as the final empty-queue check (no await in between), so an
    // append can never land in a gap where this loop misses it and no new flush is scheduled.
    this.#flushing = undefined;
  }

  /** A batch was committed: the chain waiters of its last record have their point (a waiter is never passed by). */
  #chainCommitted(): void {
    const point = this.#chain.point();
    for (const waiter of this.#chainWaiters.splice(0)) {
      if (waiter.seq === this.#durableHead) waiter.resolve(point);
      else if (waiter.seq < this.#durableHead) waiter.reject(new InvalidInputError("seq", "was passed by a commit"));
      else this.#chainWaiters.push(waiter);
    }
  }

  /**
   * Stops the log: its owner found it corrupt (a projection snapshot's background check), so nothing more may be
   * written to it. What is queued is dropped, like after a failed write; every waiter is rejected with `error`.
   */
  fail(error: TillerError): void {
    if (!this.#failed) this.#fail(error);
  }

  /** After a failed write/fsync the file's tail is unknown; refuse everything from now on.
   * (A torn tail left behind is cut by the next open.) */
  #fail(error: TillerError): void {
    this.#failed = { error };
    clearTimeout(this.#timer);
    this.#queue = [];
    for (const waiter of [...this.#waiters.splice(0), ...this.#chainWaiters.splice(0)]) waiter.reject(error);
    guarded(() => this.#options.onFailed?.(error), this.#options.onListenerError);
  }

  /** The failure that stopped the log, if any. */
  get failure(): unknown {
    return this.#failed?.error;
  }
}

/** What readers get of a written record: the record, frozen all the way down (they share it). */
function committed<E>({ seq, at, event }: Queued<E>): LogRecord<E> {
  return Object.freeze({ seq, at, event: deepFreeze(event) });
}
