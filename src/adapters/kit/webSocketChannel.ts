import WebSocket from "ws";
import { HostUnavailableError } from "../../domain/errors.js";
import { frameTooLarge, resolveLimits, type ChannelLimits } from "./frameLimits.js";
import type { FrameRing } from "./ring.js";
import { RpcChannel } from "./rpcChannel.js";

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
  readonly #maxFrameBytes: number;
  onReconnected: () => Promise<void> = async () => this.openGate();

  /**
   * `limits.maxFrameBytes` caps a message (the socket's maxPayload); a message over it cuts the host off, with no
   * reconnect.
   */
  constructor(
    private readonly url: string,
    ring: FrameRing,
    private readonly policy: ReconnectPolicy,
    limits: ChannelLimits = {},
  ) {
    super(ring);
    this.#maxFrameBytes = resolveLimits(limits).frameBytes;
  }

  /** ws closes a socket that receives more than maxPayload with this error (then code 1009). */
  #tooLarge(error: unknown): HostUnavailableError | null {
    if ((error as { code?: unknown } | null)?.code !== "WS_ERR_UNSUPPORTED_MESSAGE_LENGTH") return null;
    this.ring.note("frame_too_large", `websocket: a message over ${this.#maxFrameBytes} bytes`);
    return frameTooLarge("websocket", this.#maxFrameBytes);
  }

  /** Connects; resolves on the host's first message (its `host.ready`). */
  async connect(): Promise<void> {
    const socket = await this.#open();
    this.#adopt(socket);
  }

  #open(): Promise<WebSocket> {
    return new Promise((resolve, reject) => {
      const socket = new WebSocket(this.url, { handshakeTimeout: 5_000, maxPayload: this.#maxFrameBytes });
      const fail = (error: Error) => {
        socket.removeAllListeners();
        socket.on("error", () => undefined);
        socket.terminate();
        reject(this.#tooLarge(error) ?? error);
      };
      socket.once("error", fail);
      socket.once("unexpected-response", (_req, res) =>
        fail(new Error(`host refused the connection (${res.statusCode})`)),
      );
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
    // Any other error is followed by "close" (which reconnects); an oversized message means a broken host.
    socket.on("error", (error) => {
      const tooLarge = this.#tooLarge(error);
      if (tooLarge) this.fail(tooLarge);
    });
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
        if (this.failed) return;
        if (error instanceof HostUnavailableError && error.details.reason === "frame_too_large")
          return this.fail(error);
        this.ring.push(
          "stderr",
          `reconnect attempt ${attempt + 1} failed: ${error instanceof Error ? error.message : String(error)}`,
        );
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
