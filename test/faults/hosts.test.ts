import { readFile } from "node:fs/promises";
import { join } from "node:path";
import { describe, expect, it } from "vitest";
import { alive, hosted, killIfAlive, openFaultRuntime, report, until } from "./helpers.js";
import type { Runtime } from "../../src/runtime/runtime.js";
import type { ScriptedHostAdapter } from "../../src/adapters/scripted/adapter.js";

/**
 * Host processes under the runtime, for real: the scripted provider runs in child processes
 * (stdio JSON-RPC or a loopback WebSocket) that the tests kill, starve or disconnect.
 */

const records = async (dataDir: string) =>
  (JSON.parse(await readFile(join(dataDir, "runtimes", "hosts.json"), "utf8")) as { hosts: Array<{ pid: number }> })
    .hosts;
const startedSessions = (rt: Runtime) => [...rt.views.sessions.keys()];
const pidsOf = (adapter: ScriptedHostAdapter, rt: Runtime) =>
  startedSessions(rt)
    .map((id) => adapter.hostPid(id))
    .filter((p): p is number => p !== null);

async function waitingRequest(rt: Runtime, threadId: string) {
  await until("an approval", () => rt.views.pendingRequests(threadId).length === 1);
  return rt.views.pendingRequests(threadId)[0]!;
}

describe("host reuse and separation", () => {
  it("two sessions on one target share one host process", async () => {
    const adapter = hosted({ capabilities: { sessions: { supportsMultipleProviderThreadsPerSession: false } } });
    const { rt, dataDir, cleanup } = await openFaultRuntime({ s: adapter });
    try {
      for (const text of ["one", "two"]) {
        const { threadId } = await rt.createThread({ providerTarget: "s" });
        expect((await rt.waitForRun((await rt.sendMessage({ threadId, text })).runId)).status).toBe("completed");
      }
      expect(startedSessions(rt)).toHaveLength(2);
      const pids = pidsOf(adapter, rt);
      expect(pids).toHaveLength(2);
      expect(new Set(pids).size).toBe(1);
      expect((await records(dataDir)).map((h) => h.pid)).toEqual([pids[0]]);
    } finally {
      await cleanup();
    }
  });

  it("two targets get two hosts, and closing the runtime ends both", async () => {
    const a = hosted();
    const b = hosted();
    const { rt, dataDir, cleanup } = await openFaultRuntime({ a, b });
    let pids: number[] = [];
    try {
      for (const providerTarget of ["a", "b"]) {
        const { threadId } = await rt.createThread({ providerTarget });
        expect((await rt.waitForRun((await rt.sendMessage({ threadId, text: "hi" })).runId)).status).toBe("completed");
      }
      pids = [...pidsOf(a, rt), ...pidsOf(b, rt)];
      expect(new Set(pids).size).toBe(2);
      expect((await records(dataDir)).map((h) => h.pid).sort()).toEqual([...pids].sort());
    } finally {
      await cleanup();
    }
    for (const pid of pids) expect(alive(pid)).toBe(false);
  });
});

describe("idle sessions and hosts", () => {
  it(
    "an idle session gives back its lease, the idle host goes, " +
      "and the next run rebuilds its thread on a fresh host",
    async () => {
      const adapter = hosted({ policy: { idleTtlMs: 100 } });
      const { rt, cleanup } = await openFaultRuntime({ s: adapter }, { sessionIdleMs: 100 });
      try {
        const { threadId } = await rt.createThread({ providerTarget: "s" });
        expect((await rt.waitForRun((await rt.sendMessage({ threadId, text: "one" })).runId)).status).toBe("completed");
        const [pid] = pidsOf(adapter, rt);
        const t0 = performance.now();
        await until("the idle session and then the idle host to go", () => !alive(pid!));
        report("idle session (100 ms) + idle host (TTL 100 ms) -> host exited", performance.now() - t0);
        const run = await rt.waitForRun((await rt.sendMessage({ threadId, text: "two" })).runId);
        expect(run.status).toBe("completed");
        expect(pidsOf(adapter, rt).filter((p) => p !== pid)).toHaveLength(1);
        // The new host never knew the thread: it is rebuilt from the app's history, and told so.
        const bound = [...rt.views.providerThreadsById.values()].map((p) => p.origin);
        expect(bound).toEqual(["created", "rebuilt"]);
        expect(run.items.find((i) => i.kind === "handoff")?.text).toContain("user: one");
      } finally {
        await cleanup();
      }
    },
  );
});

