/**
 * The request log and the promises tests wait on instead of sleeping. Kept apart from the
 * HTTP plumbing so the waiting rules (resolve, reject, close) live in one place.
 */
import type { SimulatorRequest } from "./types.js";

interface CountWaiter {
  count: number;
  resolve: (requests: SimulatorRequest[]) => void;
  reject: (error: Error) => void;
}

interface AbortWaiter {
  resolve: () => void;
  reject: (error: Error) => void;
}

export class RequestLog {
  readonly requests: SimulatorRequest[] = [];
  #countWaiters: CountWaiter[] = [];
  #abortWaiters = new Map<number, AbortWaiter[]>();
  /** Requests whose response was fully written: they can no longer be aborted. */
  #finished = new Set<number>();
  #closed = false;

  record(entry: Omit<SimulatorRequest, "id" | "aborted">): SimulatorRequest {
    const request: SimulatorRequest = { id: this.requests.length + 1, ...entry, aborted: false };
    this.requests.push(request);
    const ready = this.#countWaiters.filter((w) => this.requests.length >= w.count);
    this.#countWaiters = this.#countWaiters.filter((w) => this.requests.length < w.count);
    for (const waiter of ready) waiter.resolve(this.requests.slice());
    return request;
  }

  markAborted(request: SimulatorRequest): void {
    request.aborted = true;
    for (const waiter of this.#takeAbortWaiters(request.id)) waiter.resolve();
  }

  markFinished(request: SimulatorRequest): void {
    this.#finished.add(request.id);
    const error = new Error(`simulator: request #${request.id} finished without being aborted`);
    for (const waiter of this.#takeAbortWaiters(request.id)) waiter.reject(error);
  }

  waitForRequests(count: number): Promise<SimulatorRequest[]> {
    if (this.requests.length >= count) return Promise.resolve(this.requests.slice());
    if (this.#closed)
      return Promise.reject(new Error(`simulator closed after ${this.requests.length} of ${count} requests`));
    return new Promise((resolve, reject) => this.#countWaiters.push({ count, resolve, reject }));
  }

  waitForAbort(requestId: number): Promise<void> {
    const request = this.requests[requestId - 1];
    if (request?.aborted) return Promise.resolve();
    if (request && this.#finished.has(requestId)) {
      return Promise.reject(new Error(`simulator: request #${requestId} finished without being aborted`));
    }
    if (this.#closed) return Promise.reject(new Error(`simulator closed before request #${requestId} was aborted`));
    // The request may not have arrived yet; the waiter is keyed by id and settles when it does.
    return new Promise((resolve, reject) => {
      const list = this.#abortWaiters.get(requestId) ?? [];
      list.push({ resolve, reject });
      this.#abortWaiters.set(requestId, list);
    });
  }

  /** Settles every outstanding wait so no test hangs on a closed simulator. */
  close(): void {
    this.#closed = true;
    for (const waiter of this.#countWaiters) {
      waiter.reject(new Error(`simulator closed after ${this.requests.length} of ${waiter.count} requests`));
    }
    this.#countWaiters = [];
    for (const [id, waiters] of this.#abortWaiters) {
      for (const waiter of waiters) waiter.reject(new Error(`simulator closed before request #${id} was aborted`));
    }
    this.#abortWaiters.clear();
  }

  #takeAbortWaiters(id: number): AbortWaiter[] {
    const list = this.#abortWaiters.get(id) ?? [];
    this.#abortWaiters.delete(id);
    return list;
  }
}
