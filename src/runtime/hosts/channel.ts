import type { ChildProcess } from "node:child_process";
import { createInterface } from "node:readline";
import WebSocket from "ws";
import { HostUnavailableError } from "../../domain/errors.js";
import { parseMessage, request, toError, type RpcMessage } from "./jsonRpc.js";
import type { FrameRing } from "./ring.js";

/**
 * A JSON-RPC connection to a host: calls with replies, notifications, and a gate that holds
 * calls while the connection is being re-established (nothing mutable is offered until the
 * adapter has re-read the host's state and opened the gate again).
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

  onFailed(listener: (error: Error) => void): void {
    this.#onFailed.push(listener);
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
  async call(method: string, params?: unknown, options: { bypassGate?: boolean; timeoutMs?: number } = {}): Promise<unknown> {
    const timeoutMs = options.timeoutMs ?? 30_000;
    let timer: NodeJS.Timeout | undefined;
    const timeout = new Promise<never>((_, reject) => {
      timer = setTimeout(() => reject(new HostUnavailableError(`host did not answer ${method} within ${timeoutMs} ms`)), timeoutMs);
      timer.unref();
    });
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
      clearTimeout(timer);
    }
  }

  protected receive(line: string): void {
    this.ring.push("in", line);
    this.tap?.("in", line);
    const message = parseMessage(line);
    if (!message) return;
    this.#dispatch(message);
  }

  #dispatch(message: RpcMessage): void {
    if ("method" in message) {
      if ("id" in message && message.id !== undefined) return this.#requestHandler?.(message.method, message.params, message.id);
      for (const listener of this.#listeners) listener(message.method, message.params);
      return;
    }
    const pending = message.id === null ? undefined : this.#pending.get(message.id);
    if (!pending) return;
    this.#pending.delete(message.id!);
    if ("error" in message) pending.reject(toError(message.error));
    else pending.resolve(message.result);
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

/** Newline-delimited JSON-RPC over a child's stdin/stdout; stderr lines go to the ring. */
export class StdioChannel extends RpcChannel {
  constructor(
    private readonly child: ChildProcess,
    ring: FrameRing,
  ) {
    super(ring);
    createInterface({ input: child.stdout! }).on("line", (line) => this.receive(line));
    createInterface({ input: child.stderr! }).on("line", (line) => ring.push("stderr", line));
    child.stdin!.on("error", () => undefined); // a dead host: calls fail through the exit path
  }

  protected write(line: string): void {
    this.child.stdin!.write(`${line}\n`);
  }
}

export interface ReconnectPolicy {
  attempts: number;
  /** Delay before each attempt (the last one repeats). */
  backoffMs: readonly number[];
}

/**
 * JSON-RPC over a loopback WebSocket that reconnects a bounded number of times: on a drop
 * it closes the gate and calls `onReconnected` after a successful attempt (the adapter
 * re-reads the host's state, then opens the gate); when every attempt failed the channel
 * fails for good (its `onFailed` listeners hear it).
 */
export class WebSocketChannel extends RpcChannel {
  #socket: WebSocket | null = null;
  #closed = false;
  onReconnected: () => Promise<void> = async () => this.openGate();

  constructor(
    private readonly url: string,
    ring: FrameRing,
    private readonly policy: ReconnectPolicy,
  ) {
    super(ring);
  }

  /** Connects; resolves on the host's first message (its `host.ready`). */
  async connect(): Promise<void> {
    const socket = await this.#open();
    this.#adopt(socket);
  }

  #open(): Promise<WebSocket> {
    return new Promise((resolve, reject) => {
      const socket = new WebSocket(this.url, { handshakeTimeout: 5_000 });
      const fail = (error: Error) => {
        socket.removeAllListeners();
        socket.terminate();
        reject(error);
      };
      socket.once("error", fail);
      socket.once("unexpected-response", (_req, res) => fail(new Error(`host refused the connection (${res.statusCode})`)));
      // The host speaks first (host.ready): then the connection is usable.
      socket.once("message", (data) => {
        socket.removeListener("error", fail);
        this.receive(String(data));
        resolve(socket);
      });
    });
  }

  #adopt(socket: WebSocket): void {
    this.#socket = socket;
    socket.on("message", (data) => this.receive(String(data)));
    socket.on("error", () => undefined);
    socket.once("close", () => {
      if (this.#socket === socket && !this.#closed) void this.#reconnect();
    });
  }

  async #reconnect(): Promise<void> {
    this.#socket = null;
    this.closeGate();
    this.dropPending("host connection lost");
    for (let attempt = 0; attempt < this.policy.attempts && !this.#closed && !this.failed; attempt++) {
      const delay = this.policy.backoffMs[Math.min(attempt, this.policy.backoffMs.length - 1)] ?? 0;
      await new Promise((r) => setTimeout(r, delay));
      const opened: { socket: WebSocket | null } = { socket: null };
      try {
        opened.socket = await this.#open();
        this.#adopt(opened.socket);
        await this.onReconnected();
        return;
      } catch (error) {
        // A socket adopted before its resume failed must not start a second reconnect loop.
        if (opened.socket) this.#discard(opened.socket);
        this.ring.push("stderr", `reconnect attempt ${attempt + 1} failed: ${error instanceof Error ? error.message : String(error)}`);
      }
    }
    if (this.#closed || this.failed) return;
    const error = new HostUnavailableError(`host connection lost; ${this.policy.attempts} reconnect attempts failed`);
    this.fail(error);
  }

  #discard(socket: WebSocket): void {
    if (this.#socket === socket) this.#socket = null;
    socket.removeAllListeners("close");
    socket.terminate();
  }

  protected write(line: string): void {
    this.#socket?.send(line);
  }

  close(): void {
    this.#closed = true;
    this.#socket?.terminate();
  }

  /** A dead host: no reconnect loop keeps knocking. */
  override fail(error: Error): void {
    this.close();
    super.fail(error);
  }
}

