import { randomBytes, timingSafeEqual } from "node:crypto";
import { readFile } from "node:fs/promises";
import { createServer, type IncomingMessage, type ServerResponse } from "node:http";
import { createRequire } from "node:module";
import type { AddressInfo } from "node:net";
import { existsSync } from "node:fs";
import { dirname, extname, join, normalize } from "node:path";
import { fileURLToPath } from "node:url";
import { WebSocketServer, type WebSocket } from "ws";
import { FEED_LIMITS } from "./feedLimits.js";
import { InspectorHub } from "./hub.js";
import type { Catalog, FeedMessage, LogEntry, PageCommand, PageMessage } from "./protocol.js";

export interface InspectorServerOptions {
  /** 0 (default): a free port. */
  port?: number;
  /**
   * Default: a random 128-bit token. Give one to let a runtime reconnect to a restarted server:
   * at least 16 characters from A-Z a-z 0-9 . _ ~ - (anything else throws).
   */
  token?: string;
  /** Let the page see prompts, message text and command output (credentials stay masked). */
  showText?: boolean;
  /** Replay a recorded log instead of taking a runtime's feed. */
  replay?: { catalog: Catalog; log: LogEntry[] };
}

export interface InspectorServer {
  /** The page's address, token included: the only thing to print. */
  readonly url: string;
  /** ws:// address a runtime's feed connects to, token included. */
  readonly feedUrl: string;
  readonly port: number;
  /** Where the server listens: 127.0.0.1, always. */
  readonly address: AddressInfo;
  readonly hub: InspectorHub;
  close(): Promise<void>;
}

/** Loopback only: the page can answer approvals, so nothing beyond this machine may reach it. */
const HOST = "127.0.0.1";

const TYPES: Record<string, string> = {
  ".html": "text/html; charset=utf-8",
  ".js": "text/javascript; charset=utf-8",
  ".css": "text/css; charset=utf-8",
};

/**
 * The page's folder: beside this module in the source tree, at the package root once compiled to dist/inspector/server.
 */
function pageDir(): string {
  const here = dirname(fileURLToPath(import.meta.url));
  const candidates = [join(here, "..", "page"), join(here, "..", "..", "..", "inspector", "page")];
  const found = candidates.find((dir) => existsSync(join(dir, "index.html")));
  if (!found) throw new Error(`inspector page not found (looked in ${candidates.join(", ")})`);
  return found;
}

const elkBundle = (): string => createRequire(import.meta.url).resolve("elkjs/lib/elk.bundled.js");

/** At least 16 characters, all URL-path safe: the token is the first segment of every path. */
const TOKEN = /^[A-Za-z0-9._~-]{16,}$/;

/** A given token is refused unless it could not be guessed in passing (an empty one would let every request in). */
export function checkInspectorToken(token: string): void {
  if (!TOKEN.test(token))
    throw new Error(
      "inspector token: at least 16 characters from A-Z a-z 0-9 . _ ~ - (it is the first segment of the page's path)",
    );
}

