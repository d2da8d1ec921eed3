import { timingSafeEqual } from "node:crypto";
import { chmodSync, rmdirSync, rmSync } from "node:fs";
import { createServer, type IncomingMessage } from "node:http";
import { dirname } from "node:path";
import { createInterface } from "node:readline";
import { WebSocket, WebSocketServer, type RawData } from "ws";
import { HOST_FLAGS } from "../protocol/host.js";
import { ScriptedHost, type FloodStream, type HostConnection } from "./server.js";

/**
 * The scripted provider host process:
 *   node --import tsx src/adapters/scripted/host/main.ts [--websocket] [--never-ready]
 * stdio (default): newline-delimited JSON-RPC on stdin/stdout; `host.ready` on start.
 * --websocket: a loopback WebSocket server that prints `{"listening":{"port":N}}` and accepts
 * only connections presenting `?token=<TILLER_HOST_TOKEN>`; `host.ready` on every connection.
 * --socket=PATH: a WebSocket server on the unix socket PATH (in a private directory made for
 * it), set to 0600 before it prints `{"listening":{"socket":PATH}}`; no token. It outlives its
 * parent (a later runtime may adopt it) and removes PATH and its directory on a clean exit.
 * --orphan-ttl-ms=N: (listening hosts) exit once no client has been connected for N ms.
 * --never-ready: never becomes ready (stdio: ignores its input; websocket: never listens).
 * --linger-ms=N: on stdin end or SIGTERM, wait N ms after closing before exiting.
 * stdout carries protocol messages only; diagnostics go to stderr.
 */

function log(message: string): void {
  process.stderr.write(`scripted host: ${message}\n`);
}

function fail(error: unknown): never {
  log(error instanceof Error ? (error.stack ?? error.message) : String(error));
  process.exit(1);
}

process.on("uncaughtException", fail);
process.on("unhandledRejection", fail);
// The reader may be gone (EPIPE) while the host winds down: that is no reason to crash.
process.stdout.on("error", (error) => log(`stdout: ${error.message}`));
// Nor for a socket host whose parent died (nobody reads its diagnostics any more): it goes on.
process.stderr.on("error", () => undefined);

function writeLine(value: unknown): Promise<void> {
  return writeText(JSON.stringify(value));
}

function writeText(text: string): Promise<void> {
  return new Promise((resolve) => {
    process.stdout.write(`${text}\n`, () => resolve());
  });
}

/**
 * `debug.flood`: `bytes` of "x" and no newline, 1 MiB at a time, until done or the reader is
 * gone (a broken host, as the runtime must survive it). One chunk per turn of the event loop
 * (pipe writes are synchronous on Linux), so the host still hears SIGTERM meanwhile.
 */
function flood(stream: NodeJS.WritableStream, bytes: number): void {
  const chunk = Buffer.alloc(Math.min(bytes, 1 << 20), 0x78);
  let left = bytes;
  let gone = false;
  stream.on("error", () => (gone = true));
  const pour = (): void => {
    if (left <= 0 || gone) return;
    const piece = left >= chunk.length ? chunk : chunk.subarray(0, left);
    left -= piece.length;
    if (stream.write(piece)) setImmediate(pour);
    else stream.once("drain", pour);
  };
  pour();
}

let keepAliveTimer: NodeJS.Timeout | null = null;
/** Keeps the process alive when nothing else does (never ready, or no longer listening). */
function keepAlive(): void {
  keepAliveTimer ??= setInterval(() => undefined, 1 << 30);
}

let lingerMs = 0;
let closing: Promise<void> | null = null;
/** Runs `close` once, then exits 0 (after `--linger-ms`, deaf to further signals meanwhile). */
function shutdown(close: () => Promise<void>): void {
  closing ??= close().then(
    async () => {
      if (lingerMs > 0) {
        log(`closed; lingering ${lingerMs}ms before exiting`);
        await new Promise((resolve) => setTimeout(resolve, lingerMs));
      }
      process.exit(0);
    },
    (error: unknown) => fail(error),
  );
}

function runStdio(neverReady: boolean): void {
  const host = new ScriptedHost({
    onFatal: fail,
    flood: (stream, bytes) => flood(stream === "stderr" ? process.stderr : process.stdout, bytes),
  });
  const connection: HostConnection = { send: (message) => writeLine(message), sendText: writeText };
  if (!neverReady) host.connect(connection);
  const lines = createInterface({ input: process.stdin, crlfDelay: Infinity });
  lines.on("line", (line) => {
    if (neverReady || line.trim() === "") return;
    void host.receive(connection, line);
  });
  lines.on("close", () => shutdown(() => host.close()));
  process.on("SIGTERM", () => shutdown(() => host.close()));
}

function tokenMatches(expected: Buffer, req: IncomingMessage): boolean {
  let presented: string | null;
  try {
    presented = new URL(req.url ?? "/", "http://127.0.0.1").searchParams.get("token");
  } catch {
    return false;
  }
  if (presented === null) return false;
  const given = Buffer.from(presented);
  return given.length === expected.length && timingSafeEqual(given, expected);
}

function text(data: RawData): string {
  if (Array.isArray(data)) return Buffer.concat(data).toString("utf8");
  return Buffer.isBuffer(data) ? data.toString("utf8") : Buffer.from(data).toString("utf8");
}

/** Where a WebSocket host listens: loopback TCP behind a token, or a unix socket its file permissions guard. */
type Listening = { kind: "loopback"; token: Buffer } | { kind: "socket"; path: string };

