import { InvalidInputError } from "../../../domain/errors.js";

/**
 * Waiting inside a scripted turn. Every wait gives way to an interrupt (it rejects with
 * TurnInterrupted), so an interrupt reaches a turn whatever step its script is on.
 */

export class TurnInterrupted extends Error {}

/**
 * How a scripted provider streams a text: `chunksPerWake` chunks each time it wakes, one wake every `chunkDelayMs`
 * (0: it only gives way to the event loop between two wakes), its wakes kept by `clock`.
 */
export interface StreamPace {
  chunkDelayMs: number;
  chunksPerWake: number;
  clock: StreamClock;
}

/** The pace the options ask for (by default a chunk per wake, no delay), checked, with a clock of its own. */
export function streamPace(options: { chunkDelayMs?: number; chunksPerWake?: number }): StreamPace {
  const { chunkDelayMs = 0, chunksPerWake = 1 } = options;
  if (!Number.isFinite(chunkDelayMs) || chunkDelayMs < 0)
    throw new InvalidInputError("chunkDelayMs", "must be a non-negative number");
  if (!Number.isSafeInteger(chunksPerWake) || chunksPerWake < 1)
    throw new InvalidInputError("chunksPerWake", "must be a positive integer");
  return { chunkDelayMs, chunksPerWake, clock: new StreamClock() };
}

export function checkAborted(signal: AbortSignal): void {
  if (signal.aborted) throw new TurnInterrupted();
}

/** Waits for `opened` unless the turn is interrupted first. */
export function until(signal: AbortSignal, opened: Promise<void>): Promise<void> {
  return new Promise((resolve, reject) => {
    if (signal.aborted) return reject(new TurnInterrupted());
    const onAbort = () => reject(new TurnInterrupted());
    signal.addEventListener("abort", onAbort, { once: true });
    void opened.then(() => {
      signal.removeEventListener("abort", onAbort);
      resolve();
    });
  });
}

/** Waits `ms` (null: forever) unless the turn is interrupted first. */
export function wait(signal: AbortSignal, ms: number | null): Promise<void> {
  if (ms === 0) return yieldTurn(signal);
  return new Promise((resolve, reject) => {
    if (signal.aborted) return reject(new TurnInterrupted());
    const done = () => {
      signal.removeEventListener("abort", onAbort);
      resolve();
    };
    const timer = ms === null ? null : setTimeout(done, ms);
    const onAbort = () => {
      if (timer !== null) clearTimeout(timer);
      reject(new TurnInterrupted());
    };
    signal.addEventListener("abort", onAbort, { once: true });
  });
}

/**
 * The one timer of a scripted provider's streams: the wakes it is asked for, by the millisecond they are due, and a
 * single `setTimeout` for the earliest. A thousand streams pacing their chunks this way cost a timer between them,
 * not a timer, a promise and a closure each per chunk (what a provider in its own process costs the runtime's process:
 * nothing).
 */
export class StreamClock {
  /** Wakes by the millisecond they are due (`Math.ceil` of their `performance.now()` time), each in the order asked. */
  readonly #due = new Map<number, (() => void)[]>();
  /** The keys of `#due`, ascending. */
  #times: number[] = [];
  /** Armed for the first of `#times` whenever there is one. */
  #timer: NodeJS.Timeout | undefined;

  /** Calls `wake` once `performance.now()` reaches `time` (in a macrotask of its own, never inside this call). */
  at(time: number, wake: () => void): void {
    const key = Math.ceil(time);
    const wakes = this.#due.get(key);
    if (wakes) {
      wakes.push(wake);
      return;
    }
    this.#due.set(key, [wake]);
    const times = this.#times;
    let i = times.length;
    while (i > 0 && times[i - 1]! > key) i--;
    times.splice(i, 0, key);
    if (i === 0) this.#arm(key);
  }

  #arm(key: number): void {
    clearTimeout(this.#timer);
    this.#timer = setTimeout(() => this.#fire(), Math.max(1, key - performance.now()));
  }

