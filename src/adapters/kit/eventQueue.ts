/**
 * A single-consumer async queue: producers push synchronously, the consumer iterates.
 * Adapters use it to expose `streamEvents()` in provider order.
 *
 * `merge` (optional) may fold a pushed item into the last one still queued (the consumer has not taken it: it is
 * busy, so the merge delays nothing); it returns the merged item, or undefined to queue the item as it is.
 */
export class EventQueue<T> implements AsyncIterable<T> {
  #items: T[] = [];
  readonly #merge: ((last: T, next: T) => T | undefined) | undefined;
  #waiting: ((result: IteratorResult<T>) => void) | null = null;
  #closed = false;
  #iterating = false;

  constructor(options: { merge?: (last: T, next: T) => T | undefined } = {}) {
    this.#merge = options.merge;
  }

  push(item: T): void {
    if (this.#closed) return;
    const waiting = this.#waiting;
    if (waiting) {
      this.#waiting = null;
      waiting({ value: item, done: false });
    } else {
      const items = this.#items;
      const merged = this.#merge && items.length > 0 ? this.#merge(items[items.length - 1]!, item) : undefined;
      if (merged === undefined) items.push(item);
      else items[items.length - 1] = merged;
    }
  }

  /** Ends iteration once the buffered items are consumed. */
  close(): void {
    this.#closed = true;
    const waiting = this.#waiting;
    if (waiting && this.#items.length === 0) {
      this.#waiting = null;
      waiting({ value: undefined, done: true });
    }
  }

  [Symbol.asyncIterator](): AsyncIterator<T> {
    if (this.#iterating) throw new Error("EventQueue supports one consumer");
    this.#iterating = true;
    return {
      next: () => {
        const item = this.#items.shift();
        if (item !== undefined) return Promise.resolve({ value: item, done: false });
        if (this.#closed) return Promise.resolve({ value: undefined, done: true });
        return new Promise((resolve) => (this.#waiting = resolve));
      },
      return: () => {
        this.close();
        this.#items = [];
        return Promise.resolve({ value: undefined, done: true });
      },
    };
  }
}
