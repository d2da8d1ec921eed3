import type { StoreCorruptError } from "../../domain/errors.js";
import type { DomainEvent } from "../../domain/events.js";
import { FOLD_VERSION, type Projections } from "../projections.js";
import type { ChainPoint } from "../store/chain.js";
import type { EventLog } from "../store/eventLog.js";
import { encodeState } from "./state.js";
import { writeSnapshot, type VerifiedSnapshot } from "./file.js";
import { COMPACT_SLACK, removeTextFiles, TextSink, writeTexts } from "./texts.js";
import { type TextStore } from "./textStore.js";

/**
 * Takes projection snapshots (file.ts): in the background while the runtime runs, and a last one at close.
 *
 * Which state: the fold of exactly the records 1..H, with H durable before the snapshot is installed. The fold is
 * synchronous at append, so the state is taken (encoded, synchronously) at a moment when the projections' head is the
 * log's head H and nothing is queued in the log (`sealed`): then no record after H is in the state, and record H can
 * no longer change (a queued record can still take coalesced pieces; a record being written cannot). Then the log's
 * chained digest at H is asked for (`chainAt`), which it gives once H is durable: the file, which names it and this
 * data directory's identity, is written only then. A log that fails first rejects that wait, and no snapshot ahead of
 * the durable log is ever installed.
 *
 * When: after a commit, once `everyRecords` records have been appended since the last snapshot and the log grew by at
 * least what the last snapshot wrote (its body and the texts it appended: so the cost of snapshots stays a fraction
 * of the log's writes however big the state grows); one at a time; never in a commit's way (the commit has been
 * delivered when it is taken). A failure is told to `onError` and costs nothing else: the next open replays more of
 * the log.
 */
export interface SnapshotWriterOptions {
  dataDir: string;
  /** The data directory's identity (runtime.json): a snapshot names it. */
  directory: string;
  logFile: string;
  log: EventLog<DomainEvent>;
  views: Projections;
  /** The snapshot open found, and whether the projections were loaded from it (it is then the text file's owner). */
  opened?: { snapshot: VerifiedSnapshot | null; used: boolean };
  /** Records since the last snapshot before a background one is taken. Default 100,000. */
  everyRecords?: number;
  /** Told when writing a snapshot failed (a full disk...). The runtime goes on. */
  onError?: (error: unknown) => void;
  /** Told when a text file a snapshot relies on does not match its sums as it is read (texts.ts). */
  onCorrupt?: (error: StoreCorruptError) => void;
}

export class SnapshotWriter {
  readonly #everyRecords: number;
  #lastSeq: number;
  #lastBytes = 0;
  #logBytesAtLast: number;
  #writing: Promise<void> | undefined;
  #stopListening: () => void = () => undefined;
  #stopped = false;
  #scheduled = false;
  /** The text file the next snapshot appends to (null: a new generation), and what the last snapshot used of it. */
  #texts: { store: TextStore; live: number } | null;
  /** The text file of the loaded snapshot: its unread texts are read from it until the runtime closes. */
  readonly #loadedTexts: TextStore | null;
  /** Text files a newer generation replaced: closed with the runtime (a read of an object no snapshot held). */
  readonly #retired: TextStore[] = [];
  /** The seq of the snapshot the runtime was opened from (0: the log was replayed from its start). */
  readonly loadedSeq: number;
  /** The last failure, for tests and diagnostics. */
  lastError: unknown;

  readonly dataDir: string;
  readonly directory: string;
  readonly logFile: string;
  readonly log: EventLog<DomainEvent>;
  readonly views: Projections;

  private constructor(private readonly options: SnapshotWriterOptions) {
    ({ dataDir: this.dataDir, logFile: this.logFile, log: this.log, views: this.views } = options);
    this.directory = options.directory;
    this.#everyRecords = Math.max(1, options.everyRecords ?? 100_000);
    const { snapshot, used } = options.opened ?? { snapshot: null, used: false };
    if (snapshot && !used) snapshot.texts.store.close();
    const loaded = snapshot && used ? snapshot.texts : null;
    if (loaded) loaded.store.onCorrupt = options.onCorrupt;
    this.#texts = loaded && { store: loaded.store, live: loaded.live };
    this.#loadedTexts = loaded?.store ?? null;
    this.loadedSeq = this.#lastSeq = loaded ? snapshot!.start.seq : 0;
    this.#logBytesAtLast = this.#lastSeq > 0 ? this.log.durableBytes : 0;
  }

