import { spawn, type ChildProcess } from "node:child_process";
import { mkdtemp, readFile, rm, stat } from "node:fs/promises";
import { tmpdir } from "node:os";
import { dirname, join } from "node:path";
import { createInterface } from "node:readline";
import { afterEach, beforeEach, describe, expect, it } from "vitest";
import type { ProviderEvent } from "../../src/adapters/contract.js";
import type { DomainEvent } from "../../src/domain/events.js";
import { processStartTime } from "../../src/runtime/hosts/process.js";
import { HostRecordStore, type HostRecord } from "../../src/runtime/hosts/records.js";
import { hostKey } from "../../src/runtime/hosts/hostKey.js";
import { HostRegistry } from "../../src/runtime/hosts/registry.js";
import { killSocketHosts, SocketClient, spawnSocketHost, type SocketHost } from "../adapters/socketHost.js";
import { adoptable } from "./adoptionHelpers.js";
import { alive, hosted, killIfAlive, openFaultRuntime, report, until } from "./helpers.js";

/**
 * Socket hosts outlive the runtime that started them. The runtime is SIGKILLed with a turn
 * waiting on an approval; the next registry on the same data directory adopts the very same
 * host process (its recorded generation, nothing spawned), and the session, reattached, is
 * answered and finishes. A surviving host nobody can adopt is reaped; one nobody connects to
 * exits by itself (scriptedSocketHost.test.ts).
 */

const child = join(import.meta.dirname, "adoptionChild.ts");
let dataDir: string;
/** The crashing runtime's process, killed at the end whatever happened. */
let runtimeProcess: ChildProcess | null = null;

beforeEach(async () => {
  dataDir = await mkdtemp(join(tmpdir(), "tiller-adoption-"));
});

afterEach(async () => {
  if (runtimeProcess?.exitCode === null && runtimeProcess.signalCode === null) runtimeProcess.kill("SIGKILL");
  runtimeProcess = null;
  await killSocketHosts();
  // A host the registry reaped may still be taking its socket directory away as it dies.
  await rm(dataDir, { recursive: true, force: true, maxRetries: 10 });
});

/** Runs adoptionChild.ts until its approval is durable, then SIGKILLs it; resolves with its host's pid. */
async function crashRuntime(): Promise<number> {
  const proc = spawn(process.execPath, ["--import", "tsx", child, dataDir], { stdio: ["ignore", "pipe", "inherit"] });
  runtimeProcess = proc;
  const exited = new Promise<NodeJS.Signals | null>((resolve) => proc.on("exit", (_code, signal) => resolve(signal)));
  let hostPid = 0;
  for await (const line of createInterface({ input: proc.stdout })) {
    const [first, second] = line.split(" ");
    if (first !== "host") continue;
    hostPid = Number(second);
    process.kill(proc.pid!, "SIGKILL");
    break;
  }
  expect(await exited).toBe("SIGKILL");
  return hostPid;
}

async function loggedEvents(): Promise<DomainEvent[]> {
  const text = await readFile(join(dataDir, "events.jsonl"), "utf8");
  return text
    .trim()
    .split("\n")
    .map((line) => (JSON.parse(line) as { event: DomainEvent }).event);
}

function only<T extends DomainEvent["type"]>(events: DomainEvent[], type: T): Extract<DomainEvent, { type: T }> {
  const found = events.filter((e) => e.type === type);
  expect(found).toHaveLength(1);
  return found[0] as Extract<DomainEvent, { type: T }>;
}

const storedHosts = async () =>
  (JSON.parse(await readFile(join(dataDir, "runtimes", "hosts.json"), "utf8")) as { hosts: HostRecord[] }).hosts;

/** Records a running socket host as a previous life of the runtime would have. */
async function recordAsOrphan(host: SocketHost, hostKey: string, generation: number): Promise<void> {
  const records = await HostRecordStore.open(dataDir);
  await records.add({
    hostKey,
    target: hostKey.split(":")[0]!,
    generation,
    pid: host.pid,
    startTime: await processStartTime(host.pid),
    commandLine: "node scripted host",
    startedAt: new Date().toISOString(),
    endpoint: host.endpoint,
  });
}

/** A socket host set up by a client that then went away (as a crashed runtime's host is). */
async function readyHost(): Promise<SocketHost> {
  const host = await spawnSocketHost();
  const client = await SocketClient.connect(host.endpoint);
  await client.call("init", { capabilities: {}, scripts: {} });
  await client.close();
  return host;
}

/** A socket host that was set up, then stopped listening (alive, but refusing every connection). */
/**
 * Stopped by the registry: a clean exit on its SIGTERM, or SIGKILL once the grace ran out (a loaded machine may not
 * let the host wind down in time; either way it is gone, never left running).
 */