describe("host death mid-turn", () => {
  it("fails the run, expires its approval as not_resumable, and the next run gets a new host", async () => {
    const adapter = hosted({ policy: { backoffMs: [10] } });
    const { rt, cleanup } = await openFaultRuntime({ s: adapter });
    try {
      const { threadId } = await rt.createThread({ providerTarget: "s" });
      const { runId } = await rt.sendMessage({ threadId, text: "[ask] delete the build" });
      const request = await waitingRequest(rt, threadId);
      const [pid] = pidsOf(adapter, rt);
      const t0 = performance.now();
      process.kill(pid!, "SIGKILL");
      const run = await rt.waitForRun(runId);
      report("SIGKILL of the host mid-turn -> run failed", performance.now() - t0);
      expect(run.status).toBe("failed");
      expect(run.failure?.failureClass).toBe("provider_session_lost");
      expect(rt.views.requests.get(request.requestId)).toMatchObject({
        status: "expired",
        closedReason: expect.stringMatching(/^not_resumable/),
      });
      await expect(
        rt.respond({ requestId: request.requestId, response: { kind: "decision", decision: "accept" } }),
      ).rejects.toMatchObject({ code: "not_resumable" });
      expect(rt.affordances(threadId).requests).toEqual([
        { requestId: request.requestId, kind: "command", state: "expired" },
      ]);

      const next = await rt.waitForRun((await rt.sendMessage({ threadId, text: "again" })).runId);
      expect(next.status).toBe("completed");
      const pids = pidsOf(adapter, rt);
      expect(pids).toHaveLength(1);
      expect(pids[0]).not.toBe(pid);
    } finally {
      await cleanup();
    }
  });
});

describe("hung host", () => {
  it(
    "a host that stops answering mid-turn is declared lost by the liveness probe: " +
      "the run fails, the host is killed",
    async () => {
      // Probed often, but given 5 s to answer: only a stopped host misses that, not a healthy one
      // on a loaded machine (where a 300 ms answer is no promise).
      const adapter = hosted({
        heartbeat: { intervalMs: 100, timeoutMs: 5_000 },
        stopGraceMs: 200,
        policy: { backoffMs: [10] },
      });
      const { rt, cleanup } = await openFaultRuntime({ s: adapter });
      let pid: number | undefined;
      try {
        const { threadId } = await rt.createThread({ providerTarget: "s" });
        const { runId } = await rt.sendMessage({ threadId, text: "[gate] wait" });
        await until("the run to run", () => rt.views.runs.get(runId)!.status === "running");
        [pid] = pidsOf(adapter, rt);
        const t0 = performance.now();
        process.kill(pid!, "SIGSTOP");
        const run = await rt.waitForRun(runId);
        report("hung host (SIGSTOP; probe every 100 ms, 5 s to answer) -> run failed", performance.now() - t0);
        expect(run.status).toBe("failed");
        expect(run.failure?.message).toMatch(/unresponsive/);
        await until("the hung host to be killed", () => !alive(pid!));
        expect((await rt.waitForRun((await rt.sendMessage({ threadId, text: "again" })).runId)).status).toBe(
          "completed",
        );
      } finally {
        killIfAlive(pid);
        await cleanup();
      }
    },
  );
});

