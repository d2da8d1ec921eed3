import { readFile } from "node:fs/promises";
import { createServer, type AddressInfo } from "node:net";
import { networkInterfaces } from "node:os";
import { connect } from "node:net";
import { request } from "node:http";
import { describe, expect, it } from "vitest";
import { createScriptedAdapter, createScriptedHostAdapter, keyedScript, type TillerRuntime } from "../../src/index.js";
import * as predicates from "../../src/capabilities/predicates.js";
import { createInspectorFeed } from "../../inspector/server/feed.js";
import { capabilityReads } from "../../inspector/server/graph.js";
import { startInspectorServer } from "../../inspector/server/server.js";
import type { InspectedRuntime, PageMessage } from "../../inspector/server/protocol.js";
import { openTestRuntime } from "../helpers/runtime.js";
import { handshake, pageClient, pageSocketUrl, testCatalog } from "./helpers.js";

type Log = Extract<PageMessage, { kind: "log" }>;
type View = Extract<PageMessage, { kind: "view" }>;
const isLog = (m: PageMessage): m is Log => m.kind === "log";
const viewWith = (test: (v: View) => boolean) => (m: PageMessage): m is View => m.kind === "view" && test(m);

const freePort = () =>
  new Promise<number>((resolve) => {
    const s = createServer().listen(0, "127.0.0.1", () => {
      const { port } = s.address() as AddressInfo;
      s.close(() => resolve(port));
    });
  });

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
    const free = await startInspectorServer();
    try {
      expect(new URL(free.url).hostname).toBe("127.0.0.1");
      expect(free.port).toBeGreaterThan(0);
      // Every other address of this machine is refused (when it has one besides loopback).
      const others = Object.values(networkInterfaces()).flat().filter((i) => i && i.family === "IPv4" && !i.internal).map((i) => i!.address);
      for (const address of others) {
        const outcome = await new Promise<string>((resolve) => {
          const socket = connect({ host: address, port: free.port }, () => {
            socket.destroy();
            resolve("connected");
          });
          socket.once("error", (e: NodeJS.ErrnoException) => resolve(e.code ?? "error"));
        });
        expect(outcome).toBe("ECONNREFUSED");
      }
    } finally {
      await free.close();
    }
    const port = await freePort();
    const chosen = await startInspectorServer({ port });
    try {
      expect(chosen.port).toBe(port);
      expect(chosen.url.startsWith(`http://127.0.0.1:${port}/?token=`)).toBe(true);
    } finally {
      await chosen.close();
    }
  });

  it("refuses every HTTP request and WebSocket handshake without the token", async () => {
    const server = await startInspectorServer();
    try {
      const base = `http://127.0.0.1:${server.port}`;
      const token = new URL(server.url).searchParams.get("token")!;
      expect(token).toMatch(/^[0-9a-f]{32}$/);
      for (const path of ["/", "/app.js", "/style.css", "/vendor/elk.bundled.js", "/?token=wrong", `/?token=${token.slice(0, -1)}`]) {
        expect((await fetch(base + path)).status, path).toBe(401);
      }
      const page = await fetch(server.url);
      expect(page.status).toBe(200);
      expect(await page.text()).toContain("Tiller inspector");
      // The page's own requests carry the token as a cookie scoped to this port.
      const cookie = page.headers.get("set-cookie")!.split(";")[0]!;
      expect(cookie).toBe(`tiller_inspect_${server.port}=${token}`);
      expect((await fetch(`${base}/app.js`, { headers: { cookie } })).status).toBe(200);
      expect((await fetch(`${base}/vendor/elk.bundled.js`, { headers: { cookie } })).status).toBe(200);
      expect((await fetch(`${base}/app.js`, { headers: { cookie: `tiller_inspect_${server.port}=nope` } })).status).toBe(401);
      expect((await fetch(server.url, { method: "POST" })).status).toBe(405);

      // With the token but for another name (DNS rebinding) or from another origin: refused too.
      const status = (headers: Record<string, string>) =>
        new Promise<number>((resolve) => {
          request({ host: "127.0.0.1", port: server.port, path: `/?token=${token}`, headers }, (res) => {
            res.resume();
            resolve(res.statusCode ?? 0);
          }).end();
        });
      expect(await status({})).toBe(200);
      expect(await status({ host: `rebound.example:${server.port}` })).toBe(401);
      expect(await status({ origin: "http://elsewhere.example" })).toBe(401);

      const ws = `ws://127.0.0.1:${server.port}`;
      expect(await handshake(`${ws}/ws`)).toBe(401);
      expect(await handshake(`${ws}/ws?token=wrong`)).toBe(401);
      expect(await handshake(`${ws}/feed`)).toBe(401);
      expect(await handshake(`${ws}/feed?token=${token}x`)).toBe(401);
      expect(await handshake(`${ws}/ws?token=${token}`)).toBe("open");
      expect(await handshake(`${ws}/ws?token=${token}`, "http://elsewhere.example")).toBe(401);
      expect(await handshake(server.feedUrl)).toBe("open");
    } finally {
      await server.close();
    }
  });

  for (const showText of [false, true]) {
    it(`${showText ? "shows text with showText, still masking credentials" : "hides prompts, message text and output by default, and masks credentials"}`, async () => {
      let url = "";
      const { rt, dataDir, cleanup } = await openTestRuntime({ s: createScriptedAdapter({ script }) }, { inspect: { showText, onListening: (u) => (url = u) } });
      try {
        const { threadId } = await rt.createThread({ providerTarget: "s" });
        const { runId } = await rt.sendMessage({ threadId, text: "[talk] tell me a secret" });
        await rt.waitForRun(runId);
        const client = await pageClient(pageSocketUrl(url));
        try {
          await client.until(viewWith((v) => v.tree.some((n) => n.id === threadId && n.children.some((r) => r.status === "completed"))));
          const sent = JSON.stringify(client.messages);
          expect(client.messages.filter(isLog).flatMap((m) => m.records).some((r) => r.event.type === "run.terminal")).toBe(true);
          expect(sent.includes(SECRET_TEXT)).toBe(showText);
          expect(sent.includes("tell me a secret")).toBe(showText);
          expect(sent).not.toContain(CREDENTIAL);
          expect(sent).toContain("x-api-key: [redacted]");
          if (!showText) expect(sent).toContain(`‹hidden: ${SECRET_TEXT.length} chars›`);
        } finally {
          client.close();
        }
        // The token never reaches the event log.
        const token = new URL(url).searchParams.get("token")!;
        expect(await readFile(`${dataDir}/events.jsonl`, "utf8")).not.toContain(token);
      } finally {
        await cleanup();
      }
    });
  }

  it("keeps a runtime's feed across a restart of the server and of the runtime", async () => {
    const port = await freePort();
    const token = "0123456789abcdef0123456789abcdef";
    const catalog = await testCatalog();
    let server = await startInspectorServer({ port, token });
    const feed = createInspectorFeed({ url: server.feedUrl, reconnect: { minMs: 20, maxMs: 200 } });
    const first = await openTestRuntime({ s: createScriptedAdapter({}) }, { inspect: feed.inspect });
    let second: Awaited<ReturnType<typeof openTestRuntime>> | null = null;
    const seen = (threadId: string, runStatus: string) => viewWith((v) => v.tree.some((n) => n.id === threadId && n.children.some((r) => r.status === runStatus)));
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
      second = await openTestRuntime({ s: createScriptedAdapter({}) }, { dataDir: first.dataDir, inspect: feed2.inspect });
      feed2.attach(second.rt as unknown as InspectedRuntime, catalog, ["s"]);
      const next = await second.rt.sendMessage({ threadId, text: "two" });
      await second.rt.waitForRun(next.runId);
      await client.until(viewWith((v) => v.tree.find((n) => n.id === threadId)?.children.filter((r) => r.status === "completed").length === 2));
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
    const { rt, cleanup } = await openTestRuntime({ host: createScriptedHostAdapter({}) }, { inspect: { onListening: (u) => (url = u) } });
    const client = await pageClient(pageSocketUrl(url));
    try {
      const { threadId } = await rt.createThread({ providerTarget: "host" });
      await rt.waitForRun((await rt.sendMessage({ threadId, text: "hello" })).runId);
      const view = await client.until(
        viewWith((v) => v.tree.some((n) => n.id === "target:host" && n.children.some((c) => c.kind === "supervisor" && c.state === "ready") && n.children.some((c) => c.kind === "session"))),
      );
      const target = view.tree.find((n) => n.id === "target:host")!;
      expect(target.children.find((c) => c.kind === "supervisor")).toMatchObject({ machine: "hostSupervisor", label: "host host" });
      expect(target.children.some((c) => c.kind === "session" && c.machine === "session")).toBe(true);
    } finally {
      client.close();
      await cleanup();
    }
  });

  it("leaves the function form of the inspect option as it was: XState inspection events, no server", async () => {
    const types = new Set<string>();
    const { rt, cleanup } = await openTestRuntime({ s: createScriptedAdapter({}) }, { inspect: (e) => types.add(e.type) });
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
    expect(capabilityReads(predicates.canSteerByInterruptRestart)).toEqual(["turns.supportsInterrupt", "turns.supportsSteeringByInterruptRestart"]);
    const { machines, degradations } = await testCatalog();
    expect(Object.keys(machines).sort()).toEqual(["hostSupervisor", "providerThread", "request", "run", "session", "thread"]);
    const steer = machines.run!.transitions.find((t) => t.source === "active" && t.event === "STEER" && t.target === "restarting")!;
    expect(steer).toMatchObject({ guard: "canSteerByInterruptRestart", reads: ["turns.supportsInterrupt", "turns.supportsSteeringByInterruptRestart"] });
    expect(machines.run!.states.map((s) => s.path)).toEqual(expect.arrayContaining(["active.running", "active.waiting", "completed"]));
    expect(degradations.steer_by_interrupt_restart).toMatchObject({ capability: "turns.supportsActiveSteering", outcome: "fallback" });
  });
});
