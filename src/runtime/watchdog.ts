/**
 * The turn watchdog: a provider turn that says nothing for `silenceMs` is asked about (the
 * runtime's `onSilent` asks the adapter whether the turn is alive) instead of staying
 * "running" forever. Every provider event of the attempt re-arms it; one timer per watched
 * attempt, fired only after the full silence has passed since the last event.
 */
export class TurnWatchdog {
  readonly #watched = new Map<string, { last: number; timer: NodeJS.Timeout | undefined }>();
  #closed = false;

  constructor(
    private readonly silenceMs: number | null,
    private readonly onSilent: (attemptId: string) => void,
    private readonly now: () => number = () => performance.now(),
  ) {}

  /** Starts (or restarts) watching an attempt's turn. */
  watch(attemptId: string): void {
    if (this.silenceMs === null || this.#closed) return;
    this.stop(attemptId);
    const entry = { last: this.now(), timer: undefined as NodeJS.Timeout | undefined };
    this.#watched.set(attemptId, entry);
    this.#arm(attemptId, entry, this.silenceMs);
  }

  /** The provider said something for this attempt. */
  touch(attemptId: string): void {
    const entry = this.#watched.get(attemptId);
    if (entry) entry.last = this.now();
  }

  stop(attemptId: string): void {
    clearTimeout(this.#watched.get(attemptId)?.timer);
    this.#watched.delete(attemptId);
  }

  close(): void {
    this.#closed = true;
    for (const attemptId of [...this.#watched.keys()]) this.stop(attemptId);
  }

  #arm(attemptId: string, entry: { last: number; timer: NodeJS.Timeout | undefined }, ms: number): void {
    entry.timer = setTimeout(
      () => {
        if (this.#watched.get(attemptId) !== entry) return;
        const quiet = this.now() - entry.last;
        if (quiet < this.silenceMs!) return this.#arm(attemptId, entry, this.silenceMs! - quiet);
        entry.timer = undefined;
        this.onSilent(attemptId);
      },
      Math.max(1, ms),
    );
    entry.timer.unref();
  }
}

/** `work()`, or a rejection once `ms` passed without its answer; the timer never outlives the race. */
export async function withinLimit<T>(ms: number, work: () => Promise<T>): Promise<T> {
  let timer: NodeJS.Timeout | undefined;
  const limit = new Promise<never>(
    (_, reject) => (timer = setTimeout(() => reject(new Error(`no answer within ${ms} ms`)), ms)),
  );
  try {
    return await Promise.race([work(), limit]);
  } finally {
    clearTimeout(timer);
  }
}