function loopback(): Listening {
  const token = process.env.TILLER_HOST_TOKEN;
  delete process.env.TILLER_HOST_TOKEN;
  if (!token) fail(new Error("TILLER_HOST_TOKEN must be set in websocket mode"));
  return { kind: "loopback", token: Buffer.from(token) };
}

/** The server, and how it stops listening (a unix socket's HTTP server is ours to close). */
function webSocketServer(on: Listening): { wss: WebSocketServer; stopListening: () => void } {
  if (on.kind === "loopback") {
    const expected = on.token;
    const wss = new WebSocketServer({
      host: "127.0.0.1",
      port: 0,
      verifyClient: (info: { req: IncomingMessage }) => tokenMatches(expected, info.req), // false: 401
    });
    return { wss, stopListening: () => wss.close() };
  }
  const server = createServer((_req, res) => res.writeHead(426).end()); // WebSocket upgrades only
  const wss = new WebSocketServer({ server }); // it relays the server's `listening` and `error`
  server.listen(on.path);
  return {
    wss,
    stopListening: () => {
      wss.close();
      server.close();
    },
  };
}

/** A clean exit of a socket host leaves nothing behind: its socket, then its private directory. */
function removeSocket(path: string): void {
  try {
    rmSync(path, { force: true });
    rmdirSync(dirname(path));
  } catch (error) {
    log(`could not remove ${path}: ${error instanceof Error ? error.message : String(error)}`);
  }
}

function runWebSocket(neverReady: boolean, on: Listening, orphanTtlMs: number | null): void {
  if (neverReady) {
    keepAlive();
    process.on("SIGTERM", () => process.exit(0));
    return;
  }
  const terminateAll = () => {
    for (const socket of wss.clients) socket.terminate();
  };
  const floodSocket = (stream: FloodStream, bytes: number) => {
    if (stream !== "websocket") return flood(stream === "stderr" ? process.stderr : process.stdout, bytes);
    // One text message of `bytes` (over the client's cap, it is what the client must refuse).
    for (const socket of wss.clients) socket.send(Buffer.alloc(bytes, 0x78), { binary: false });
  };
  const host = new ScriptedHost({
    flood: floodSocket,
    dropConnections: terminateAll,
    stopListening: () => {
      keepAlive();
      stopListening();
      terminateAll();
    },
    onFatal: fail,
  });
  const close = async () => {
    await host.close();
    stopListening();
    terminateAll();
    if (on.kind === "socket") removeSocket(on.path);
  };
  // A host nobody is connected to for `orphanTtlMs` was left behind and not adopted: it goes.
  let orphaned: NodeJS.Timeout | null = null;
  const awaitClient = () => {
    if (orphanTtlMs === null || wss.clients.size > 0 || orphaned) return;
    orphaned = setTimeout(() => {
      log(`no client for ${orphanTtlMs} ms: exiting`);
      shutdown(close);
    }, orphanTtlMs);
  };
  const { wss, stopListening } = webSocketServer(on);
  wss.on("error", fail);
  wss.on("listening", () => {
    awaitClient();
    if (on.kind === "socket") {
      // Its directory (0700) already keeps others out; the socket itself says so too, before anyone is told of it.
      chmodSync(on.path, 0o600);
      return void writeLine({ listening: { socket: on.path } });
    }
    const address = wss.address();
    if (address === null || typeof address === "string")
      fail(new Error(`unexpected server address ${String(address)}`));
    void writeLine({ listening: { port: address.port } });
  });
  wss.on("connection", (socket) => {
    if (orphaned) clearTimeout(orphaned);
    orphaned = null;
    for (const other of wss.clients) if (other !== socket) other.terminate(); // one client at a time
    const sendText = (text: string) =>
      new Promise<void>((resolve) => {
        if (socket.readyState !== WebSocket.OPEN) return resolve();
        socket.send(text, () => resolve());
      });
    const connection: HostConnection = { send: (message) => sendText(JSON.stringify(message)), sendText };
    socket.on("message", (data) => void host.receive(connection, text(data)));
    socket.on("close", () => {
      host.disconnect(connection);
      awaitClient();
    });
    socket.on("error", (error) => log(`socket: ${error.message}`));
    host.connect(connection);
  });
  process.on("SIGTERM", () => shutdown(close));
}

const flags = process.argv.slice(2);
const known = new Set<string>(Object.values(HOST_FLAGS));
let socketPath: string | null = null;
let orphanTtlMs: number | null = null;
for (const flag of flags) {
  // Valued flags (not in HOST_FLAGS): `--linger-ms=N` (test behaviour, a slow shutdown), the socket and its TTL.
  const [, name, value] = /^(--linger-ms|--socket|--orphan-ttl-ms)=(.+)$/.exec(flag) ?? [];
  if (name === "--linger-ms" && /^\d+$/.test(value!)) lingerMs = Number(value);
  else if (name === "--orphan-ttl-ms" && /^\d+$/.test(value!)) orphanTtlMs = Number(value);
  else if (name === "--socket") socketPath = value!;
  else if (!known.has(flag)) fail(new Error(`unknown flag ${flag}`));
}
const neverReady = flags.includes(HOST_FLAGS.neverReady);
if (socketPath !== null) runWebSocket(neverReady, { kind: "socket", path: socketPath }, orphanTtlMs);
else if (flags.includes(HOST_FLAGS.websocket)) runWebSocket(neverReady, loopback(), orphanTtlMs);
else runStdio(neverReady);
// Logged once the signal handlers are in place (tests wait on it before sending SIGTERM).
if (neverReady) log("started with --never-ready: this host will never be ready");
