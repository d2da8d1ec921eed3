import { InvalidInputError } from "../../../domain/errors.js";

/**
 * Waiting inside a scripted turn. Every wait gives way to an interrupt (it rejects with
 * TurnInterrupted), so an interrupt reaches a turn whatever step its script is on.
 */

export class TurnInterrupted extends Error {}

/**
 * How a scripted provider streams a text: `chunksPerWake` chunks each time it wakes, one wake every `chunkDelayMs`
 * (0: it only gives way to the event loop between two wakes).
 */
export interface StreamPace {
  chunkDelayMs: number;
  chunksPerWake: number;
}

/** The pace the options ask for (by default a chunk per wake, no delay), checked. */
export function streamPace(options: { chunkDelayMs?: number; chunksPerWake?: number }): StreamPace {
  const { chunkDelayMs = 0, chunksPerWake = 1 } = options;
  if (!Number.isFinite(chunkDelayMs) || chunkDelayMs < 0)
    throw new InvalidInputError("chunkDelayMs", "must be a non-negative number");
  if (!Number.isSafeInteger(chunksPerWake) || chunksPerWake < 1)
    throw new InvalidInputError("chunksPerWake", "must be a positive integer");
  return { chunkDelayMs, chunksPerWake };
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
 * The pauses between streamed chunks of one turn: one abort listener for the whole turn ends the pauses in progress
 * when it is interrupted, where `wait` adds and removes a listener each time (with many turns streaming at once, that
 * is a good part of what a chunk costs).
 */
export class ChunkPauses {
  readonly #pending = new Set<{ timer: NodeJS.Timeout; reject: (error: Error) => void }>();
  /** The signal's `aborted`, kept here: asked before every chunk, where the signal's getter validates its receiver. */
  #interrupted: boolean;

  constructor(private readonly signal: AbortSignal) {
    this.#interrupted = signal.aborted;
    signal.addEventListener(
      "abort",
      () => {
        this.#interrupted = true;
        for (const pause of this.#pending) {
          clearTimeout(pause.timer);
          pause.reject(new TurnInterrupted());
        }
        this.#pending.clear();
      },
      { once: true },
    );
  }

  /** Fails if the turn was interrupted (`checkAborted` of the turn's signal). */
  checkInterrupted(): void {
    if (this.#interrupted) throw new TurnInterrupted();
  }

  /**
   * Waits for the next chunk's slot after `slot` (a `performance.now()` time): one `period` later, or as many whole
   * periods later as it takes to be ahead of now. A stream keeps its own clock, as a provider in its own process does:
   * a stall of the process it streams to makes it miss slots, never shifts its later ones (pauses of a fixed length
   * after each chunk would: the streams of many turns delayed by one stall would stay in step for ever after, all
   * their chunks landing in the same instant). Returns the slot it waited for.
   */
  async next(slot: number, period: number): Promise<number> {
    if (period === 0) {
      await yieldTurn(this.signal);
      return slot;
    }
    const now = performance.now();
    let next = slot + period;
    if (next < now) next += Math.ceil((now - next) / period) * period;
    await this.wait(Math.max(1, Math.round(next - now)));
    return next;
  }

  /** Waits `ms` unless the turn is interrupted first (0: gives way to the event loop once). */
  wait(ms: number): Promise<void> {
    if (ms === 0) return yieldTurn(this.signal);
    if (this.#interrupted) return Promise.reject(new TurnInterrupted());
    return new Promise((resolve, reject) => {
      const pause = {
        timer: setTimeout(() => {
          this.#pending.delete(pause);
          resolve();
        }, ms),
        reject,
      };
      this.#pending.add(pause);
    });
  }
}

/**
 * Gives way to the event loop once (what a streaming provider does between two chunks), then fails if the turn was
 * interrupted meanwhile. No abort listener: nothing is left to cancel, and this runs once per streamed chunk.
 */
async function yieldTurn(signal: AbortSignal): Promise<void> {
  await new Promise(setImmediate);
  checkAborted(signal);
}