  #fire(): void {
    this.#timer = undefined;
    // A timer may fire a fraction of a millisecond before its time (Node counts whole milliseconds): what falls due
    // within the coming millisecond wakes now rather than after one more timer.
    const now = performance.now() + 1;
    let ripe = 0;
    while (ripe < this.#times.length && this.#times[ripe]! <= now) ripe++;
    const keys = this.#times.splice(0, ripe);
    if (this.#times.length > 0) this.#arm(this.#times[0]!);
    for (const key of keys) {
      const wakes = this.#due.get(key)!;
      this.#due.delete(key);
      for (const wake of wakes) wake();
    }
  }
}

/**
 * How one turn's texts stream: its chunks, `chunksPerWake` at a time, each wake on the slot after the last one
 * (`nextSlot`). One abort listener for the whole turn ends a stream in progress at once when the turn is interrupted.
 */
export class ChunkPauses {
  /** The streams in progress, by how each one fails. */
  readonly #streaming = new Set<(error: Error) => void>();
  /** The signal's `aborted`, kept here: asked before every chunk, where the signal's getter validates its receiver. */
  #interrupted: boolean;

  constructor(signal: AbortSignal) {
    this.#interrupted = signal.aborted;
    signal.addEventListener(
      "abort",
      () => {
        this.#interrupted = true;
        for (const fail of this.#streaming) fail(new TurnInterrupted());
      },
      { once: true },
    );
  }

  /** Fails if the turn was interrupted (`checkAborted` of the turn's signal). */
  checkInterrupted(): void {
    if (this.#interrupted) throw new TurnInterrupted();
  }

  /**
   * Emits chunks 0..count-1 (`emit(i)`), `pace.chunksPerWake` of them per wake, and waits for the next wake after
   * each full wake (after the last chunk too, when it fills its wake): on the clock's next slot (`nextSlot`), or
   * after an immediate with no delay. Rejects with TurnInterrupted once the turn is
   * interrupted, and with what `emit` throws.
   */
  stream(count: number, pace: StreamPace, emit: (chunk: number) => void): Promise<void> {
    const { chunkDelayMs, chunksPerWake, clock } = pace;
    return new Promise((resolve, reject) => {
      let settled = false;
      const fail = (error: Error) => {
        if (settled) return;
        settled = true;
        this.#streaming.delete(fail);
        reject(error);
      };
      let chunk = 0;
      let slot = performance.now();
      const wake = () => {
        if (settled) return;
        try {
          for (let inWake = 0; chunk < count;) {
            this.checkInterrupted();
            emit(chunk++);
            if (++inWake < chunksPerWake) continue;
            if (chunkDelayMs === 0) setImmediate(wake);
            else clock.at((slot = nextSlot(slot, chunkDelayMs)), wake);
            return;
          }
        } catch (error) {
          return fail(error instanceof Error ? error : new Error(String(error)));
        }
        settled = true;
        this.#streaming.delete(fail);
        resolve();
      };
      this.#streaming.add(fail);
      wake();
    });
  }
}

/**
 * The slot after `slot` (a `performance.now()` time): one `period` later, or as many whole periods later as it takes
 * to be ahead of now. A stream keeps its own clock, as a provider in its own process does: a stall of the process it
 * streams to makes it miss slots, never shifts its later ones (pauses of a fixed length after each chunk would: the
 * streams of many turns delayed by one stall would stay in step for ever after, all their chunks landing in the same
 * instant).
 */
export function nextSlot(slot: number, period: number): number {
  const now = performance.now();
  let after = slot + period;
  if (after < now) after += Math.ceil((now - after) / period) * period;
  return after;
}

/**
 * Gives way to the event loop once (what a streaming provider does between two chunks), then fails if the turn was
 * interrupted meanwhile. No abort listener: nothing is left to cancel, and this runs once per streamed chunk.
 */
async function yieldTurn(signal: AbortSignal): Promise<void> {
  await new Promise(setImmediate);
  checkAborted(signal);
}
