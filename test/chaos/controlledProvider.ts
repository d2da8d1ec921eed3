import type { ProviderCapabilities } from "../../src/capabilities/schema.js";
import type {
  ProviderAdapter,
  ProviderAdapterEvent,
  ProviderSessionInfo,
  ProviderThreadHandle,
  SendRunInput,
} from "../../src/adapters/contract.js";

/**
 * A provider whose event stream the test writes, frame by frame: the double sits exactly at
 * the provider boundary (everything behind `streamEvents` is the real runtime). `deliver`
 * resolves once the runtime has consumed the frame: its pump asks for the next frame only
 * after it has applied the previous one synchronously, so the test waits on that request,
 * never on time.
 */

export interface TurnCall {
  /** 1-based, in `sendRun` order. */
  n: number;
  input: SendRunInput;
  /** The provider's reply to `sendRun` (held until the test accepts the turn), naming `turnRef` when given. */
  accept(turnRef?: string | null): void;
}

export interface ControlledRefs {
  /** Native ref of the provider thread (null when the provider exposes none). */
  threadRef: string | null;
  /** Native ref of turn n, as the reply to `sendRun` gives it (null when not exposed). */
  turnRef(n: number): string | null;
}

type Delivery = { frame: unknown; consumed: () => void };

/** The event stream: one consumer, frames handed over one at a time. */
class ControlledStream implements AsyncIterator<ProviderAdapterEvent> {
  #buffer: Delivery[] = [];
  /** The frame last handed out: consumed when the runtime asks for the next one. */
  #handedOut: (() => void) | null = null;
  #pull: ((result: IteratorResult<ProviderAdapterEvent>) => void) | null = null;
  #closed = false;

  deliver(frame: unknown): Promise<void> {
    return new Promise((consumed) => {
      if (this.#closed) return consumed();
      const pull = this.#pull;
      if (!pull) return void this.#buffer.push({ frame, consumed });
      this.#pull = null;
      this.#handedOut = consumed;
      pull({ value: frame as ProviderAdapterEvent, done: false });
    });
  }

  next(): Promise<IteratorResult<ProviderAdapterEvent>> {
    this.#settleHandedOut();
    const item = this.#buffer.shift();
    if (item) {
      this.#handedOut = item.consumed;
      return Promise.resolve({ value: item.frame as ProviderAdapterEvent, done: false });
    }
    if (this.#closed) return Promise.resolve({ value: undefined, done: true });
    return new Promise((resolve) => (this.#pull = resolve));
  }

  return(): Promise<IteratorResult<ProviderAdapterEvent>> {
    this.close();
    return Promise.resolve({ value: undefined, done: true });
  }

  close(): void {
    this.#closed = true;
    this.#settleHandedOut();
    for (const item of this.#buffer.splice(0)) item.consumed();
    const pull = this.#pull;
    this.#pull = null;
    pull?.({ value: undefined, done: true });
  }

  #settleHandedOut(): void {
    const consumed = this.#handedOut;
    this.#handedOut = null;
    consumed?.();
  }
}

export class ControlledProvider implements ProviderAdapter {
  readonly provider = "controlled";
  readonly calls: Array<{ method: string; input: unknown }> = [];
  readonly sessions: string[] = [];
  #stream = new ControlledStream();
  #turns: TurnCall[] = [];
  #turnWaiters: Array<{ n: number; resolve: (call: TurnCall) => void }> = [];
  #unanswered = new Set<() => void>();

  constructor(
    private readonly caps: ProviderCapabilities,
    private readonly refs: ControlledRefs,
    /** Reply to `sendRun` at once instead of waiting for `accept()`. */
    private readonly autoAccept = false,
  ) {}

  getCapabilities(): ProviderCapabilities {
    return this.caps;
  }

  async startSession(input: { sessionId: string }): Promise<ProviderSessionInfo> {
    this.calls.push({ method: "startSession", input });
    this.sessions.push(input.sessionId);
    return { sessionId: input.sessionId, capabilities: this.caps, hostGeneration: 1 };
  }

  async stopSession(input: { sessionId: string }): Promise<void> {
    this.calls.push({ method: "stopSession", input });
  }

  async ensureProviderThread(input: unknown): Promise<ProviderThreadHandle> {
    this.calls.push({ method: "ensureProviderThread", input });
    return { threadRef: this.refs.threadRef, resumeCursor: "cursor-1" };
  }

  sendRun(input: SendRunInput): Promise<{ turnRef: string | null }> {
    this.calls.push({ method: "sendRun", input });
    const n = this.#turns.length + 1;
    return new Promise((resolve, reject) => {
      const call: TurnCall = {
        n,
        input,
        accept: (turnRef) => resolve({ turnRef: turnRef === undefined ? this.refs.turnRef(n) : turnRef }),
      };
      // A reply still held when the provider closes never comes: the call fails, as with a host that went away.
      this.#unanswered.add(() => reject(new Error("controlled provider closed")));
      this.#turns.push(call);
      if (this.autoAccept) call.accept();
      for (const w of this.#turnWaiters.filter((w) => w.n === n)) w.resolve(call);
      this.#turnWaiters = this.#turnWaiters.filter((w) => w.n !== n);
    });
  }

  async steerRun(input: unknown): Promise<void> {
    this.calls.push({ method: "steerRun", input });
  }

  async interrupt(input: unknown): Promise<void> {
    this.calls.push({ method: "interrupt", input });
  }

  async respondToRequest(input: unknown): Promise<void> {
    this.calls.push({ method: "respondToRequest", input });
  }

  streamEvents(): AsyncIterable<ProviderAdapterEvent> {
    return { [Symbol.asyncIterator]: () => this.#stream };
  }

  async close(): Promise<void> {
    this.#stream.close();
    for (const fail of this.#unanswered) fail();
    this.#unanswered.clear();
  }

  // ---- the test's side -----------------------------------------------------------------

  /** Resolves when the runtime has called `sendRun` for the n-th time. */
  turn(n: number): Promise<TurnCall> {
    const call = this.#turns[n - 1];
    if (call) return Promise.resolve(call);
    return new Promise((resolve) => this.#turnWaiters.push({ n, resolve }));
  }

  get turnsSent(): number {
    return this.#turns.length;
  }

  /** Hands one frame (any value: the runtime must survive garbage) to the runtime; resolves once it was applied. */
  deliver(frame: unknown): Promise<void> {
    return this.#stream.deliver(frame);
  }
}
