import { spawn } from "node:child_process";
import { readFile } from "node:fs/promises";
import { createServer, type AddressInfo } from "node:net";
import { networkInterfaces } from "node:os";
import { connect } from "node:net";
import { request } from "node:http";
import { join } from "node:path";
import WebSocket, { WebSocketServer } from "ws";
import { describe, expect, it } from "vitest";
import { createScriptedAdapter, createScriptedHostAdapter, keyedScript, type TillerRuntime } from "../../src/index.js";
import * as predicates from "../../src/capabilities/predicates.js";
import { createInspectorFeed } from "../../inspector/server/feed.js";
import { capabilityReads } from "../../inspector/server/graph.js";
import { startInspectorServer } from "../../inspector/server/server.js";
import type { FeedMessage, InspectedRuntime, PageMessage } from "../../inspector/server/protocol.js";
import { InvalidInputError } from "../../src/domain/errors.js";
import { openTestRuntime } from "../support/runtime.js";
import { fakeProducer, handshake, pageClient, pageSocketUrl, testCatalog, tokenOf, WAIT } from "./helpers.js";

type Log = Extract<PageMessage, { kind: "log" }>;
type View = Extract<PageMessage, { kind: "view" }>;
const isLog = (m: PageMessage): m is Log => m.kind === "log";
const viewWith =
  (test: (v: View) => boolean) =>
  (m: PageMessage): m is View =>
    m.kind === "view" && test(m);

const freePort = () =>
  new Promise<number>((resolve) => {
    const s = createServer().listen(0, "127.0.0.1", () => {
      const { port } = s.address() as AddressInfo;
      s.close(() => resolve(port));
    });
  });

/**
 * The server on a port chosen beforehand (a port that was free a moment ago): another process
 * may take it in between, so a taken port means choosing another one, never a failed test.
 */
async function onChosenPort(): Promise<{ port: number; server: Awaited<ReturnType<typeof startInspectorServer>> }> {
  for (let tries = 1; ; tries++) {
    const port = await freePort();
    try {
      return { port, server: await startInspectorServer({ port }) };
    } catch (error) {
      if ((error as NodeJS.ErrnoException).code !== "EADDRINUSE" || tries >= 20) throw error;
    }
  }
}

const SECRET_TEXT = "the launch codes are in the blue folder";
const CREDENTIAL = "sk-abcdefghijklmnopqrstuvwx";
const script = keyedScript({
  "[talk]": [
    { type: "text", text: SECRET_TEXT },
    { type: "command", command: `curl -H "x-api-key: ${CREDENTIAL}" https://example.invalid`, output: "ok" },
  ],
});

