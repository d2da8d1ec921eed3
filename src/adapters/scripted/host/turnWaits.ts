/**
 * Waiting inside a scripted turn. Every wait gives way to an interrupt (it rejects with
 * TurnInterrupted), so an interrupt reaches a turn whatever step its script is on.
 */

export class TurnInterrupted extends Error {}

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
 * Gives way to the event loop once (what a streaming provider does between two chunks), then fails if the turn was
 * interrupted meanwhile. No abort listener: nothing is left to cancel, and this runs once per streamed chunk.
 */
async function yieldTurn(signal: AbortSignal): Promise<void> {
  await new Promise(setImmediate);
  checkAborted(signal);
}
