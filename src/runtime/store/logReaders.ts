/**
 * Who reads an event log's commits (eventLog.ts): listeners told of every committed batch, and subscribers each given
 * every durable record after their seq exactly once, in order, read from the file first and then live. Reader code
 * never breaks the log's writer: what it throws goes to `onError`.
 */

export interface LogRecord<E> {
  seq: number;
  at: string;
  event: E;
}

type Subscriber<E> = {
  delivered: number; // highest seq handed to this subscriber: the dedupe key
  live: boolean;
  active: boolean;
  pending: LogRecord<E>[]; // commits that arrive while catching up
  listener: (record: LogRecord<E>) => void;
  filter: ((record: LogRecord<E>) => boolean) | undefined;
};

/** Runs `fn`; what it throws goes to `onError` (and what that throws, nowhere). */
export function guarded(fn: () => void, onError: ((error: unknown) => void) | undefined): void {
  try {
    fn();
  } catch (error) {
    try {
      onError?.(error);
    } catch {
      // a failing error reporter has nowhere left to report to
    }
  }
}

export class LogReaders<E> {
  readonly #listeners = new Set<(records: readonly LogRecord<E>[]) => void>();
  readonly #subscribers = new Set<Subscriber<E>>();

  constructor(
    /** The durable records after `afterSeq` up to `upTo`, from the file. */
    private readonly read: (afterSeq: number, upTo: number) => AsyncIterable<LogRecord<E>>,
    private readonly onError: ((error: unknown) => void) | undefined,
  ) {}

  /** Whether anyone reads commits at all (when not, the log makes no records for them). */
  get any(): boolean {
    return this.#listeners.size + this.#subscribers.size > 0;
  }

  onCommit(listener: (records: readonly LogRecord<E>[]) => void): () => void {
    this.#listeners.add(listener);
    return () => void this.#listeners.delete(listener);
  }

  /** Delivers the records after `afterSeq` (those up to `durableHead` from the file), then live commits. */
  subscribe(
    afterSeq: number,
    durableHead: number,
    listener: (record: LogRecord<E>) => void,
    filter?: (record: LogRecord<E>) => boolean,
  ): () => void {
    const sub: Subscriber<E> = { delivered: afterSeq, live: false, active: true, pending: [], listener, filter };
    // Registered before catch-up starts: commits after this point are buffered in `pending`,
    // everything up to `durableHead` is read from the file, and `delivered` dedupes the overlap.
    this.#subscribers.add(sub);
    void this.#catchUp(sub, durableHead);
    return () => {
      sub.active = false;
      this.#subscribers.delete(sub);
    };
  }

  /** A batch became durable: every listener and subscriber hears of it. */
  committed(records: readonly LogRecord<E>[]): void {
    for (const listener of this.#listeners) guarded(() => listener(records), this.onError);
    for (const sub of this.#subscribers) {
      if (sub.live) for (const record of records) this.#deliver(sub, record);
      else sub.pending.push(...records);
    }
  }

  /** No one hears of anything any more. */
  close(): void {
    for (const sub of this.#subscribers) sub.active = false;
    this.#subscribers.clear();
    this.#listeners.clear();
  }

  async #catchUp(sub: Subscriber<E>, target: number): Promise<void> {
    await Promise.resolve();
    try {
      for await (const record of this.read(sub.delivered, target)) {
        if (!sub.active) return;
        this.#deliver(sub, record);
      }
    } catch (error) {
      sub.active = false;
      this.#subscribers.delete(sub);
      guarded(() => {
        throw error;
      }, this.onError);
      return;
    }
    // Synchronous from here on, so no commit can interleave with the switch to live.
    for (const record of sub.pending) this.#deliver(sub, record);
    sub.pending = [];
    sub.live = true;
  }

  #deliver(sub: Subscriber<E>, record: LogRecord<E>): void {
    if (!sub.active || record.seq <= sub.delivered) return;
    sub.delivered = record.seq;
    guarded(() => {
      if (!sub.filter || sub.filter(record)) sub.listener(record);
    }, this.onError);
  }
}
