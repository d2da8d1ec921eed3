import { spawn, type ChildProcess } from "node:child_process";
import { randomBytes } from "node:crypto";
import { createInterface } from "node:readline";
import { fileURLToPath } from "node:url";
import { afterEach, describe, expect, it } from "vitest";
import { WebSocket } from "ws";
import type { ProviderEvent, ProviderThreadHandle } from "../../src/adapters/contract.js";
import {
  EventParamsSchema,
  HOST_PROTOCOL_VERSION,
  ResumeResultSchema,
} from "../../src/adapters/scripted/protocol/host.js";
import type { ScriptStep } from "../../src/adapters/scripted/host/script.js";
import { TillerError } from "../../src/domain/errors.js";
import { parseMessage, request, toError, type RpcMessage } from "../../src/adapters/kit/jsonRpc.js";

/* Real host processes, driven over their real transports; every wait is on a message. */

const ROOT = fileURLToPath(new URL("../..", import.meta.url));
const MAIN = fileURLToPath(new URL("../../src/adapters/scripted/host/main.ts", import.meta.url));
const TOKEN = randomBytes(16).toString("hex");
const CWD = ROOT;

const SCRIPTS: Record<string, ScriptStep[]> = {
  "[approve]": [{ type: "command", command: "ls", output: "x", approval: true }],
  "[gate]": [
    { type: "text", text: "before" },
    { type: "gate", name: "g" },
    { type: "text", text: "after" },
  ],
};

interface HostEvent {
  seq: number;
  sessionId: string;
  event: ProviderEvent;
}

/** A JSON-RPC client over any line/frame transport; records everything the host sends. */
class Peer {
  readonly messages: RpcMessage[] = [];
  #waiters: { test: (m: RpcMessage) => boolean; resolve: (m: RpcMessage) => void; reject: (e: Error) => void }[] = [];
  #nextId = 1;
  #closed: Error | null = null;

  constructor(private readonly write: (text: string) => void) {}