const stoppedByRegistry = (exit: { code: number | null; signal: NodeJS.Signals | null }) =>
  exit.code === 0 || exit.signal === "SIGKILL";

async function refusingHost(): Promise<SocketHost> {
  const host = await spawnSocketHost();
  const client = await SocketClient.connect(host.endpoint);
  await client.call("init", { capabilities: {}, scripts: {} });
  await client.call("debug.stopListening", {});
  await client.closed;
  return host;
}

describe("a host that outlives its runtime", () => {
  it("is adopted by the next registry (same process and generation): answered, nothing replayed", async () => {
    let hostPid = 0;
    try {
      hostPid = await crashRuntime();
      expect(alive(hostPid)).toBe(true);

      // What the crashed runtime logged: the session, its thread, the turn and its request.
      const log = await loggedEvents();
      const { sessionId, hostGeneration } = only(log, "session.started");
      const bound = only(log, "provider_thread.bound");
      const { cwd } = only(log, "thread.created");
      const { nativeTurnRef: turnRef } = only(log, "attempt.turn_bound");
      const { nativeRef: requestRef } = only(log, "request.opened");

      // Stored files: the endpoint, never a token; the socket's directory is private.
      const [stored] = await storedHosts();
      expect(stored).toMatchObject({ pid: hostPid, generation: hostGeneration, endpoint: expect.any(String) });
      expect(await readFile(join(dataDir, "runtimes", "hosts.json"), "utf8")).not.toMatch(/token/i);
      expect((await stat(dirname(stored!.endpoint!))).mode & 0o777).toBe(0o700);
      expect((await stat(stored!.endpoint!)).mode & 0o777).toBe(0o600);

      const t0 = performance.now();
      const { registry, reaped, adoptable: kept } = await HostRegistry.open(dataDir);
      const adapter = adoptable();
      try {
        expect(reaped).toEqual([]);
        expect(kept.map((r) => r.pid)).toEqual([hostPid]);
        adapter.bindHosts!(registry, "s");
        const events = adapter.streamEvents()[Symbol.asyncIterator]();

        const reattached = await adapter.reattachSession!({ sessionId });
        report("runtime SIGKILL -> host adopted, session reattached", performance.now() - t0);
        expect(reattached).toEqual({
          sessionId,
          capabilities: adapter.getCapabilities(),
          hostGeneration,
          turns: [{ threadRef: bound.nativeThreadRef, turnRef, pendingRequests: [{ requestRef, ordinal: 1 }] }],
        });
        // The very process, and nothing spawned: one host under this key, one record.
        expect(adapter.hostPid(sessionId)).toBe(hostPid);
        const key = await hostKey(adapter.hostSpec);
        expect(key).toBe(stored!.hostKey);
        expect(registry.pids(key)).toEqual([hostPid]);
        expect((await storedHosts()).map((h) => [h.pid, h.generation])).toEqual([[hostPid, hostGeneration]]);

        // A dropped connection after the adoption re-reads from the adopted cursor: nothing older is replayed.
        const lease = await registry.acquire(adapter.hostSpec);
        const reconnected = lease.channel.nextNotification("host.ready");
        await adapter.debug("debug.dropConnections");
        await reconnected;
        lease.release();

        await adapter.respondToRequest({
          sessionId,
          thread: { threadRef: bound.nativeThreadRef, resumeCursor: bound.resumeCursor, cwd },
          request: { requestRef, turnRef, ordinal: 1 },
          response: { kind: "decision", decision: "accept" },
        });
        const seen: ProviderEvent[] = [];
        for (let next = await events.next(); !next.done; next = await events.next()) {
          expect(next.value.sessionId).toBe(sessionId);
          seen.push(next.value.event);
          if (next.value.event.type === "turn.terminal") break;
        }
        // Only what happened after the reattach: nothing the crashed runtime already logged comes again.
        expect(seen[0]).toMatchObject({ type: "request.resolved", requestRef });
        expect(seen.filter((e) => e.type === "request.opened" || e.type === "turn.started")).toEqual([]);
        expect(seen.at(-1)).toMatchObject({ type: "turn.terminal", status: "completed", turnRef });
        await adapter.stopSession({ sessionId });
      } finally {
        await adapter.close();
        await registry.close();
      }
      // An adopted host is stopped like a spawned one when its registry closes.
      expect(alive(hostPid)).toBe(false);
    } finally {
      killIfAlive(hostPid);
    }
  });

  it("is adopted under its recorded generation and supervised: its death is a loss, then a fresh start", async () => {
    const host = await readyHost();
    const spec = hosted({ transport: "socket", policy: { backoffMs: [10] } }).hostSpec;
    await recordAsOrphan(host, await hostKey(spec), 7);
    const { registry } = await HostRegistry.open(dataDir);
    try {
      const adopted = await registry.acquire(spec);
      expect([adopted.pid, adopted.generation]).toEqual([host.pid, 7]);
      await adopted.channel.call("openGate", { name: "anything" });
      const lost = new Promise<string>((resolve) => adopted.onLost(resolve));
      process.kill(host.pid, "SIGKILL");
      expect(await lost).toMatch(/host (process exited|connection failed)/);
      const fresh = await registry.acquire(spec);
      expect(fresh.pid).not.toBe(host.pid);
      expect(fresh.generation).toBe(8);
      fresh.release();
    } finally {
      await registry.close();
    }
  });

  it("once adopted, is released like a spawned host when its idle TTL runs out", async () => {
    const host = await readyHost();
    const spec = hosted({ transport: "socket", policy: { idleTtlMs: 50 } }).hostSpec;
    await recordAsOrphan(host, await hostKey(spec), 1);
    const { registry } = await HostRegistry.open(dataDir);
    try {
      const adopted = await registry.acquire(spec);
      expect(adopted.pid).toBe(host.pid);
      adopted.release();
      expect(stoppedByRegistry(await host.exited)).toBe(true);
      await until(
        "the supervisor to be idle",
        () => registry.pids(registry.supervisors.keys().next().value!).length === 0,
      );
    } finally {
      await registry.close();
    }
  });

  it("that refuses the connection is reaped, and a fresh host spawned under the next generation", async () => {
    const host = await refusingHost();
    const spec = hosted({ transport: "socket" }).hostSpec;
    await recordAsOrphan(host, await hostKey(spec), 4);
    const { registry, adoptable: kept } = await HostRegistry.open(dataDir);
    try {
      expect(kept.map((r) => r.pid)).toEqual([host.pid]);
      const lease = await registry.acquire(spec);
      expect(stoppedByRegistry(await host.exited)).toBe(true);
      expect(lease.pid).not.toBe(host.pid);
      expect(lease.generation).toBe(5);
      await lease.channel.call("openGate", { name: "anything" });
      expect((await storedHosts()).map((h) => [h.pid, h.generation])).toEqual([[lease.pid, 5]]);
      lease.release();
    } finally {
      await registry.close();
    }
  });

  it("whose host key no acquire matches is reaped once the adoption TTL runs out", async () => {
    const host = await spawnSocketHost();
    await recordAsOrphan(host, "scripted:0000000000000000", 1);
    const { registry, adoptable: kept } = await HostRegistry.open(dataDir, undefined, { adoptionTtlMs: 100 });
    try {
      expect(kept.map((r) => r.pid)).toEqual([host.pid]);
      const lease = await registry.acquire(hosted({ transport: "socket" }).hostSpec);
      expect(lease.pid).not.toBe(host.pid);
      expect(stoppedByRegistry(await host.exited)).toBe(true);
      expect(registry.adoptablePids).toEqual([]);
      lease.release();
    } finally {
      await registry.close();
    }
  });

  it("nobody claimed is reaped when the registry closes", async () => {
    const host = await spawnSocketHost();
    await recordAsOrphan(host, "scripted:0000000000000000", 1);
    const { registry, adoptable: kept } = await HostRegistry.open(dataDir);
    expect(kept.map((r) => r.pid)).toEqual([host.pid]);
    await registry.close();
    expect(stoppedByRegistry(await host.exited)).toBe(true);
    expect(await storedHosts()).toEqual([]);
  });
});

