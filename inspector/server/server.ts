import { randomBytes, timingSafeEqual } from "node:crypto";
import { readFile } from "node:fs/promises";
import { createServer, type IncomingMessage, type ServerResponse } from "node:http";
import { createRequire } from "node:module";
import type { AddressInfo } from "node:net";
import { existsSync } from "node:fs";
import { dirname, extname, join, normalize } from "node:path";
import { fileURLToPath } from "node:url";
import { WebSocketServer, type WebSocket } from "ws";
import { InspectorHub } from "./hub.js";
import type { Catalog, FeedMessage, LogEntry, PageCommand, PageMessage } from "./protocol.js";

export interface InspectorServerOptions {
  /** 0 (default): a free port. */
  port?: number;
  /** Default: a random 128-bit token. Give one to let a runtime reconnect to a restarted server. */
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
  readonly hub: InspectorHub;
  close(): Promise<void>;
}

/** Loopback only: the page can answer approvals, so nothing beyond this machine may reach it. */
const HOST = "127.0.0.1";

const TYPES: Record<string, string> = { ".html": "text/html; charset=utf-8", ".js": "text/javascript; charset=utf-8", ".css": "text/css; charset=utf-8" };

/** The page's folder: beside this module in the source tree, at the package root once compiled to dist/inspector/server. */
function pageDir(): string {
  const here = dirname(fileURLToPath(import.meta.url));
  const candidates = [join(here, "..", "page"), join(here, "..", "..", "..", "inspector", "page")];
  const found = candidates.find((dir) => existsSync(join(dir, "index.html")));
  if (!found) throw new Error(`inspector page not found (looked in ${candidates.join(", ")})`);
  return found;
}

const elkBundle = (): string => createRequire(import.meta.url).resolve("elkjs/lib/elk.bundled.js");

export async function startInspectorServer(options: InspectorServerOptions = {}): Promise<InspectorServer> {
  const token = options.token ?? randomBytes(16).toString("hex");
  const hub = new InspectorHub({ showText: options.showText ?? false, ...(options.replay ? { replay: options.replay } : {}) });
  const page = pageDir();
  let cookieName = "tiller_inspect";

  const tokenOf = (req: IncomingMessage): string | null => {
    const url = new URL(req.url ?? "/", `http://${HOST}`);
    const query = url.searchParams.get("token");
    if (query) return query;
    const bearer = /^Bearer (\S+)$/.exec(req.headers.authorization ?? "")?.[1];
    if (bearer) return bearer;
    const cookie = (req.headers.cookie ?? "").split(/;\s*/).find((c) => c.startsWith(`${cookieName}=`));
    return cookie ? cookie.slice(cookieName.length + 1) : null;
  };
  const authorized = (req: IncomingMessage): boolean => {
    // A page elsewhere that resolves its own name to 127.0.0.1 (DNS rebinding) is not this origin.
    if (req.headers.host !== `${HOST}:${port}` && req.headers.host !== `localhost:${port}`) return false;
    const origin = req.headers.origin;
    if (origin !== undefined && origin !== `http://${HOST}:${port}` && origin !== `http://localhost:${port}`) return false;
    const given = Buffer.from(tokenOf(req) ?? "");
    const wanted = Buffer.from(token);
    return given.length === wanted.length && timingSafeEqual(given, wanted);
  };

  const serve = async (req: IncomingMessage, res: ServerResponse): Promise<void> => {
    if (!authorized(req)) {
      res.writeHead(401, { "content-type": "text/plain; charset=utf-8" }).end("inspector: a valid token is required (use the URL the inspector printed)\n");
      return;
    }
    if (req.method !== "GET") return void res.writeHead(405).end();
    const path = new URL(req.url ?? "/", `http://${HOST}`).pathname;
    const headers: Record<string, string> = {
      "cache-control": "no-store",
      "x-content-type-options": "nosniff",
      "referrer-policy": "no-referrer",
      // No network beyond this server: scripts, styles and sockets from here only.
      "content-security-policy": `default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self' data:; connect-src 'self' ws://${HOST}:${port}; worker-src 'self' blob:; base-uri 'none'; frame-ancestors 'none'`,
      // The token travels once in the URL; the page's own requests carry it as a cookie.
      "set-cookie": `${cookieName}=${token}; HttpOnly; SameSite=Strict; Path=/`,
    };
    let file: string;
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

  const server = createServer((req, res) => void serve(req, res).catch(() => res.headersSent || res.writeHead(500).end()));
  const pages = new WebSocketServer({ noServer: true, maxPayload: 1 << 20 });
  const feeds = new WebSocketServer({ noServer: true, maxPayload: 64 << 20 });

  server.on("upgrade", (req, socket, head) => {
    const path = new URL(req.url ?? "/", `http://${HOST}`).pathname;
    const wss = path === "/ws" ? pages : path === "/feed" ? feeds : null;
    if (!authorized(req) || !wss) {
      socket.end(`HTTP/1.1 ${wss ? "401 Unauthorized" : "404 Not Found"}\r\nconnection: close\r\ncontent-length: 0\r\n\r\n`);
      return;
    }
    wss.handleUpgrade(req, socket, head, (ws) => wss.emit("connection", ws, req));
  });

  pages.on("connection", (ws: WebSocket) => {
    const client = { send: (m: PageMessage) => ws.readyState === ws.OPEN && ws.send(JSON.stringify(m)) };
    const remove = hub.addPage(client);
    ws.on("message", (data) => {
      const command = parse<PageCommand>(data.toString());
      if (command) hub.fromPage(client, command);
    });
    ws.on("close", remove);
  });

  feeds.on("connection", (ws: WebSocket) => {
    const producer = { send: (m: unknown) => ws.readyState === ws.OPEN && ws.send(JSON.stringify(m)) };
    ws.on("message", (data) => {
      const message = parse<FeedMessage>(data.toString());
      if (message) hub.fromFeed(producer, message);
    });
    ws.on("close", () => hub.feedClosed(producer));
  });

  await new Promise<void>((resolve, reject) => {
    server.once("error", reject);
    server.listen(options.port ?? 0, HOST, () => resolve());
  });
  const port = (server.address() as AddressInfo).port;
  cookieName = `tiller_inspect_${port}`;

  return {
    url: `http://${HOST}:${port}/?token=${token}`,
    feedUrl: `ws://${HOST}:${port}/feed?token=${token}`,
    port,
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
    return value && typeof value === "object" && typeof (value as { kind?: unknown }).kind === "string" ? (value as T) : null;
  } catch {
    return null;
  }
}
