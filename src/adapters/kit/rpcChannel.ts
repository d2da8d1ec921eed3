import { HostUnavailableError } from "../../domain/errors.js";
import { frameTooLarge } from "./frameLimits.js";
import { parseFrame, request, toError, type RpcMessage } from "./jsonRpc.js";
import type { LineOverflow } from "./lines.js";
import type { FrameRing } from "./ring.js";

const OPEN_BRACE = 0x7b;

/**
 * A JSON-RPC connection to a host: calls with replies, notifications, and a gate that holds
 * calls while the connection is being re-established (nothing mutable is offered until the
 * adapter has re-read the host's state and opened the gate again). What the host sends that
 * nobody can use (not JSON, not JSON-RPC, an unexpected notification, a reply nobody waits
 * for, a request with no handler, a message a listener threw on) is counted and sampled in
 * the ring (`ring.counts`); nothing a host sends can throw out of the channel.
 */
export abstract class RpcChannel {
  #nextId = 1;
  #pending = new Map<number, { resolve: (v: unknown) => void; reject: (e: Error) => void }>();
  #listeners: Array<(method: string, params: unknown) => void> = [];
  #requestHandler: ((method: string, params: unknown, id: number) => void) | null = null;
  #gate: Promise<void> = Promise.resolve();
  #openGate: (() => void) | null = null;
  #failed: Error | null = null;
  #onFailed: Array<(error: Error) => void> = [];
  /** Notification methods the adapter takes; null: any (nothing counts as unknown). */
  #expected: Set<string> | null = null;

  /** Sees every raw frame, unredacted (the recorder of replay fixtures); never set in production paths. */
  tap: ((direction: "in" | "out", line: string) => void) | null = null;

  constructor(readonly ring: FrameRing) {}