export async function startInspectorServer(options: InspectorServerOptions = {}): Promise<InspectorServer> {
  if (options.token !== undefined) checkInspectorToken(options.token);
  const token = options.token ?? randomBytes(16).toString("hex");
  const wanted = Buffer.from(token);
  const hub = new InspectorHub({
    showText: options.showText ?? false,
    ...(options.replay ? { replay: options.replay } : {}),
  });
  const page = pageDir();
  let port = 0;

  /**
   * Everything lives under /<token>/: the page's own requests are relative to it, so they carry
   * the token without a cookie (cookies are not isolated by port: one would reach every other
   * server on 127.0.0.1) and without a query string. Null: not authorized; else the path below it.
   */
  const authorizedPath = (req: IncomingMessage): string | null => {
    // A page elsewhere that resolves its own name to 127.0.0.1 (DNS rebinding) is not this origin.
    if (req.headers.host !== `${HOST}:${port}` && req.headers.host !== `localhost:${port}`) return null;
    const origin = req.headers.origin;
    if (origin !== undefined && origin !== `http://${HOST}:${port}` && origin !== `http://localhost:${port}`)
      return null;
    const path = new URL(req.url ?? "/", `http://${HOST}`).pathname;
    const match = /^\/([^/]*)(\/.*)?$/.exec(path);
    const given = Buffer.from(match?.[1] ?? "");
    if (!(given.length === wanted.length && timingSafeEqual(given, wanted))) return null;
    return match?.[2] ?? "";
  };

  const serve = async (req: IncomingMessage, res: ServerResponse): Promise<void> => {
    const path = authorizedPath(req);
    if (path === null) {
      res
        .writeHead(401, { "content-type": "text/plain; charset=utf-8" })
        .end("inspector: a valid token is required (use the URL the inspector printed)\n");
      return;
    }
    if (req.method !== "GET") return void res.writeHead(405).end();
    const headers: Record<string, string> = {
      "cache-control": "no-store",
      "x-content-type-options": "nosniff",
      "referrer-policy": "no-referrer",
      // No network beyond this server: scripts, styles and sockets from here only.
      "content-security-policy":
        "default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self' data:; " +
        `connect-src 'self' ws://${HOST}:${port} ws://localhost:${port}; ` +
        "worker-src 'self' blob:; base-uri 'none'; frame-ancestors 'none'",
    };
    let file: string;
    // /<token> without the slash: the page's relative URLs need the directory form.
    if (path === "") return void res.writeHead(308, { ...headers, location: `/${token}/` }).end();
    if (path === "/" || path === "/index.html") file = join(page, "index.html");
    else if (path === "/vendor/elk.bundled.js") file = elkBundle();
    else if (path === "/favicon.ico") return void res.writeHead(204, headers).end();
    else if (/^\/[a-z]+\.(js|css)$/.test(path)) file = normalize(join(page, path));
    else return void res.writeHead(404, headers).end();
    try {
      const body = await readFile(file);
      res.writeHead(200, { ...headers, "content-type": TYPES[extname(file)] ?? "application/octet-stream" }).end(body);
    } catch {
      res.writeHead(404, headers).end();
    }
  };

  const server = createServer(
    (req, res) => void serve(req, res).catch(() => res.headersSent || res.writeHead(500).end()),
  );
  const pages = new WebSocketServer({ noServer: true, maxPayload: 1 << 20 });
  // The feed keeps every message within this (feedLimits.ts): over it, a feed would be dropped and resend in a loop.
  const feeds = new WebSocketServer({ noServer: true, maxPayload: FEED_LIMITS.messageBytes });

  server.on("upgrade", (req, socket, head) => {
    // Node's HTTP server stops watching an upgraded socket: without this, a reset peer is an uncaught error.
    socket.on("error", () => socket.destroy());
    const path = authorizedPath(req);
    const wss = path === "/ws" ? pages : path === "/feed" ? feeds : null;
    if (path === null || !wss) {
      socket.end(
        `HTTP/1.1 ${path === null ? "401 Unauthorized" : "404 Not Found"}\r\n` +
          "connection: close\r\ncontent-length: 0\r\n\r\n",
      );
      return;
    }
    wss.handleUpgrade(req, socket, head, (ws) => wss.emit("connection", ws, req));
  });

  pages.on("connection", (ws: WebSocket) => {
    const client = { send: (m: PageMessage) => ws.readyState === ws.OPEN && ws.send(JSON.stringify(m)) };
    // A bad frame (over maxPayload, invalid UTF-8, unmasked) is that socket's problem only:
    // unheard, its 'error' would be an uncaught exception in the embedding app's process.
    ws.on("error", () => ws.terminate());
    const remove = hub.addPage(client);
    ws.on("message", (data) => {
      const command = parse<PageCommand>(data.toString());
      try {
        if (command) hub.fromPage(client, command);
      } catch {
        // A malformed command is dropped; it must not take the process down.
      }
    });
    ws.on("close", remove);
  });

  feeds.on("connection", (ws: WebSocket) => {
    const producer = { send: (m: unknown) => ws.readyState === ws.OPEN && ws.send(JSON.stringify(m)) };
    ws.on("error", () => ws.terminate());
    ws.on("message", (data) => {
      const message = parse<FeedMessage>(data.toString());
      try {
        if (message) hub.fromFeed(producer, message);
      } catch {
        // A malformed message is dropped; it must not take the process down.
      }
    });
    ws.on("close", () => hub.feedClosed(producer));
  });

  await new Promise<void>((resolve, reject) => {
    server.once("error", reject);
    server.listen(options.port ?? 0, HOST, () => resolve());
  });
  const address = server.address() as AddressInfo;
  port = address.port;

  return {
    url: `http://${HOST}:${port}/${token}/`,
    feedUrl: `ws://${HOST}:${port}/${token}/feed`,
    port,
    address: { address: address.address, family: address.family, port },
    hub,
    async close() {
      hub.close();
      for (const ws of [...pages.clients, ...feeds.clients]) ws.terminate();
      await Promise.all([new Promise((r) => pages.close(r)), new Promise((r) => feeds.close(r))]);
      server.closeAllConnections();
      await new Promise<void>((resolve) => server.close(() => resolve()));
    },
  };
}

function parse<T>(text: string): T | null {
  try {
    const value = JSON.parse(text) as unknown;
    return value && typeof value === "object" && typeof (value as { kind?: unknown }).kind === "string"
      ? (value as T)
      : null;
  } catch {
    return null;
  }
}