  feed(text: string): void {
    const message = parseMessage(text);
    if (!message) throw new Error(`host sent a non-JSON-RPC message: ${text}`);
    this.messages.push(message);
    for (const waiter of [...this.#waiters]) {
      if (!waiter.test(message)) continue;
      this.#waiters.splice(this.#waiters.indexOf(waiter), 1);
      waiter.resolve(message);
    }
  }

  close(reason: string): void {
    this.#closed = new Error(reason);
    for (const waiter of this.#waiters.splice(0)) waiter.reject(this.#closed);
  }

  waitFor(test: (m: RpcMessage) => boolean): Promise<RpcMessage> {
    const found = this.messages.find(test);
    if (found) return Promise.resolve(found);
    if (this.#closed) return Promise.reject(this.#closed);
    return new Promise((resolve, reject) => this.#waiters.push({ test, resolve, reject }));
  }

  /** The raw response to a call. */
  async callRaw(method: string, params?: unknown): Promise<RpcMessage> {
    const id = this.#nextId++;
    const response = this.waitFor((m) => "id" in m && m.id === id && !("method" in m));
    this.write(JSON.stringify(request(id, method, params)));
    return response;
  }

  async call<T = unknown>(method: string, params?: unknown): Promise<T> {
    const response = await this.callRaw(method, params);
    if ("error" in response) throw toError(response.error);
    return (response as { result: T }).result;
  }

  events(): HostEvent[] {
    return this.messages.flatMap((m) =>
      "method" in m && m.method === "event" ? [EventParamsSchema.parse(m.params) as HostEvent] : [],
    );
  }

  async waitEvent(test: (e: HostEvent) => boolean): Promise<HostEvent> {
    const message = await this.waitFor(
      (m) => "method" in m && m.method === "event" && test(EventParamsSchema.parse(m.params) as HostEvent),
    );
    return EventParamsSchema.parse((message as { params: unknown }).params) as HostEvent;
  }

  ready(): Promise<RpcMessage> {
    return this.waitFor((m) => "method" in m && m.method === "host.ready");
  }
}

interface Host {
  child: ChildProcess;
  exited: Promise<{ code: number | null; signal: NodeJS.Signals | null }>;
  stdoutLines: string[];
  /** Resolves with the next stdout line from now (or an already-seen one matching). */
  line(test: (line: string) => boolean): Promise<string>;
  /** Resolves once stderr (diagnostics) contains `text`. */
  stderrIncludes(text: string): Promise<void>;
}

const children = new Set<ChildProcess>();

function spawnHost(flags: string[]): Host {
  const child = spawn(process.execPath, ["--import", "tsx", MAIN, ...flags], {
    cwd: ROOT,
    env: { ...process.env, TILLER_HOST_TOKEN: TOKEN },
    stdio: ["pipe", "pipe", "pipe"],
  });
  children.add(child);
  const stdoutLines: string[] = [];
  const waiters: { test: (line: string) => boolean; resolve: (line: string) => void }[] = [];
  createInterface({ input: child.stdout! }).on("line", (line) => {
    stdoutLines.push(line);
    for (const w of waiters.splice(0)) w.test(line) ? w.resolve(line) : waiters.push(w);
  });
  let stderr = "";
  const stderrWaiters: { text: string; resolve: () => void }[] = [];
  child.stderr!.on("data", (chunk: Buffer) => {
    process.stderr.write(chunk);
    stderr += chunk.toString();
    for (const w of stderrWaiters.splice(0)) stderr.includes(w.text) ? w.resolve() : stderrWaiters.push(w);
  });
  const exited = new Promise<{ code: number | null; signal: NodeJS.Signals | null }>((resolve) =>
    child.once("exit", (code, signal) => resolve({ code, signal })),
  );
  const line = (test: (l: string) => boolean) => {
    const seen = stdoutLines.find(test);
    return seen !== undefined
      ? Promise.resolve(seen)
      : new Promise<string>((resolve) => waiters.push({ test, resolve }));
  };
  const stderrIncludes = (text: string) =>
    stderr.includes(text) ? Promise.resolve() : new Promise<void>((resolve) => stderrWaiters.push({ text, resolve }));
  return { child, exited, stdoutLines, line, stderrIncludes };
}

afterEach(async () => {
  for (const child of children) {
    if (child.exitCode !== null || child.signalCode !== null) continue;
    const exited = new Promise((resolve) => child.once("exit", resolve));
    child.kill("SIGTERM");
    const fallback = setTimeout(() => child.kill("SIGKILL"), 5_000);
    await exited;
    clearTimeout(fallback);
  }
  children.clear();
});

function stdioPeer(host: Host): Peer {
  const peer = new Peer((text) => host.child.stdin!.write(`${text}\n`));
  createInterface({ input: host.child.stdout! }).on("line", (line) => peer.feed(line));
  void host.exited.then(() => peer.close("host exited"));
  return peer;
}

async function wsPeer(port: number): Promise<{ peer: Peer; socket: WebSocket }> {
  const socket = new WebSocket(`ws://127.0.0.1:${port}/?token=${TOKEN}`);
  const peer = new Peer((text) => socket.send(text));
  socket.on("message", (data) => peer.feed(String(data)));
  socket.on("close", () => peer.close("socket closed"));
  await new Promise<void>((resolve, reject) => {
    socket.once("open", () => resolve());
    socket.once("error", reject);
  });
  return { peer, socket };
}

/** Resolves with the error a connection attempt ends with (rejects if it opens). */
function refusal(url: string): Promise<Error> {
  return new Promise((resolve, reject) => {
    const socket = new WebSocket(url);
    socket.once("open", () => {
      socket.terminate();
      reject(new Error("connection unexpectedly accepted"));
    });
    socket.once("error", resolve);
  });
}

async function startThread(peer: Peer, sessionId: string): Promise<ProviderThreadHandle> {
  await peer.call("startSession", { sessionId, cwd: CWD, model: null });
  return peer.call<ProviderThreadHandle>("ensureProviderThread", { sessionId, cwd: CWD });
}

const sendRun = (peer: Peer, sessionId: string, thread: ProviderThreadHandle, text: string) =>
  peer.call<{ turnRef: string | null }>("sendRun", { sessionId, thread, text, context: null, model: null });

const isTerminal = (turnRef: string | null) => (e: HostEvent) =>
  e.event.type === "turn.terminal" && e.event.turnRef === turnRef;

async function listeningPort(host: Host): Promise<number> {
  const line = await host.line((l) => l.includes("listening"));
  return (JSON.parse(line) as { listening: { port: number } }).listening.port;
}

describe("scripted host over stdio", () => {
  it("relays calls, events, requests, gates and typed errors", async () => {
    const host = spawnHost([]);
    const peer = stdioPeer(host);
    const ready = await peer.ready();
    expect(ready).toMatchObject({ params: { pid: host.child.pid, protocol: HOST_PROTOCOL_VERSION } });
    await expect(peer.call("startSession", { sessionId: "s1", cwd: CWD, model: null })).rejects.toMatchObject({
      code: "protocol_error",
    });

    expect(await peer.call("init", { capabilities: {}, scripts: SCRIPTS, chunkDelayMs: 0 })).toBeNull();
    const unknown = await peer.callRaw("noSuchMethod", {});
    expect(unknown).toMatchObject({ error: { code: -32601 } });
    const thread = await startThread(peer, "s1");
    expect(thread.resumeCursor).toEqual(expect.any(String));

    // An echoed turn: started, streamed, terminal, every event numbered in order.
    const { turnRef } = await sendRun(peer, "s1", thread, "hello");
    const terminal = await peer.waitEvent(isTerminal(turnRef));
    expect(terminal.event).toMatchObject({ status: "completed", threadRef: thread.threadRef });
    const turn = peer.events().filter((e) => "turnRef" in e.event && e.event.turnRef === turnRef);
    expect(turn[0]?.event.type).toBe("turn.started");
    const text = turn
      .flatMap((e) => (e.event.type === "item.delta" && e.event.kind === "assistant_message" ? [e.event.delta] : []))
      .join("");
    expect(text).toBe("You said: hello");
    const seqs = peer.events().map((e) => e.seq);
    expect(seqs).toEqual(seqs.map((_, i) => i + 1));
    expect(peer.events().every((e) => e.sessionId === "s1")).toBe(true);

    // An approval: the request opens, respondToRequest resolves it, the turn completes.
    const approval = await sendRun(peer, "s1", thread, "please [approve]");
    const opened = await peer.waitEvent(
      (e) => e.event.type === "request.opened" && e.event.turnRef === approval.turnRef,
    );
    const requestRef = opened.event.type === "request.opened" ? (opened.event.requestRef ?? null) : null;
    await peer.call("respondToRequest", {
      sessionId: "s1",
      thread,
      request: { requestRef, turnRef: approval.turnRef, ordinal: 1 },
      response: { kind: "decision", decision: "accept" },
    });
    await peer.waitEvent((e) => e.event.type === "request.resolved" && e.event.requestRef === requestRef);
    expect((await peer.waitEvent(isTerminal(approval.turnRef))).event).toMatchObject({ status: "completed" });

    // A gate holds the turn (in flight, says resume) until openGate.
    const gated = await sendRun(peer, "s1", thread, "[gate]");
    await peer.waitEvent((e) => e.event.type === "item.completed" && e.event.turnRef === gated.turnRef);
    const lastSeq = peer.events().at(-1)!.seq;
    const state = ResumeResultSchema.parse(await peer.call("resume", { afterSeq: lastSeq }));
    expect(state).toEqual({ replayed: 0, sessions: [{ sessionId: "s1", activeThreads: [thread.resumeCursor] }] });
    expect(peer.events().some(isTerminal(gated.turnRef))).toBe(false);
    expect(await peer.call("openGate", { name: "g" })).toBeNull();
    await peer.waitEvent(isTerminal(gated.turnRef));
    const after = ResumeResultSchema.parse(await peer.call("resume", { afterSeq: peer.events().at(-1)!.seq }));
    expect(after.sessions).toEqual([{ sessionId: "s1", activeThreads: [] }]);

    // Typed errors keep their Tiller code.
    const failed = await peer.callRaw("ensureProviderThread", {
      sessionId: "s1",
      cwd: CWD,
      resume: { cursor: "no-such-cursor" },
    });
    expect(failed).toMatchObject({ error: { data: { tillerCode: "resume_failed" } } });
    expect(host.stdoutLines.every((l) => parseMessage(l) !== null)).toBe(true);
  });

  it("refuses absent optional methods and debug hooks, and exits 0 when stdin ends", async () => {
    const host = spawnHost([]);
    const peer = stdioPeer(host);
    await peer.ready();
    await expect(peer.call("init", { capabilities: {}, scripts: {}, bogus: 1 })).rejects.toMatchObject({
      code: "invalid_input",
    });
    await peer.call("init", { capabilities: { turns: { supportsActiveSteering: false } }, scripts: {} });
    await expect(peer.call("init", { capabilities: {}, scripts: {} })).rejects.toMatchObject({ code: "conflict" });
    const thread = await startThread(peer, "s1");
    const steer = peer.call("steerRun", { sessionId: "s1", thread, turnRef: null, text: "x" });
    await expect(steer).rejects.toBeInstanceOf(TillerError);
    await expect(steer).rejects.toMatchObject({ code: "capability_unsupported" });
    await expect(peer.call("debug.dropConnections")).rejects.toMatchObject({ code: "protocol_error" });
    await expect(peer.call("debug.stopListening")).rejects.toMatchObject({ code: "protocol_error" });

    host.child.stdin!.end();
    expect(await host.exited).toEqual({ code: 0, signal: null });
    expect(peer.events().at(-1)?.event).toMatchObject({ type: "session.state", state: "stopped" });
  });

  it("--linger-ms delays the exit after closing", async () => {
    const host = spawnHost(["--linger-ms=600000"]);
    const peer = stdioPeer(host);
    await peer.ready();
    host.child.stdin!.end();
    await host.stderrIncludes("lingering 600000ms");
    expect(host.child.exitCode).toBeNull();
    host.child.kill("SIGKILL"); // still lingering: only SIGKILL ends it now
    expect(await host.exited).toEqual({ code: null, signal: "SIGKILL" });
  });

  it("--never-ready sends nothing, even when asked", async () => {
    const host = spawnHost(["--never-ready"]);
    host.child.stdin!.write(`${JSON.stringify(request(1, "init", { capabilities: {}, scripts: {} }))}\n`);
    host.child.stdin!.end();
    expect(await host.exited).toEqual({ code: 0, signal: null });
    expect(host.stdoutLines).toEqual([]);
  });
});

describe("scripted host over a websocket", () => {
  it("requires the token, and greets every connection", async () => {
    const host = spawnHost(["--websocket"]);
    const port = await listeningPort(host);
    expect(host.stdoutLines).toEqual([JSON.stringify({ listening: { port } })]);
    expect((await refusal(`ws://127.0.0.1:${port}/`)).message).toContain("401");
    expect((await refusal(`ws://127.0.0.1:${port}/?token=wrong`)).message).toContain("401");
    const { peer } = await wsPeer(port);
    expect(await peer.ready()).toMatchObject({ params: { pid: host.child.pid, protocol: HOST_PROTOCOL_VERSION } });
    await peer.call("init", { capabilities: {}, scripts: {} });
    const thread = await startThread(peer, "s1");
    const { turnRef } = await sendRun(peer, "s1", thread, "hi");
    await peer.waitEvent(isTerminal(turnRef));
    expect(host.stdoutLines.join("\n")).not.toContain(TOKEN);
  });

  it("replays the events missed while disconnected and reports in-flight threads", async () => {
    const host = spawnHost(["--websocket"]);
    const port = await listeningPort(host);
    const first = await wsPeer(port);
    await first.peer.ready();
    await first.peer.call("init", { capabilities: {}, scripts: SCRIPTS });
    const done = await startThread(first.peer, "s1");
    const gatedThread = await first.peer.call<ProviderThreadHandle>("ensureProviderThread", {
      sessionId: "s1",
      cwd: CWD,
    });
    const gated = await sendRun(first.peer, "s1", gatedThread, "[gate]");
    await first.peer.waitEvent((e) => e.event.type === "item.completed" && e.event.turnRef === gated.turnRef);
    const seen = first.peer.events().at(-1)!.seq;

    const dropped = new Promise((resolve) => first.socket.once("close", resolve));
    expect(await first.peer.call("debug.dropConnections")).toBeNull();
    await dropped;

    // While nobody listens: a whole turn on one thread (driven from a second client that
    // stays unsynced), then the gated turn released.
    const second = await wsPeer(port);
    await second.peer.ready();
    const echoed = await sendRun(second.peer, "s1", done, "while away");
    const secondDropped = new Promise((resolve) => second.socket.once("close", resolve));
    await second.peer.call("debug.dropConnections");
    await secondDropped;
    expect(second.peer.events()).toEqual([]); // not resumed: no live events

    const third = await wsPeer(port);
    await third.peer.ready();
    const midway = ResumeResultSchema.parse(await third.peer.call("resume", { afterSeq: seen }));
    expect(midway.sessions).toHaveLength(1);
    expect(midway.sessions[0]?.activeThreads).toContain(gatedThread.resumeCursor);
    const replayed = third.peer.events();
    expect(replayed).toHaveLength(midway.replayed);
    expect(replayed.map((e) => e.seq)).toEqual(replayed.map((_, i) => seen + 1 + i));
    expect(third.peer.messages.at(-1)).toMatchObject({ result: midway }); // replay before the response

    await third.peer.waitEvent(isTerminal(echoed.turnRef)); // live or replayed, it arrives
    await third.peer.call("openGate", { name: "g" });
    await third.peer.waitEvent(isTerminal(gated.turnRef));
    const seqs = third.peer.events().map((e) => e.seq);
    expect(seqs).toEqual(seqs.map((_, i) => seen + 1 + i)); // no gap, no duplicate
    const settled = ResumeResultSchema.parse(await third.peer.call("resume", { afterSeq: seqs.at(-1)! }));
    expect(settled).toEqual({ replayed: 0, sessions: [{ sessionId: "s1", activeThreads: [] }] });

    // Events produced with no client at all are kept for the next resume.
    const lastSeen = seqs.at(-1)!;
    const thirdDropped = new Promise((resolve) => third.socket.once("close", resolve));
    await third.peer.call("debug.dropConnections");
    await thirdDropped;
    const fourth = await wsPeer(port);
    await fourth.peer.ready();
    await fourth.peer.call("stopSession", { sessionId: "s1" });
    const final = ResumeResultSchema.parse(await fourth.peer.call("resume", { afterSeq: lastSeen }));
    expect(final).toEqual({ replayed: 1, sessions: [] });
    expect(fourth.peer.events()).toMatchObject([
      { seq: lastSeen + 1, event: { type: "session.state", state: "stopped" } },
    ]);
  });

  it("stops listening on request but stays alive", async () => {
    const host = spawnHost(["--websocket"]);
    const port = await listeningPort(host);
    const { peer, socket } = await wsPeer(port);
    await peer.ready();
    const closed = new Promise((resolve) => socket.once("close", resolve));
    expect(await peer.call("debug.stopListening")).toBeNull();
    await closed;
    const error = await refusal(`ws://127.0.0.1:${port}/?token=${TOKEN}`);
    expect(error.message).toMatch(/ECONNREFUSED|ECONNRESET/);
    expect(host.child.exitCode).toBeNull();
    expect(host.child.signalCode).toBeNull();
    host.child.kill("SIGTERM");
    expect(await host.exited).toEqual({ code: 0, signal: null });
  });

  it("--never-ready does not even listen", async () => {
    const host = spawnHost(["--websocket", "--never-ready"]);
    await host.stderrIncludes("never be ready");
    host.child.kill("SIGTERM");
    expect(await host.exited).toEqual({ code: 0, signal: null });
    expect(host.stdoutLines).toEqual([]);
  });
});
