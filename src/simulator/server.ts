/**
 * The loopback HTTP server. It records every request, picks a reply (side reply, then the
 * FIFO queue, then the default), and hands the rendering to the dialect the path names.
 */
import { createServer, type IncomingMessage, type ServerResponse } from "node:http";
import type { AddressInfo } from "node:net";
import * as zlib from "node:zlib";
import { encodeSse, modelOf, type Dialect, type RenderContext } from "./dialect.js";
import { geminiDialect } from "./gemini.js";
import { messagesDialect } from "./messages.js";
import { RequestLog } from "./recorder.js";
import { NO_SCRIPTED_REPLY, plan, type Plan } from "./replies.js";
import { responsesDialect } from "./responses.js";
import type { ModelSimulator, ModelSimulatorOptions, Reply, SimulatorRequest } from "./types.js";

const DIALECTS: readonly Dialect[] = [responsesDialect, messagesDialect, geminiDialect];

// Credentials are masked at the door: a recorded request must be safe to print or snapshot.
const REDACTED = new Set(["authorization", "proxy-authorization", "x-api-key", "x-goog-api-key", "cookie"]);

interface Hang {
  release(): void;
  /** Settles once the response is fully written or its connection is gone. */
  settled: Promise<void>;
}

export async function startModelSimulator(options: ModelSimulatorOptions = {}): Promise<ModelSimulator> {
  const log = new RequestLog();
  const queue: Reply[] = [];
  const hangs = new Set<Hang>();
  let idCounter = 0;
  const nextId = (prefix: string) => `${prefix}_${++idCounter}`;
  const say = (line: string) => options.log?.(`[simulator] ${line}`);

  function choose(request: SimulatorRequest, dialect: Dialect): { plan: Plan; source: string } {
    try {
      // A probe the client makes on its own (a model check, a router) is the dialect's to answer, before any script.
      const probe = dialect.probe?.(request.body);
      if (probe) return { plan: plan(probe), source: "probe" };
      const side = options.sideReply?.(request);
      if (side) return { plan: plan(side), source: "side" };
      const next = queue.shift();
      if (next === undefined) {
        return { plan: plan(options.defaultReply ?? NO_SCRIPTED_REPLY), source: "default" };
      }
      return { plan: plan(typeof next === "function" ? next(request) : next), source: "queue" };
    } catch (error) {
      const message = `simulator: reply function threw: ${error instanceof Error ? error.message : String(error)}`;
      return { plan: { kind: "error", status: 500, message }, source: "error" };
    }
  }

  /** Keeps a response open until released; a client disconnect drops it from the set. */
  function hold(res: ServerResponse, finish: () => void): void {
    const hang: Hang = {
      release() {
        hangs.delete(hang);
        if (!res.writableEnded && !res.destroyed) finish();
      },
      settled: new Promise<void>((resolve) => {
        res.once("finish", resolve);
        res.once("close", resolve);
      }),
    };
    hangs.add(hang);
    res.once("close", () => hangs.delete(hang));
  }

  async function handle(req: IncomingMessage, res: ServerResponse): Promise<void> {
    const receivedAt = Date.now();
    const raw = await readBody(req);
    const method = req.method ?? "GET";
    const url = req.url ?? "/";
    const pathname = new URL(url, "http://127.0.0.1").pathname;
    const dialect = DIALECTS.find((d) => d.matches(method, pathname));
    const request = log.record({
      method,
      url,
      headers: recordHeaders(req),
      body: parseBody(raw, req.headers["content-encoding"], say),
      dialect: dialect?.name ?? "unknown",
      receivedAt,
    });
    res.once("close", () => (res.writableFinished ? log.markFinished(request) : log.markAborted(request)));

    if (!dialect) {
      if (method === "GET" && pathname === "/v1/models") {
        say(`#${request.id} ${method} ${url} → empty model list`);
        // `data` is the OpenAI list shape, `models` the one Codex's model refresh reads.
        return sendJson(res, 200, { object: "list", data: [], models: [] });
      }
      say(`#${request.id} ${method} ${url} → 404`);
      return sendJson(res, 404, {
        error: { message: `simulator: no route for ${method} ${pathname}`, type: "not_found_error" },
      });
    }

    const { plan: chosen, source } = choose(request, dialect);
    const outcome = chosen.kind === "error" ? `HTTP ${chosen.status}` : chosen.summary;
    say(`#${request.id} ${method} ${url} → ${outcome} (${source})`);
    if (chosen.kind === "error") return sendJson(res, chosen.status, dialect.error(chosen.status, chosen.message));

    const ctx: RenderContext = { model: dialect.model?.(pathname) ?? modelOf(request.body, "simulator"), nextId };
    if (!dialect.streams(request.body, pathname)) {
      const body = dialect.json(chosen.turn, ctx);
      if (chosen.hang) return hold(res, () => sendJson(res, 200, body));
      return sendJson(res, 200, body);
    }

    const events = dialect.stream(chosen.turn, ctx);
    res.writeHead(200, { "content-type": "text/event-stream", "cache-control": "no-cache" });
    if (!chosen.hang) {
      res.end(events.map(encodeSse).join(""));
      return;
    }
    const cut = events.findIndex((e) => e.textDelta === true) + 1;
    res.write(events.slice(0, cut).map(encodeSse).join(""));
    hold(res, () => res.end(events.slice(cut).map(encodeSse).join("")));
  }

  const server = createServer((req, res) => {
    handle(req, res).catch((error: unknown) => {
      say(`${req.method} ${req.url} failed: ${error instanceof Error ? error.message : String(error)}`);
      if (!res.headersSent && !res.destroyed)
        sendJson(res, 500, { error: { message: "simulator internal error", type: "server_error" } });
      else res.destroy();
    });
  });

  await new Promise<void>((resolve, reject) => {
    server.once("error", reject);
    server.listen(options.port ?? 0, "127.0.0.1", () => {
      server.off("error", reject);
      resolve();
    });
  });
  const port = (server.address() as AddressInfo).port;
  const url = `http://127.0.0.1:${port}`;
  say(`listening on ${url}`);

  let closing: Promise<void> | undefined;
  async function close(): Promise<void> {
    const released = [...hangs];
    for (const hang of released) hang.release();
    // Let released streams hand their last bytes to the socket before every socket is cut.
    await Promise.all(released.map((hang) => hang.settled));
    log.close();
    await new Promise<void>((resolve) => {
      server.close(() => resolve());
      server.closeAllConnections();
    });
    say("closed");
  }

  return {
    url,
    port,
    requests: log.requests,
    push: (...replies: Reply[]) => void queue.push(...replies),
    waitForRequests: (count) => log.waitForRequests(count),
    waitForAbort: (requestId) => log.waitForAbort(requestId),
    releaseHang: () => {
      for (const hang of [...hangs]) hang.release();
    },
    pending: () => queue.length,
    close: () => (closing ??= close()),
  };
}