  /** A writer that snapshots in the background from now on. */
  static start(options: SnapshotWriterOptions): SnapshotWriter {
    const writer = new SnapshotWriter(options);
    writer.#stopListening = writer.log.onCommit(() => writer.#maybe());
    return writer;
  }

  #maybe(): void {
    if (this.#writing || this.#scheduled || this.#stopped) return;
    if (this.log.head - this.#lastSeq < this.#everyRecords) return;
    if (this.log.durableBytes - this.#logBytesAtLast < this.#lastBytes) return;
    // Out of the log's commit loop (its listeners run inside it): the next batch is not held up by the encoding.
    this.#scheduled = true;
    setImmediate(() => {
      this.#scheduled = false;
      if (!this.#writing && !this.#stopped) this.#take();
    });
  }

  /** Takes the state now if it is the fold of a sealed head; the write goes on in the background. */
  #take(): Promise<void> | undefined {
    const seq = this.views.head;
    if (seq === 0 || seq === this.#lastSeq || seq !== this.log.head || !this.log.sealed) return undefined;
    let body: string;
    const store = this.#texts && !this.#due(this.#texts) ? this.#texts.store : null;
    const texts = new TextSink(store, store?.cover.bytes ?? 0);
    try {
      body = encodeState(this.views.state(), texts);
    } catch (error) {
      this.#failed(error);
      return undefined;
    }
    const at = this.log.chainAt(seq); // now: the log is sealed at `seq`
    this.#writing = this.#write(seq, at, body, texts)
      .catch((error: unknown) => this.#failed(error))
      .finally(() => (this.#writing = undefined));
    return this.#writing;
  }

  /** Whether a text file is due for a new generation: it holds more than twice what the last snapshot used of it. */
  #due(texts: { store: TextStore; live: number }): boolean {
    return texts.store.cover.bytes > 2 * texts.live + COMPACT_SLACK;
  }

  async #write(seq: number, at: Promise<ChainPoint>, body: string, texts: TextSink): Promise<void> {
    const chain = await at;
    const range = await this.log.lineRange(seq);
    if (range.end !== chain.end) throw new Error(`log line ${seq} ends at ${range.end}, its chain at ${chain.end}`);
    const text = await writeTexts(this.dataDir, texts);
    const fresh = text.store !== this.#texts?.store;
    if (fresh) text.store.onCorrupt = this.options.onCorrupt;
    try {
      await writeSnapshot(this.dataDir, {
        fold: FOLD_VERSION,
        directory: this.directory,
        at: { seq, lineBytes: range.end - range.start, chain },
        index: this.log.indexUpTo(seq),
        body,
        text: { gen: text.gen, live: texts.live, cover: text.cover },
      });
    } catch (error) {
      if (fresh) text.store.close();
      throw error;
    }
    text.store.extend(text.cover);
    if (fresh) {
      await removeTextFiles(this.dataDir, text.gen);
      const old = this.#texts?.store;
      if (old && old !== this.#loadedTexts) this.#retired.push(old);
    }
    this.#texts = { store: text.store, live: texts.live };
    texts.release(text.store);
    this.#lastSeq = seq;
    this.#lastBytes = Buffer.byteLength(body) + (texts.end - texts.start);
    this.#logBytesAtLast = range.end;
  }

  #failed(error: unknown): void {
    this.lastError = error;
    try {
      this.options.onError?.(error);
    } catch {
      // a failing reporter has nowhere left to report to
    }
  }

  /**
   * A snapshot now, if the log is sealed at the projections' head (else none: false); resolves once it is written.
   * For tests and embedders' maintenance: the background ones need no call.
   */
  async snapshotNow(): Promise<boolean> {
    await this.#writing;
    const seq = this.views.head;
    const written = this.#take();
    if (!written) return false;
    await written;
    return this.#lastSeq === seq;
  }

  /**
   * The last snapshot, once the log is closed (everything committed and durable): waits for one in flight, then
   * writes one at the head unless it is already there. Never rejects.
   */
  async close(): Promise<void> {
    this.#stopped = true;
    this.#stopListening();
    await this.#writing;
    if (this.log.failure === undefined) await this.#take();
    this.#closeTexts();
  }

  #closeTexts(): void {
    this.#loadedTexts?.close();
    if (this.#texts?.store !== this.#loadedTexts) this.#texts?.store.close();
    for (const store of this.#retired.splice(0)) store.close();
  }

  /** Stops without a last snapshot (a runtime whose store failed). */
  async stop(): Promise<void> {
    this.#stopped = true;
    this.#stopListening();
    await this.#writing;
    this.#closeTexts();
  }
}
