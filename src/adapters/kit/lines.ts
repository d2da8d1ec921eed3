import type { Readable } from "node:stream";

/**
 * Newline-delimited input from a host, split without ever building a string longer than a
 * cap. Node's readline concatenates an unterminated line into one string until V8's string
 * limit (about 512 MiB) throws `RangeError: Invalid string length` inside a stream callback:
 * an uncaught exception in the embedding process. Here the pending line is kept as Buffer
 * slices and decoded only once its newline arrives and it is within the cap.
 *
 * A line over the cap is not decoded: its slices are dropped at once (a short head is kept
 * as a sample), `onOverflow` hears it once, and everything up to the next newline is
 * discarded; splitting then resumes. So the splitter alone stays bounded whatever it is fed;
 * what an overflow means is the caller's decision (the host channels treat it as a broken
 * host and stop reading that stream; see channel.ts).
 */

/** Default caps of what a host may send, in bytes (see README, "Host processes"). */
export const HOST_LINE_LIMITS = {
  /** One protocol frame: a stdout line or a WebSocket message. */
  frameBytes: 16 * 1024 * 1024,
  /** One diagnostic line (stderr; a WebSocket host's stdout after it printed its port). */
  stderrLineBytes: 1024 * 1024,
} as const;

/** The largest cap accepted: well under V8's string limit even for one-byte characters. */
export const MAX_LINE_LIMIT_BYTES = 256 * 1024 * 1024;

/** How many bytes of an over-long line are kept to show what it was. */
const SAMPLE_BYTES = 256;

const NEWLINE = 0x0a;
const CARRIAGE_RETURN = 0x0d;

export interface LineOverflow {
  /** The cap that was exceeded. */
  limitBytes: number;
  /** The line's first bytes (at most 256), decoded: what the host was sending. */
  head: string;
}

export interface LineSplitterOptions {
  maxLineBytes: number;
  onLine: (line: string) => void;
  onOverflow: (overflow: LineOverflow) => void;
}

export function checkLineLimit(name: string, bytes: number): number {
  if (!Number.isSafeInteger(bytes) || bytes < 1 || bytes > MAX_LINE_LIMIT_BYTES) {
    throw new RangeError(`${name} must be an integer from 1 to ${MAX_LINE_LIMIT_BYTES} bytes (got ${String(bytes)})`);
  }
  return bytes;
}

export class BoundedLineSplitter {
  readonly #max: number;
  readonly #onLine: (line: string) => void;
  readonly #onOverflow: (overflow: LineOverflow) => void;
  #parts: Buffer[] = [];
  #size = 0;
  /** Over the cap: bytes are dropped until the next newline. */
  #discarding = false;
  #overflows = 0;

  constructor(options: LineSplitterOptions) {
    this.#max = checkLineLimit("maxLineBytes", options.maxLineBytes);
    this.#onLine = options.onLine;
    this.#onOverflow = options.onOverflow;
  }

  /** Lines that went over the cap so far. */
  get overflows(): number {
    return this.#overflows;
  }

  /** Bytes held for the unfinished line (never more than the cap). */
  get pendingBytes(): number {
    return this.#size;
  }

  write(chunk: Buffer): void {
    // The first newline ends the line held from earlier chunks, if any.
    let start = this.#size > 0 || this.#discarding ? this.#segment(chunk, 0) : 0;
    // The whole lines of a read come out of one decode when together they are within the cap (each line then is).
    const last = chunk.lastIndexOf(NEWLINE);
    if (start !== -1 && last >= start && last - start <= this.#max) {
      this.#emitAll(chunk.toString("utf8", start, last));
      start = last + 1;
    }
    while (start !== -1 && start < chunk.length) start = this.#segment(chunk, start);
  }

