import { spawn, type ChildProcess } from "node:child_process";
import { mkdtemp, rm } from "node:fs/promises";
import { tmpdir } from "node:os";
import { dirname, join } from "node:path";
import { createInterface } from "node:readline";
import { fileURLToPath } from "node:url";
import { WebSocket } from "ws";
import { EventParamsSchema } from "../../src/adapters/scripted/protocol/host.js";
import type { ProviderEvent } from "../../src/adapters/contract.js";
import { parseMessage, request, toError, type RpcMessage } from "../../src/adapters/kit/jsonRpc.js";

/**
 * Scripted socket hosts started by a test itself (as a previous life of the runtime would have
 * started them: detached, in their own process group), and a bare JSON-RPC client for them.
 */

const ROOT = fileURLToPath(new URL("../..", import.meta.url));
const MAIN = fileURLToPath(new URL("../../src/adapters/scripted/host/main.ts", import.meta.url));

export interface SocketHost {
  child: ChildProcess;
  pid: number;
  endpoint: string;
  exited: Promise<{ code: number | null; signal: NodeJS.Signals | null }>;
}

const started = new Set<SocketHost>();

/** Spawns a socket host in a fresh private directory and resolves once it says it listens. */
export async function spawnSocketHost(flags: string[] = []): Promise<SocketHost> {
  const endpoint = join(await mkdtemp(join(tmpdir(), "tiller-host-")), "host.sock");
  const child = spawn(process.execPath, ["--import", "tsx", MAIN, `--socket=${endpoint}`, ...flags], {
    cwd: ROOT,
    detached: true,
    stdio: ["ignore", "pipe", "inherit"],
  });
  const exited = new Promise<{ code: number | null; signal: NodeJS.Signals | null }>((resolve) =>
    child.once("exit", (code, signal) => resolve({ code, signal })),
  );
  const host = { child, pid: child.pid!, endpoint, exited };
  started.add(host);
  const lines = createInterface({ input: child.stdout! });
  const listening = JSON.stringify({ listening: { socket: endpoint } });
  for await (const line of lines) if (line === listening) break;
  return host;
}

/** Kills what `spawnSocketHost` started and is still running, and removes what a killed host could not. */
export async function killSocketHosts(): Promise<void> {
  for (const host of started) {
    if (host.child.exitCode === null && host.child.signalCode === null) process.kill(-host.pid, "SIGKILL");
    await host.exited;
    await rm(dirname(host.endpoint), { recursive: true, force: true });
  }
  started.clear();
}

/** A JSON-RPC client over the host's socket; records every message the host sends. */
export class SocketClient {
  readonly messages: RpcMessage[] = [];
  #waiters: Array<{ test: (m: RpcMessage) => boolean; resolve: (m: RpcMessage) => void }> = [];
  #nextId = 1;
  readonly closed: Promise<void>;

  private constructor(private readonly socket: WebSocket) {
    socket.on("message", (data) => this.#feed(String(data)));
    this.closed = new Promise((resolve) => socket.once("close", () => resolve()));
  }

  /** Connects and resolves once the host greeted the connection (`host.ready`). */
  static async connect(endpoint: string): Promise<SocketClient> {
    const socket = new WebSocket(`ws+unix:${endpoint}:/`);
    const client = new SocketClient(socket);
    await new Promise<void>((resolve, reject) => {
      socket.once("open", () => resolve());
      socket.once("error", reject);
    });
    await client.waitFor((m) => "method" in m && m.method === "host.ready");
    return client;
  }

  #feed(text: string): void {
    const message = parseMessage(text);
    if (!message) throw new Error(`host sent a non-JSON-RPC message: ${text}`);
    this.messages.push(message);
    for (const waiter of [...this.#waiters]) {
      if (!waiter.test(message)) continue;
      this.#waiters.splice(this.#waiters.indexOf(waiter), 1);
      waiter.resolve(message);
    }
  }

  waitFor(test: (m: RpcMessage) => boolean): Promise<RpcMessage> {
    const found = this.messages.find(test);
    if (found) return Promise.resolve(found);
    return new Promise((resolve) => this.#waiters.push({ test, resolve }));
  }

  async call<T = unknown>(method: string, params?: unknown): Promise<T> {
    const id = this.#nextId++;
    const response = this.waitFor((m) => "id" in m && m.id === id && !("method" in m));
    this.socket.send(JSON.stringify(request(id, method, params)));
    const message = await response;
    if ("error" in message) throw toError(message.error);
    return (message as { result: T }).result;
  }

  /** The host's next (or an already received) `event` whose provider event passes `test`. */
  async waitEvent(test: (event: ProviderEvent) => boolean): Promise<{ seq: number; event: ProviderEvent }> {
    const isEvent = (m: RpcMessage) =>
      "method" in m && m.method === "event" && test(EventParamsSchema.parse(m.params).event as ProviderEvent);
    const params = EventParamsSchema.parse(((await this.waitFor(isEvent)) as { params: unknown }).params);
    return { seq: params.seq, event: params.event as ProviderEvent };
  }

  close(): Promise<void> {
    this.socket.close();
    return this.closed;
  }
}