describe("inspector server", () => {
  it("listens on 127.0.0.1 only, on a free port or the one asked for", async () => {
    const refusedAt = (host: string, port: number) =>
      new Promise<string>((resolve) => {
        const socket = connect({ host, port }, () => {
          socket.destroy();
          resolve("connected");
        });
        socket.once("error", (e: NodeJS.ErrnoException) => resolve(e.code ?? "error"));
      });
    const free = await startInspectorServer();
    try {
      expect(new URL(free.url).hostname).toBe("127.0.0.1");
      expect(free.port).toBeGreaterThan(0);
      // Bound to 127.0.0.1 itself, not to every address (0.0.0.0 or ::).
      expect(free.address).toEqual({ address: "127.0.0.1", family: "IPv4", port: free.port });
      expect(await refusedAt("127.0.0.1", free.port)).toBe("connected");
      // Another loopback address (all of 127/8 is loopback on Linux) reaches a wildcard bind, not this one.
      expect(await refusedAt("127.0.0.2", free.port)).toBe("ECONNREFUSED");
      // And so is every other address of this machine, when it has one besides loopback.
      // (IPv6 link-local addresses are left out: they need a scope to be reached at all.)
      const others = Object.values(networkInterfaces())
        .flat()
        .filter((i) => i && !i.internal && !(i.family === "IPv6" && i.scopeid))
        .map((i) => i!.address);
      for (const address of others) expect(await refusedAt(address, free.port), address).toBe("ECONNREFUSED");
    } finally {
      await free.close();
    }
    const { port, server: chosen } = await onChosenPort();
    try {
      expect(chosen.port).toBe(port);
      expect(chosen.url).toMatch(new RegExp(`^http://127\\.0\\.0\\.1:${port}/[0-9a-f]{32}/$`));
    } finally {
      await chosen.close();
    }
  });

  it("refuses every HTTP request and WebSocket handshake without the token, and sets no cookie", async () => {
    const server = await startInspectorServer();
    try {
      const base = `http://127.0.0.1:${server.port}`;
      const token = tokenOf(server.url);
      expect(token).toMatch(/^[0-9a-f]{32}$/);
      expect(server.url).toBe(`${base}/${token}/`);
      const refused = [
        "/",
        "/index.html",
        "/app.js",
        "/style.css",
        "/vendor/elk.bundled.js",
        "/wrong/",
        `/${token.slice(0, -1)}/`,
        `/${token}x/app.js`,
        `/x/${token}/`,
        `/?token=${token}`,
        `/app.js?token=${token}`,
      ];
      for (const path of refused) expect((await fetch(base + path)).status, path).toBe(401);
      // A cookie named as the old one was is no way in either.
      expect(
        (await fetch(`${base}/app.js`, { headers: { cookie: `tiller_inspect_${server.port}=${token}` } })).status,
      ).toBe(401);

      const page = await fetch(server.url);
      expect(page.status).toBe(200);
      expect(page.headers.get("set-cookie")).toBeNull();
      const html = await page.text();
      expect(html).toContain("Tiller inspector");
      // The page's own requests are relative to /<token>/, so they carry it in their path.
      expect(html).not.toMatch(/(src|href)="\//);
      for (const asset of ["app.js", "panels.js", "statechart.js", "style.css", "vendor/elk.bundled.js"]) {
        const response = await fetch(server.url + asset);
        expect(response.status, asset).toBe(200);
        expect(response.headers.get("set-cookie")).toBeNull();
      }
      expect((await fetch(`${base}/${token}`, { redirect: "manual" })).headers.get("location")).toBe(`/${token}/`);
      expect((await fetch(server.url, { method: "POST" })).status).toBe(405);

      // With the token but for another name (DNS rebinding) or from another origin: refused too.
      const status = (headers: Record<string, string>) =>
        new Promise<number>((resolve) => {
          request({ host: "127.0.0.1", port: server.port, path: `/${token}/`, headers }, (res) => {
            res.resume();
            resolve(res.statusCode ?? 0);
          }).end();
        });
      expect(await status({})).toBe(200);
      expect(await status({ host: `rebound.example:${server.port}` })).toBe(401);
      expect(await status({ origin: "http://elsewhere.example" })).toBe(401);

      const ws = `ws://127.0.0.1:${server.port}`;
      expect(await handshake(`${ws}/ws`)).toBe(401);
      expect(await handshake(`${ws}/ws?token=${token}`)).toBe(401);
      expect(await handshake(`${ws}/wrong/ws`)).toBe(401);
      expect(await handshake(`${ws}/feed`)).toBe(401);
      expect(await handshake(`${ws}/${token}x/feed`)).toBe(401);
      expect(await handshake(`${ws}/${token}/nothing`)).toBe(404);
      expect(await handshake(pageSocketUrl(server.url))).toBe("open");
      expect(await handshake(pageSocketUrl(server.url), "http://elsewhere.example")).toBe(401);
      expect(await handshake(server.feedUrl)).toBe("open");
      expect(server.feedUrl).toBe(`${ws}/${token}/feed`);
    } finally {
      await server.close();
    }
  });

  it("refuses an empty or short token, from the server and from the runtime's inspect option", async () => {
    for (const token of ["", "short", "0123456789abcde", "0123456789abcdef/x", "0123456789abcdef?x"]) {
      await expect(startInspectorServer({ token }), JSON.stringify(token)).rejects.toThrow(/at least 16 characters/);
    }
    for (const token of ["", "0123456789abcde"]) {
      const opening = openTestRuntime({ s: createScriptedAdapter({}) }, { inspect: { token } });
      await expect(opening).rejects.toBeInstanceOf(InvalidInputError);
      await expect(opening).rejects.toMatchObject({ code: "invalid_input", field: "inspect.token" });
    }
    // Sixteen characters will do.
    const server = await startInspectorServer({ token: "0123456789abcdef" });
    try {
      expect((await fetch(server.url)).status).toBe(200);
    } finally {
      await server.close();
    }
  });

  it(
    "survives bad frames (too large, invalid UTF-8, unmasked) " +
      "from a client holding the token, and keeps serving the others",
    async () => {
      // In a process of its own: an unheard socket error is an uncaught exception, which ends a process.
      const child = spawn(process.execPath, ["--import", "tsx", join(import.meta.dirname, "fixtures", "serve.ts")], {
        cwd: join(import.meta.dirname, "..", ".."),
        stdio: ["ignore", "pipe", "pipe"],
      });
      let stdout = "";
      let stderr = "";
      child.stdout!.on("data", (d) => (stdout += d));
      child.stderr!.on("data", (d) => (stderr += d));
      const exited = new Promise<number | null>((resolve) => child.once("exit", (code) => resolve(code)));
      // Each step fails at once, saying why, if the server process died meanwhile.
      const died = exited.then((code) => Promise.reject(new Error(`the server process exited (${code}): ${stderr}`)));
      died.catch(() => undefined);
      const alive = <T>(step: Promise<T>): Promise<T> => Promise.race([step, died]);
      try {
        await expect.poll(() => stdout.includes("\n"), WAIT).toBe(true);
        const { url, feedUrl } = JSON.parse(stdout.split("\n")[0]!) as { url: string; feedUrl: string };
        const bystander = await alive(pageClient(pageSocketUrl(url)));
        const closeCode = (ws: WebSocket) =>
          new Promise<number>((resolve) => ws.once("close", (code) => resolve(code)));
        const opened = async (address: string) => {
          const ws = new WebSocket(address);
          ws.on("error", () => undefined);
          await alive(new Promise((resolve) => ws.once("open", resolve)));
          return ws;
        };

        // 2 MB to the page socket, whose limit is 1 MB.
        const big = await opened(pageSocketUrl(url));
        const bigClosed = closeCode(big);
        big.send("x".repeat(2 << 20));
        // ws sends its close code (1009: too big) before the server terminates the socket, unless the socket goes
        // first.
        expect([1009, 1006]).toContain(await alive(bigClosed));

        // A text frame that is not UTF-8, on the feed.
        const garbled = await opened(feedUrl);
        const garbledClosed = closeCode(garbled);
        garbled.send(Buffer.from([0xc3, 0x28, 0xff]), { binary: false });
        expect([1007, 1006]).toContain(await alive(garbledClosed));

        // An unmasked frame (a client must mask), written by hand after a valid handshake.
        const { port, pathname } = new URL(url);
        const raw = connect({ host: "127.0.0.1", port: Number(port) });
        raw.on("error", () => undefined);
        let answer = "";
        raw.on("data", (d) => (answer += d.toString("latin1")));
        raw.write(
          `GET ${pathname}ws HTTP/1.1\r\nHost: 127.0.0.1:${port}\r\nUpgrade: websocket\r\nConnection: Upgrade\r\n` +
            `Sec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==\r\nSec-WebSocket-Version: 13\r\n\r\n`,
        );
        await expect.poll(() => answer.includes("\r\n\r\n"), WAIT).toBe(true);
        expect(answer.startsWith("HTTP/1.1 101")).toBe(true);
        const rawClosed = new Promise((resolve) => raw.once("close", resolve));
        raw.write(Buffer.from([0x81, 0x02, 0x68, 0x69]));
        await alive(rawClosed);

        // The process is alive and serves: HTTP, a new page socket, and the one that was there all along.
        expect(child.exitCode).toBeNull();
        expect((await alive(fetch(url))).status).toBe(200);
        const fresh = await alive(pageClient(pageSocketUrl(url)));
        await fresh.until((m): m is Extract<PageMessage, { kind: "hello" }> => m.kind === "hello");
        fresh.close();
        expect(bystander.ws.readyState).toBe(WebSocket.OPEN);
        const producer = await fakeProducer(feedUrl);
        await bystander.until((m): m is Extract<PageMessage, { kind: "hello" }> => m.kind === "hello" && m.connected);
        producer.close();
        bystander.close();
        expect(child.exitCode).toBeNull();
        expect(stderr).not.toMatch(/Error/);
      } finally {
        child.kill("SIGTERM");
        await exited;
      }
    },
  );

  it(
    "forgets an actor once it finished and its final state was sent: " + "a reconnect resends live actors only",
    async () => {
      // A stand-in server that records what the feed sends on each connection.
      const wss = new WebSocketServer({ port: 0, host: "127.0.0.1" });
      await new Promise((resolve) => wss.once("listening", resolve));
      const connections: Array<{ ws: WebSocket; messages: FeedMessage[] }> = [];
      let arrived: () => void = () => undefined;
      wss.on("connection", (ws) => {
        const connection = { ws, messages: [] as FeedMessage[] };
        connections.push(connection);
        ws.on("message", (d) => {
          connection.messages.push(JSON.parse(d.toString()) as FeedMessage);
          arrived();
        });
      });
      const until = (test: () => boolean) =>
        new Promise<void>((resolve) => {
          const check = () => (test() ? resolve() : void (arrived = check));
          check();
        });
      const feed = createInspectorFeed({
        url: `ws://127.0.0.1:${(wss.address() as AddressInfo).port}/`,
        reconnect: { minMs: 20, maxMs: 200 },
      });
      const approving = keyedScript({
        "[ask]": [
          { type: "command", command: "ls", output: "x", approval: true },
          { type: "text", text: "done" },
        ],
      });
      const { rt, cleanup } = await openTestRuntime(
        { s: createScriptedAdapter({ script: approving }) },
        { inspect: feed.inspect },
      );
      type Actor = Extract<FeedMessage, { kind: "actor" }>;
      const actorsOf = (i: number) => (connections[i]?.messages ?? []).filter((m): m is Actor => m.kind === "actor");
      try {
        feed.attach(rt as unknown as InspectedRuntime, await testCatalog(), ["s"]);
        rt.subscribe({ afterSeq: 0 }, ({ event }) => {
          if (event.type === "request.opened")
            void rt.respond({ requestId: event.requestId, response: { kind: "decision", decision: "accept" } });
        });
        const { threadId } = await rt.createThread({ providerTarget: "s" });
        const runs: string[] = [];
        for (const text of ["[ask] one", "[ask] two"]) {
          const { runId } = await rt.sendMessage({ threadId, text });
          runs.push(runId);
          await rt.waitForRun(runId);
        }
        // The first connection saw each run and each request end (its final state sent).
        await until(() => runs.every((id) => actorsOf(0).some((a) => a.id === id && a.status === "done")));
        await until(() => actorsOf(0).filter((a) => a.machine === "request" && a.status === "done").length === 2);
        const finished = new Set(
          actorsOf(0)
            .filter((a) => a.status !== "active")
            .map((a) => a.id),
        );

        // The connection drops; the feed reconnects and sends its whole picture again.
        connections[0]!.ws.terminate();
        await until(() => (connections[1]?.messages ?? []).some((m) => m.kind === "capabilities"));
        const resent = actorsOf(1);
        expect(resent.some((a) => a.id === threadId && a.machine === "thread")).toBe(true); // still alive: still sent
        expect(resent.some((a) => a.machine === "session")).toBe(true);
        expect(resent.filter((a) => finished.has(a.id))).toEqual([]);
        expect(resent.filter((a) => a.status !== "active")).toEqual([]);
        // The log, which keeps the history, is resent whole: both runs' ends are in it.
        const logged = () => (connections[1]?.messages ?? []).flatMap((m) => (m.kind === "log" ? m.records : []));
        await until(() =>
          runs.every((id) => logged().some((r) => r.event.type === "run.terminal" && r.event.runId === id)),
        );
      } finally {
        feed.close();
        await cleanup();
        await new Promise((resolve) => wss.close(resolve));
      }
    },
  );

  for (const showText of [false, true]) {
    it(
      showText
        ? "shows text with showText, still masking credentials"
        : "hides prompts, message text and output by default, and masks credentials",
      async () => {
        let url = "";
        const { rt, dataDir, cleanup } = await openTestRuntime(
          { s: createScriptedAdapter({ script }) },
          { inspect: { showText, onListening: (u) => (url = u) } },
        );
        try {
          const { threadId } = await rt.createThread({ providerTarget: "s" });
          const { runId } = await rt.sendMessage({ threadId, text: "[talk] tell me a secret" });
          await rt.waitForRun(runId);
          const client = await pageClient(pageSocketUrl(url));
          try {
            await client.until(
              viewWith((v) =>
                v.tree.some((n) => n.id === threadId && n.children.some((r) => r.status === "completed")),
              ),
            );
            const sent = JSON.stringify(client.messages);
            expect(
              client.messages
                .filter(isLog)
                .flatMap((m) => m.records)
                .some((r) => r.event.type === "run.terminal"),
            ).toBe(true);
            expect(sent.includes(SECRET_TEXT)).toBe(showText);
            expect(sent.includes("tell me a secret")).toBe(showText);
            expect(sent).not.toContain(CREDENTIAL);
            expect(sent).toContain("x-api-key: [redacted]");
            if (!showText) expect(sent).toContain(`‹hidden: ${SECRET_TEXT.length} chars›`);
          } finally {
            client.close();
          }
          // The token never reaches the event log.
          const token = tokenOf(url);
          expect(await readFile(`${dataDir}/events.jsonl`, "utf8")).not.toContain(token);
        } finally {
          await cleanup();
        }
      },
    );
  }

  it("keeps a runtime's feed across a restart of the server and of the runtime", async () => {
    const token = "0123456789abcdef0123456789abcdef";
    const catalog = await testCatalog();
    // Port 0 first: the restart below binds the port this server was given.
    let server = await startInspectorServer({ port: 0, token });
    const { port } = server;
    const feed = createInspectorFeed({ url: server.feedUrl, reconnect: { minMs: 20, maxMs: 200 } });
    const first = await openTestRuntime({ s: createScriptedAdapter({}) }, { inspect: feed.inspect });
    let second: Awaited<ReturnType<typeof openTestRuntime>> | null = null;
    const seen = (threadId: string, runStatus: string) =>
      viewWith((v) => v.tree.some((n) => n.id === threadId && n.children.some((r) => r.status === runStatus)));
    try {
      feed.attach(first.rt as unknown as InspectedRuntime, catalog, ["s"]);
      const { threadId } = await first.rt.createThread({ providerTarget: "s" });
      await first.rt.waitForRun((await first.rt.sendMessage({ threadId, text: "one" })).runId);
      let client = await pageClient(pageSocketUrl(server.url));
      await client.until(seen(threadId, "completed"));
      client.close();

      // The server goes away (a clean close) and comes back on the same port and token.
      await server.close();
      server = await startInspectorServer({ port, token });
      client = await pageClient(pageSocketUrl(server.url));
      const view = await client.until(seen(threadId, "completed"));
      expect(view.tree.find((n) => n.id === threadId)!.machine).toBe("thread");
      await client.until((m): m is Extract<PageMessage, { kind: "hello" }> => m.kind === "hello" && m.connected);

      // The runtime goes away and a new one opens the same directory with a new feed.
      await first.rt.close();
      feed.close();
      await client.until((m): m is Extract<PageMessage, { kind: "hello" }> => m.kind === "hello" && !m.connected);
      const feed2 = createInspectorFeed({ url: server.feedUrl });
      second = await openTestRuntime(
        { s: createScriptedAdapter({}) },
        { dataDir: first.dataDir, inspect: feed2.inspect },
      );
      feed2.attach(second.rt as unknown as InspectedRuntime, catalog, ["s"]);
      const next = await second.rt.sendMessage({ threadId, text: "two" });
      await second.rt.waitForRun(next.runId);
      await client.until(
        viewWith(
          (v) => v.tree.find((n) => n.id === threadId)?.children.filter((r) => r.status === "completed").length === 2,
        ),
      );
      client.close();
      await second.rt.close();
      feed2.close();
    } finally {
      feed.close();
      if (second) await second.cleanup();
      else await first.cleanup();
      await server.close();
    }
  });

  it("puts a host process's supervisor under its target in the actor tree, with its state", async () => {
    let url = "";
    const { rt, cleanup } = await openTestRuntime(
      { host: createScriptedHostAdapter({}) },
      { inspect: { onListening: (u) => (url = u) } },
    );
    const client = await pageClient(pageSocketUrl(url));
    try {
      const { threadId } = await rt.createThread({ providerTarget: "host" });
      await rt.waitForRun((await rt.sendMessage({ threadId, text: "hello" })).runId);
      const view = await client.until(
        viewWith((v) =>
          v.tree.some(
            (n) =>
              n.id === "target:host" &&
              n.children.some((c) => c.kind === "supervisor" && c.state === "ready") &&
              n.children.some((c) => c.kind === "session"),
          ),
        ),
      );
      const target = view.tree.find((n) => n.id === "target:host")!;
      expect(target.children.find((c) => c.kind === "supervisor")).toMatchObject({
        machine: "hostSupervisor",
        label: "host host",
      });
      expect(target.children.some((c) => c.kind === "session" && c.machine === "session")).toBe(true);
    } finally {
      client.close();
      await cleanup();
    }
  });

  it("leaves the function form of the inspect option as it was: XState inspection events, no server", async () => {
    const types = new Set<string>();
    const { rt, cleanup } = await openTestRuntime(
      { s: createScriptedAdapter({}) },
      { inspect: (e) => types.add(e.type) },
    );
    try {
      const { threadId } = await rt.createThread({ providerTarget: "s" });
      await rt.waitForRun((await rt.sendMessage({ threadId, text: "hi" })).runId);
      expect(types).toContain("@xstate.actor");
      expect(types).toContain("@xstate.snapshot");
      expect((rt as TillerRuntime).inspectorUrl).toBeNull();
    } finally {
      await cleanup();
    }
  });

  it("draws machines from their definitions, and says which capability each guard reads", async () => {
    expect(capabilityReads(predicates.canSteerNatively)).toEqual(["turns.supportsActiveSteering"]);
    expect(capabilityReads(predicates.canSteerByInterruptRestart)).toEqual([
      "turns.supportsInterrupt",
      "turns.supportsSteeringByInterruptRestart",
    ]);
    const { machines, degradations } = await testCatalog();
    expect(Object.keys(machines).sort()).toEqual([
      "hostSupervisor",
      "providerThread",
      "request",
      "run",
      "session",
      "thread",
    ]);
    const steer = machines.run!.transitions.find(
      (t) => t.source === "active" && t.event === "STEER" && t.target === "restarting",
    )!;
    expect(steer).toMatchObject({
      guard: "canSteerByInterruptRestart",
      reads: ["turns.supportsInterrupt", "turns.supportsSteeringByInterruptRestart"],
    });
    expect(machines.run!.states.map((s) => s.path)).toEqual(
      expect.arrayContaining(["active.running", "active.waiting", "completed"]),
    );
    expect(degradations.steer_by_interrupt_restart).toMatchObject({
      capability: "turns.supportsActiveSteering",
      outcome: "fallback",
    });
  });
});