  /** Takes `chunk` from `start` up to its next newline, which ends the line; where the next begins (-1: no newline). */
  #segment(chunk: Buffer, start: number): number {
    const newline = chunk.indexOf(NEWLINE, start);
    if (!this.#discarding) this.#take(chunk, start, newline === -1 ? chunk.length : newline);
    if (newline === -1) return -1;
    if (this.#discarding) this.#discarding = false;
    else this.#emit();
    return newline + 1;
  }

  /** The input ended: an unterminated last line within the cap is still a line (as readline does). */
  end(): void {
    if (!this.#discarding && this.#size > 0) this.#emit();
    this.#discarding = false;
    this.#parts = [];
    this.#size = 0;
  }

  #take(chunk: Buffer, start: number, end: number): void {
    const length = end - start;
    if (length === 0) return;
    if (this.#size + length <= this.#max) {
      this.#parts.push(chunk.subarray(start, end));
      this.#size += length;
      return;
    }
    const head = Buffer.concat(
      [...this.#parts, chunk.subarray(start, end)],
      Math.min(SAMPLE_BYTES, this.#size + length),
    );
    this.#parts = [];
    this.#size = 0;
    this.#discarding = true;
    this.#overflows += 1;
    this.#onOverflow({ limitBytes: this.#max, head: head.toString("utf8") });
  }

  /** Each line of `text` (newline-separated, no newline after the last), its carriage return cut. */
  #emitAll(text: string): void {
    for (let from = 0; ;) {
      const newline = text.indexOf("\n", from);
      const end = newline === -1 ? text.length : newline;
      this.#onLine(
        end > from && text.charCodeAt(end - 1) === CARRIAGE_RETURN ? text.slice(from, end - 1) : text.slice(from, end),
      );
      if (newline === -1) return;
      from = newline + 1;
    }
  }

  #emit(): void {
    let line = this.#parts.length === 1 ? this.#parts[0]! : Buffer.concat(this.#parts, this.#size);
    this.#parts = [];
    this.#size = 0;
    if (line.length > 0 && line[line.length - 1] === CARRIAGE_RETURN) line = line.subarray(0, line.length - 1);
    this.#onLine(line.toString("utf8"));
  }
}

export interface LineReader {
  /** Stops splitting: what the stream still sends is read and thrown away (the writer never blocks on us). */
  stop(): void;
}

/**
 * Splits a readable stream into bounded lines. On an overflow the reader stops by default
 * (`onOverflow` returning "continue" keeps splitting after the next newline). Stream errors
 * are absorbed: an unheard 'error' would be an uncaught exception in the embedding process.
 */
export function readLines(
  stream: Readable,
  options: {
    maxLineBytes: number;
    onLine: (line: string) => void;
    onOverflow: (overflow: LineOverflow) => "stop" | "continue" | void;
  },
): LineReader {
  let stopped = false;
  const stop = () => {
    if (stopped) return;
    stopped = true;
    stream.removeListener("data", onData);
    stream.removeListener("end", onEnd);
    stream.resume(); // no data listener left: the rest is drained into the void
  };
  const splitter = new BoundedLineSplitter({
    maxLineBytes: options.maxLineBytes,
    onLine: (line) => {
      if (!stopped) options.onLine(line);
    },
    onOverflow: (overflow) => {
      if (stopped) return;
      if (options.onOverflow(overflow) !== "continue") stop();
    },
  });
  const onData = (chunk: Buffer | string) => {
    if (stopped) return;
    splitter.write(typeof chunk === "string" ? Buffer.from(chunk) : chunk);
    // An overflow may have stopped the reader in that write: then the rest drains into the void, never paused.
    if (stopped) return;
    // One read's frames per turn of the event loop: left flowing, a stream that always has more hands the process up
    // to 32 reads (2 MiB of frames, tens of milliseconds of work) before timers and immediates run again, and the
    // runtime's commits, subscribers and replies wait behind them.
    if (stream.readableFlowing && !stream.isPaused()) {
      stream.pause();
      setImmediate(() => {
        if (!stopped) stream.resume();
      });
    }
  };
  const onEnd = () => splitter.end();
  stream.on("data", onData);
  stream.on("end", onEnd);
  stream.on("error", () => undefined);
  return { stop };
}