function sendJson(res: ServerResponse, status: number, body: unknown): void {
  const text = JSON.stringify(body);
  res.writeHead(status, { "content-type": "application/json", "content-length": Buffer.byteLength(text) });
  res.end(text);
}

function readBody(req: IncomingMessage): Promise<Buffer> {
  return new Promise((resolve, reject) => {
    const chunks: Buffer[] = [];
    req.on("data", (chunk: Buffer) => chunks.push(chunk));
    req.once("end", () => resolve(Buffer.concat(chunks)));
    req.once("error", reject);
    req.once("close", () => {
      if (!req.complete) reject(new Error("client closed the connection while sending the body"));
    });
  });
}

function recordHeaders(req: IncomingMessage): Record<string, string> {
  const headers: Record<string, string> = {};
  for (const [name, value] of Object.entries(req.headers)) {
    if (value === undefined) continue;
    const key = name.toLowerCase();
    headers[key] = REDACTED.has(key) ? "[redacted]" : Array.isArray(value) ? value.join(", ") : value;
  }
  return headers;
}

type Decoder = (buffer: Buffer) => Buffer;

// zstd only exists in newer Node releases; look it up rather than import it so Node 20 still loads.
const DECODERS: Record<string, Decoder | undefined> = {
  gzip: zlib.gunzipSync,
  "x-gzip": zlib.gunzipSync,
  deflate: zlib.inflateSync,
  br: zlib.brotliDecompressSync,
  zstd: (zlib as unknown as { zstdDecompressSync?: Decoder }).zstdDecompressSync,
};

function parseBody(raw: Buffer, encoding: string | undefined, say: (line: string) => void): unknown {
  let buffer = raw;
  const coding = encoding?.trim().toLowerCase();
  if (coding && coding !== "identity" && raw.length > 0) {
    const decode = DECODERS[coding];
    if (!decode) {
      say(`cannot decode content-encoding ${coding}; body kept as base64`);
      return raw.toString("base64");
    }
    buffer = decode(raw);
  }
  if (buffer.length === 0) return undefined;
  const text = buffer.toString("utf8");
  try {
    return JSON.parse(text);
  } catch {
    return text;
  }
}