describe("socket hosts within one runtime", () => {
  it("reconnect after a dropped connection and replay what happened meanwhile", async () => {
    const scripts = {
      "[slow]": [
        { type: "text" as const, text: "before" },
        { type: "gate" as const, name: "dropped" },
        { type: "text" as const, text: " after" },
      ],
    };
    const adapter = hosted({ transport: "socket", scripts, reconnect: { attempts: 3, backoffMs: [200] } });
    const { rt, cleanup } = await openFaultRuntime({ s: adapter }, { dataDir });
    try {
      const { threadId } = await rt.createThread({ providerTarget: "s" });
      const { runId } = await rt.sendMessage({ threadId, text: "[slow] go" });
      await until("the first text", () => rt.views.runs.get(runId)!.items.some((i) => i.kind === "assistant_message"));
      const [sessionId] = rt.views.sessions.keys();
      const pid = adapter.hostPid(sessionId!);
      await adapter.debug("debug.dropConnections", { thenOpenGate: "dropped" });
      const run = await rt.waitForRun(runId);
      expect(run.status).toBe("completed");
      const text = run.items.filter((i) => i.kind === "assistant_message").map((i) => i.text);
      expect(text.join("")).toBe("before after");
      expect(adapter.hostPid(sessionId!)).toBe(pid);
    } finally {
      await cleanup();
    }
  });
});