describe("startup timeout and restart budget", () => {
  it("a host that never becomes ready fails the run with host_unavailable, and is killed", async () => {
    const adapter = hosted({ neverReady: true, policy: { startupTimeoutMs: 500, restartBudget: 0 } });
    const { rt, dataDir, cleanup } = await openFaultRuntime({ s: adapter });
    try {
      const { threadId } = await rt.createThread({ providerTarget: "s" });
      const t0 = performance.now();
      const run = await rt.waitForRun((await rt.sendMessage({ threadId, text: "hello" })).runId);
      report("startup timeout (500 ms) -> run failed", performance.now() - t0);
      expect(run.status).toBe("failed");
      expect(run.failure).toMatchObject({ failureClass: "host_unavailable" });
      await until(
        "the starved host to be killed",
        () => rt.hosts.pids([...rt.hosts.supervisors.keys()][0]!).length === 0,
      );
      // Its durable record goes with it (written after the exit is seen).
      for (let left = await records(dataDir); left.length > 0; left = await records(dataDir))
        await new Promise((r) => setTimeout(r, 5));
    } finally {
      await cleanup();
    }
  });

  it("after the restart budget is spent, runs fail with host_unavailable", async () => {
    const adapter = hosted({ policy: { restartBudget: 1, backoffMs: [10] } });
    const { rt, cleanup } = await openFaultRuntime({ s: adapter });
    try {
      const { threadId } = await rt.createThread({ providerTarget: "s" });
      for (let crash = 1; crash <= 2; crash++) {
        const { runId } = await rt.sendMessage({ threadId, text: `[ask] crash ${crash}` });
        await waitingRequest(rt, threadId);
        for (const pid of pidsOf(adapter, rt)) process.kill(pid, "SIGKILL");
        expect((await rt.waitForRun(runId)).status).toBe("failed");
      }
      const t0 = performance.now();
      const run = await rt.waitForRun((await rt.sendMessage({ threadId, text: "one more" })).runId);
      report("restart budget spent -> run failed", performance.now() - t0);
      expect(run.status).toBe("failed");
      expect(run.failure).toMatchObject({
        failureClass: "host_unavailable",
        message: expect.stringContaining("restart budget"),
      });
    } finally {
      await cleanup();
    }
  });
});

describe("WebSocket hosts", () => {
  const slow = {
    "[slow]": [
      { type: "text" as const, text: "before" },
      { type: "gate" as const, name: "dropped" },
      { type: "text" as const, text: " after" },
    ],
  };

  it("reconnects after a dropped connection and replays what happened meanwhile", async () => {
    const adapter = hosted({ transport: "websocket", scripts: slow, reconnect: { attempts: 3, backoffMs: [500] } });
    const { rt, cleanup } = await openFaultRuntime({ s: adapter });
    try {
      const { threadId } = await rt.createThread({ providerTarget: "s" });
      const { runId } = await rt.sendMessage({ threadId, text: "[slow] go" });
      await until("the first text", () => rt.views.runs.get(runId)!.items.some((i) => i.kind === "assistant_message"));
      const [pid] = pidsOf(adapter, rt);
      // The host cuts the connection, then lets the turn go on: it ends while nobody is connected,
      // and the reconnect's resume replays it (whatever the machine's speed).
      await adapter.debug("debug.dropConnections", { thenOpenGate: "dropped" });
      const t0 = performance.now();
      const run = await rt.waitForRun(runId);
      report("WebSocket drop -> reconnect, state re-read, run completed", performance.now() - t0);
      expect(run.status).toBe("completed");
      expect(
        run.items
          .filter((i) => i.kind === "assistant_message")
          .map((i) => i.text)
          .join(""),
      ).toBe("before after");
      expect(pidsOf(adapter, rt)).toEqual([pid]);
      expect(startedSessions(rt)).toHaveLength(1);
      expect((await rt.waitForRun((await rt.sendMessage({ threadId, text: "still there?" })).runId)).status).toBe(
        "completed",
      );
    } finally {
      await cleanup();
    }
  });

  it("fails the run when every reconnect attempt fails, and stops the unreachable host", async () => {
    const adapter = hosted({ transport: "websocket", reconnect: { attempts: 2, backoffMs: [50] } });
    const { rt, cleanup } = await openFaultRuntime({ s: adapter });
    let pid: number | undefined;
    try {
      const { threadId } = await rt.createThread({ providerTarget: "s" });
      const { runId } = await rt.sendMessage({ threadId, text: "[gate] wait" });
      await until("the run to run", () => rt.views.runs.get(runId)!.status === "running");
      [pid] = pidsOf(adapter, rt);
      const t0 = performance.now();
      await adapter.debug("debug.stopListening");
      const run = await rt.waitForRun(runId);
      report("WebSocket reconnect exhausted -> run failed", performance.now() - t0);
      expect(run.status).toBe("failed");
      expect(run.failure?.message).toMatch(/reconnect attempts failed/);
      await until("the unreachable host to be stopped", () => !alive(pid!));
    } finally {
      killIfAlive(pid);
      await cleanup();
    }
  });
});