  #send(line: string): void {
    this.ring.push("out", line);
    this.tap?.("out", line);
    this.write(line);
  }

  get failed(): boolean {
    return this.#failed !== null;
  }

  /** Called once when the channel fails for good (at once, if it already has). */
  onFailed(listener: (error: Error) => void): void {
    const failed = this.#failed;
    if (failed) queueMicrotask(() => listener(failed));
    else this.#onFailed.push(listener);
  }

  /**
   * Declares the notifications this host may send: any other is counted as `unknown_notification` (and still
   * delivered).
   */
  expectNotifications(methods: readonly string[]): void {
    this.#expected ??= new Set();
    for (const method of methods) this.#expected.add(method);
  }

  /** The params of the next `method` notification; rejects if the channel fails first. */
  nextNotification(method: string): Promise<unknown> {
    return new Promise((resolve, reject) => {
      let settled = false;
      this.onNotification((m, params) => {
        if (settled || m !== method) return;
        settled = true;
        resolve(params);
      });
      this.onFailed((error) => {
        if (settled) return;
        settled = true;
        reject(error);
      });
    });
  }

  protected abstract write(line: string): void;

  /** How a message goes on the wire (a host that omits the `jsonrpc` field overrides it). */
  protected encode(message: RpcMessage): string {
    return JSON.stringify(message);
  }

  /** Requests the host sends us (approvals...): answer them with `respond`. */
  onRequest(handler: (method: string, params: unknown, id: number) => void): void {
    this.#requestHandler = handler;
  }

  /** Refuses a host request with a JSON-RPC error. */
  respondError(id: number, message: string): void {
    if (this.#failed) throw this.#failed;
    this.#send(this.encode({ jsonrpc: "2.0", id, error: { code: -32601, message } } as RpcMessage));
  }

  /** A notification to the host (no reply). */
  notify(method: string, params?: unknown): void {
    this.#send(this.encode({ jsonrpc: "2.0", method, ...(params === undefined ? {} : { params }) } as RpcMessage));
  }

  /** Answers a host request; a dead host cannot be answered (never a silent write to a closed pipe). */
  respond(id: number, value: unknown): void {
    if (this.#failed) throw this.#failed;
    this.#send(this.encode({ jsonrpc: "2.0", id, result: value ?? null } as RpcMessage));
  }

  onNotification(listener: (method: string, params: unknown) => void): void {
    this.#listeners.push(listener);
  }

  /**
   * Waits for the gate (unless `bypassGate`), sends, and resolves with the reply; a host that
   * does not answer within `timeoutMs` (default 30 s) gets `host_unavailable`, never a hang.
   */
  async call(
    method: string,
    params?: unknown,
    options: { bypassGate?: boolean; timeoutMs?: number } = {},
  ): Promise<unknown> {
    const { expired: timeout, clear } = answerDeadline(method, options.timeoutMs ?? 30_000);
    try {
      if (!options.bypassGate) await Promise.race([this.#gate, timeout]);
      if (this.#failed) throw this.#failed;
      const id = this.#nextId++;
      const reply = new Promise((resolve, reject) => {
        this.#pending.set(id, { resolve, reject });
        this.#send(this.encode(request(id, method, params)));
      });
      return await Promise.race([reply, timeout.finally(() => this.#pending.delete(id))]);
    } finally {
      clear();
    }
  }

  /** One frame from the host. Never throws: it runs inside stream and socket callbacks. */
  protected receive(line: string): void {
    this.ring.push("in", line);
    this.tap?.("in", line);
    // A blank line separates frames; it is none. (A line starting with "{", as every frame does, is not blank: only
    // others are trimmed to tell.)
    if (line.length === 0 || (line.charCodeAt(0) !== OPEN_BRACE && line.trim() === "")) return;
    const frame = parseFrame(line);
    if (frame.kind !== "message") return this.ring.note(frame.kind, line);
    this.#dispatch(frame.message);
  }

  #dispatch(message: RpcMessage): void {
    if ("method" in message) {
      if ("id" in message && message.id !== undefined) return this.#request(message.method, message.params, message.id);
      if (this.#expected && !this.#expected.has(message.method))
        this.ring.note("unknown_notification", `${message.method} ${sampleOf(message.params)}`);
      for (const listener of this.#listeners) {
        try {
          listener(message.method, message.params);
        } catch (error) {
          this.ring.note("listener_error", `${message.method}: ${describe(error)}`);
        }
      }
      return;
    }
    const pending = message.id === null ? undefined : this.#pending.get(message.id);
    if (!pending) {
      const what = "error" in message ? `error ${message.error.code} ${message.error.message}` : "result";
      return this.ring.note("unknown_reply", `id ${String(message.id)}: ${what}`);
    }
    this.#pending.delete(message.id!);
    if ("error" in message) pending.reject(toError(message.error));
    else pending.resolve(message.result);
  }

  /** A host request nobody takes (or whose handler threw) is refused, never left waiting. */
  #request(method: string, params: unknown, id: number): void {
    const refuse = (reason: string) => {
      if (!this.#failed) this.respondError(id, reason);
    };
    if (!this.#requestHandler) {
      this.ring.note("unhandled_request", `${method} (id ${id})`);
      return refuse(`${method} is not handled by this client`);
    }
    try {
      this.#requestHandler(method, params, id);
    } catch (error) {
      this.ring.note("listener_error", `request ${method} (id ${id}): ${describe(error)}`);
      refuse(`${method} could not be handled`);
    }
  }

  /** A frame over a cap: the host is broken (sampled, then the channel fails for good). */
  protected overflowed(stream: "stdout" | "stderr" | "websocket", overflow: LineOverflow): void {
    this.ring.note(
      "frame_too_large",
      `${stream}: no newline within ${overflow.limitBytes} bytes; it began: ${overflow.head}`,
    );
    this.fail(frameTooLarge(stream, overflow.limitBytes));
  }

  /** Calls now wait until `openGate` (a reconnect is in progress). */
  closeGate(): void {
    if (this.#openGate) return;
    this.#gate = new Promise((resolve) => (this.#openGate = resolve));
  }

  openGate(): void {
    this.#openGate?.();
    this.#openGate = null;
  }

  /** Replies that will never come: their calls fail now. */
  protected dropPending(reason: string): void {
    for (const { reject } of this.#pending.values()) reject(new HostUnavailableError(reason));
    this.#pending.clear();
  }

  /** The connection is gone for good: every call, queued or future, fails. */
  fail(error: Error): void {
    if (this.#failed) return;
    this.#failed = error;
    this.dropPending(error.message);
    this.openGate();
    for (const listener of this.#onFailed) listener(error);
  }
}

/**
 * How long a host gets to answer a call: `expired` rejects with `host_unavailable` ("host did not answer ...", what the
 * registry's liveness probe reads as silence) once `timeoutMs` has passed; `clear` when the answer came.
 */
export function answerDeadline(method: string, timeoutMs: number): { expired: Promise<never>; clear(): void } {
  let timer: NodeJS.Timeout | undefined;
  const expired = new Promise<never>((_, reject) => {
    timer = setTimeout(
      () => reject(new HostUnavailableError(`host did not answer ${method} within ${timeoutMs} ms`)),
      timeoutMs,
    );
    timer.unref();
  });
  return { expired, clear: () => clearTimeout(timer) };
}

/** The start of a parsed value, for a ring sample (JSON.stringify can throw on very deep nesting). */
function sampleOf(value: unknown): string {
  try {
    return (JSON.stringify(value ?? null) ?? "").slice(0, 200);
  } catch {
    return "(params too deep to show)";
  }
}

function describe(error: unknown): string {
  try {
    return error instanceof Error ? error.message : String(error);
  } catch {
    return "an unprintable error";
  }
}
