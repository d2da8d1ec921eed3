import { existsSync } from "node:fs";
import { mkdtemp, rm } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { chromium, type BrowserContext, type Page } from "playwright-core";
import WebSocket from "ws";
import { inspectorCatalog, loadInspector } from "../../src/runtime/inspector.js";
import type { Catalog, FeedCommand, FeedMessage, PageMessage } from "../../inspector/server/protocol.js";

/** Debian's Chromium, installed by .ci/run; never a downloaded browser. */
export const CHROMIUM = "/usr/bin/chromium";

const ARGS = [
  "--headless",
  "--no-sandbox",
  "--disable-gpu",
  "--disable-quic",
  "--no-first-run",
  "--disable-background-networking",
  "--disable-component-update",
  "--disable-sync",
];

/** Generous: the suite must pass on a loaded 2-core machine. These are waits, never assertions on time. */
export const WAIT = { timeout: 25_000 };

export interface Browser {
  context: BrowserContext;
  page: Page;
  /** Console errors and page errors seen so far (a healthy page has none). */
  errors: string[];
  close(): Promise<void>;
}

/** Headless Chromium with a throwaway profile; close() ends the browser process and removes the profile. */
export async function openBrowser(): Promise<Browser> {
  if (!existsSync(CHROMIUM))
    throw new Error(
      `no Chromium at ${CHROMIUM}: install Debian's (apt-get install chromium), or run .ci/run, which does`,
    );
  const profile = await mkdtemp(join(tmpdir(), "tiller-chromium-"));
  const context = await chromium.launchPersistentContext(profile, {
    executablePath: CHROMIUM,
    headless: true,
    args: ARGS,
    viewport: { width: 1500, height: 1000 },
  });
  const page = context.pages()[0] ?? (await context.newPage());
  const errors: string[] = [];
  page.on("console", (m) => {
    if (m.type() === "error") errors.push(m.text());
  });
  page.on("pageerror", (e) => errors.push(e.message));
  return {
    context,
    page,
    errors,
    async close() {
      await context.close().catch(() => undefined);
      await rm(profile, { recursive: true, force: true });
    },
  };
}

let catalog: Catalog | null = null;
/** The catalog the runtime gives the inspector (machines, predicates, degradations). */
export async function testCatalog(): Promise<Catalog> {
  catalog ??= inspectorCatalog(await loadInspector()) as Catalog;
  return catalog;
}

/** A page-side WebSocket client of the server, collecting what it is sent. */
export async function pageClient(url: string): Promise<{
  messages: PageMessage[];
  ws: WebSocket;
  until: <T extends PageMessage>(match: (m: PageMessage) => m is T) => Promise<T>;
  close: () => void;
}> {
  const ws = new WebSocket(url);
  const messages: PageMessage[] = [];
  const waiters: Array<() => void> = [];
  ws.on("message", (data) => {
    messages.push(JSON.parse(data.toString()) as PageMessage);
    for (const w of waiters.splice(0)) w();
  });
  await new Promise<void>((resolve, reject) => {
    ws.once("open", () => resolve());
    ws.once("error", reject);
  });
  const until = <T extends PageMessage>(match: (m: PageMessage) => m is T): Promise<T> =>
    new Promise((resolve) => {
      const check = () => {
        const found = [...messages].reverse().find(match);
        if (found) resolve(found);
        else waiters.push(check);
      };
      check();
    });
  return { messages, ws, until, close: () => ws.terminate() };
}

/** The page's WebSocket address for a server URL (`http://127.0.0.1:PORT/TOKEN/`): `ws://127.0.0.1:PORT/TOKEN/ws`. */
export const pageSocketUrl = (url: string): string => `${url.replace("http://", "ws://")}ws`;

/** The token of a server URL: the first segment of its path. */
export const tokenOf = (url: string): string => new URL(url).pathname.split("/")[1]!;

/**
 * A runtime's side of the feed played by the test: it says hello with the catalog, sends what
 * it is given, and collects the server's commands (answers from the page).
 */
export async function fakeProducer(feedUrl: string): Promise<{
  send: (m: FeedMessage) => void;
  until: (match: (c: FeedCommand) => boolean) => Promise<FeedCommand>;
  close: () => void;
}> {
  const ws = new WebSocket(feedUrl);
  const commands: FeedCommand[] = [];
  const waiters: Array<() => void> = [];
  ws.on("message", (data) => {
    commands.push(JSON.parse(data.toString()) as FeedCommand);
    for (const w of waiters.splice(0)) w();
  });
  await new Promise<void>((resolve, reject) => {
    ws.once("open", () => resolve());
    ws.once("error", reject);
  });
  const send = (m: FeedMessage) => ws.send(JSON.stringify(m));
  send({ kind: "hello", producerId: `fake-${Math.random()}`, dataDir: "/nowhere", catalog: await testCatalog() });
  const until = (match: (c: FeedCommand) => boolean): Promise<FeedCommand> =>
    new Promise((resolve) => {
      const check = () => {
        const found = commands.find(match);
        if (found) resolve(found);
        else waiters.push(check);
      };
      check();
    });
  return { send, until, close: () => ws.terminate() };
}

/** What a WebSocket handshake answers: "open", or the HTTP status it was refused with. */
export function handshake(url: string, origin?: string): Promise<"open" | number> {
  return new Promise((resolve) => {
    const ws = new WebSocket(url, origin ? { origin } : {});
    ws.once("open", () => {
      ws.terminate();
      resolve("open");
    });
    ws.once("unexpected-response", (_req, res) => {
      resolve(res.statusCode ?? 0);
      ws.terminate();
    });
    ws.once("error", () => resolve(0));
  });
}
