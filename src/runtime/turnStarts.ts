/**
 * Which attempts' provider turns are known to run (the provider announced the turn, or sent
 * anything else for it), and which ended: the interrupt path waits on these, never on time
 * alone. Every wait also ends when the turn ends or the runtime closes.
 */
export type TurnWait = "started" | "ended" | "timeout";

export class TurnStarts {
  readonly #started = new Set<string>();
  /** Turns that ended (until their run is forgotten): a wait that comes late ends at once. */
  readonly #ended = new Set<string>();
  readonly #waiters = new Map<string, Set<(outcome: TurnWait) => void>>();
  #closed = false;

  /** The provider said something about this attempt's turn: it runs. */
  sawEvent(attemptId: string): void {
    if (this.#started.has(attemptId)) return;
    this.#started.add(attemptId);
    this.#notify(attemptId, "started");
  }

  /** The attempt's turn ended (its completion barrier ran): nothing is left to wait for. */
  ended(attemptId: string): void {
    this.#ended.add(attemptId);
    this.#notify(attemptId, "ended");
  }

  forget(attemptId: string): void {
    this.#started.delete(attemptId);
    this.#ended.delete(attemptId);
    this.#notify(attemptId, "ended");
  }

  /** The runtime is closing: every wait ends now, and any later one at once. */
  close(): void {
    this.#closed = true;
    for (const attemptId of [...this.#waiters.keys()]) this.#notify(attemptId, "ended");
  }

  /** Resolves once the turn runs, ends, or `limitMs` passed (`null`: no limit). */
  untilStarted(attemptId: string, limitMs: number | null): Promise<TurnWait> {
    if (this.#closed || this.#ended.has(attemptId)) return Promise.resolve("ended");
    if (this.#started.has(attemptId)) return Promise.resolve("started");
    return this.#wait(attemptId, limitMs, (outcome) => outcome);
  }

  /** Resolves after `ms`, or earlier when the turn ends: "ended" then. */
  pause(attemptId: string, ms: number): Promise<TurnWait> {
    if (this.#closed || this.#ended.has(attemptId)) return Promise.resolve("ended");
    return this.#wait(attemptId, ms, (outcome) => (outcome === "started" ? null : outcome));
  }

  #wait(attemptId: string, ms: number | null, accept: (outcome: TurnWait) => TurnWait | null): Promise<TurnWait> {
    return new Promise((resolve) => {
      const waiters = this.#waiters.get(attemptId) ?? new Set();
      this.#waiters.set(attemptId, waiters);
      const done = (outcome: TurnWait) => {
        const accepted = accept(outcome);
        if (accepted === null) return false;
        clearTimeout(timer);
        waiters.delete(waiter);
        if (waiters.size === 0 && this.#waiters.get(attemptId) === waiters) this.#waiters.delete(attemptId);
        resolve(accepted);
        return true;
      };
      const waiter = (outcome: TurnWait) => void done(outcome);
      const timer = ms === null ? undefined : setTimeout(() => done("timeout"), ms);
      waiters.add(waiter);
    });
  }

  #notify(attemptId: string, outcome: TurnWait): void {
    for (const waiter of [...(this.#waiters.get(attemptId) ?? [])]) waiter(outcome);
  }
}
