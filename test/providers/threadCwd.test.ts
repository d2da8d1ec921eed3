import { existsSync } from "node:fs";
import { mkdir, mkdtemp, readFile, rm } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterEach, describe, expect, it } from "vitest";
import type { ProviderAdapter } from "../../src/adapters/contract.js";
import { createScriptedHostAdapter } from "../../src/adapters/scripted/adapter.js";
import type { ScriptStep } from "../../src/adapters/scripted/host/script.js";
import { createScriptedAdapter, keyedScript, ScriptedBackend, sequentialIds } from "../../src/index.js";
import type { Runtime } from "../../src/runtime/runtime.js";
import { nextEvent, until } from "../support/runtime.js";
import { openRuntime } from "../support/internals.js";

/**
 * Every provider call names the thread's cwd, and a fork made by a new runtime (a new adapter
 * instance, a new host process) runs its tools there, never in the embedding process's
 * working directory. The scripted provider's tool here is a file change it really writes.
 * (The Codex and Claude binaries run the same check in their suites: forkAfterReopenRunsInThreadCwd.)
 */

const FILE = `where-scripted-${process.pid}.txt`;
const SCRIPTS: Record<string, ScriptStep[]> = {
  "[ask]": [{ type: "command", command: "ls", output: "a", approval: true }],
  "[gate]": [
    { type: "text", text: "waiting" },
    { type: "gate", name: "steer-here" },
    { type: "text", text: "done" },
  ],
  "[hang]": [{ type: "text", text: "working" }, { type: "hang" }],
  "[where]": [{ type: "file_change", path: FILE, diff: `+${FILE}`, content: "the fork was here\n" }],
};

/** The thread-addressed calls of the contract, each with where its input says the thread lives. */
const THREAD_CALLS = [
  "ensureProviderThread",
  "sendRun",
  "steerRun",
  "interrupt",
  "isTurnAlive",
  "respondToRequest",
  "readThreadSnapshot",
  "rollbackThread",
  "forkThread",
] as const;

interface Recorded {
  method: (typeof THREAD_CALLS)[number];
  /** The cwd the call names: its `cwd`, else its thread address's. */
  cwd: unknown;
  /** A fork names the parent's address and its own cwd. */
  parentCwd?: unknown;
}

/** The adapter, recording the cwd every thread call names (the provider boundary, observed). */
function recording(adapter: ProviderAdapter, calls: Recorded[]): ProviderAdapter {
  return new Proxy(adapter, {
    get(target, property, receiver) {
      const value = Reflect.get(target, property, receiver) as unknown;
      if (typeof value !== "function") return value;
      const method = THREAD_CALLS.find((m) => m === property);
      if (!method) return (value as (...args: unknown[]) => unknown).bind(target);
      return (input: Record<string, unknown>) => {
        const thread = input.thread as { cwd?: unknown } | undefined;
        calls.push(
          method === "forkThread"
            ? { method, cwd: input.cwd, parentCwd: thread?.cwd }
            : { method, cwd: "cwd" in input ? input.cwd : thread?.cwd },
        );
        return (value as (i: unknown) => unknown).call(target, input);
      };
    },
  });
}

interface Variant {
  name: string;
  /** A new adapter for each runtime; `backend`: the in-process provider's memory across them. */
  make(backend: ScriptedBackend): ProviderAdapter & { openGate?(name: string): Promise<void> };
  /** How the native fork is realised after the restart. */
  resolution: "native" | "portable";
}

const variants: Variant[] = [
  {
    name: "scripted, in process, with a provider that outlives the runtime",
    make: (backend) => createScriptedAdapter({ backend, script: keyedScript(SCRIPTS) }),
    resolution: "native",
  },
  {
    // A new host process forgot the parent: the fork is portable, and still runs in the thread's cwd.
    name: "scripted host (stdio), a new host process after the restart",
    make: () => createScriptedHostAdapter({ scripts: SCRIPTS }),
    resolution: "portable",
  },
];

let cleanup: (() => Promise<void>) | null = null;
afterEach(async () => {
  await cleanup?.();
  cleanup = null;
});

describe.each(variants)("thread cwd: $name", ({ make, resolution }) => {
  it("every thread call names the thread's cwd; a fork after a restart runs its tools there", async () => {
    const root = await mkdtemp(join(tmpdir(), "tiller-cwd-"));
    const workspace = join(root, "workspace");
    await mkdir(workspace);
    const backend = new ScriptedBackend();
    const calls: Recorded[] = [];
    let rt: Runtime | null = null;
    const outside = join(process.cwd(), FILE);
    cleanup = async () => {
      await rt?.close();
      await rm(root, { recursive: true, force: true });
      if (existsSync(outside)) await rm(outside);
    };
    const open = async () => {
      const adapter = make(backend);
      // A provider that can say whether a turn is alive gets a short silence limit: the hanging turn below is asked
      // (and says it is).
      const watchdog = adapter.isTurnAlive ? { turnSilenceMs: 20 } : {};
      rt = await openRuntime({
        dataDir: join(root, "data"),
        ids: sequentialIds(),
        ...watchdog,
        providers: { scripted: recording(adapter, calls) },
      });
      return { rt, adapter };
    };

    // First runtime: a respond, a native steer, an interrupt and a provider rollback.
    const first = await open();
    const { threadId } = await first.rt.createThread({ providerTarget: "scripted", cwd: workspace });
    const asked = await first.rt.sendMessage({ threadId, text: "[ask]" });
    const request = await nextEvent(first.rt, "request.opened");
    await first.rt.respond({ requestId: request.event.requestId, response: { kind: "decision", decision: "accept" } });
    const kept = await first.rt.waitForRun(asked.runId);
    const gated = await first.rt.sendMessage({ threadId, text: "[gate]" });
    await nextEvent(first.rt, "attempt.turn_bound", (e) => e.runId === gated.runId);
    expect((await first.rt.sendMessage({ threadId, text: "go on", mode: "steer" })).disposition).toBe("steered");
    await nextEvent(first.rt, "steer.applied", (e) => e.runId === gated.runId);
    await (first.adapter.openGate ? first.adapter.openGate("steer-here") : backend.openGate("steer-here"));
    expect((await first.rt.waitForRun(gated.runId)).status).toBe("completed");
    const hung = await first.rt.sendMessage({ threadId, text: "[hang]" });
    await nextEvent(first.rt, "attempt.turn_bound", (e) => e.runId === hung.runId);
    if (first.adapter.isTurnAlive)
      await until("the watchdog to ask about the silent turn", () => calls.some((c) => c.method === "isTurnAlive"));
    await first.rt.interrupt({ runId: hung.runId });
    expect((await first.rt.waitForRun(hung.runId)).status).toBe("interrupted");
    expect(await first.rt.rollback({ threadId, toRunId: kept.runId })).toMatchObject({ provider: "rolled_back" });

    // A new runtime, a new adapter: the fork's first run writes its file.
    await first.rt.close();
    const second = await open();
    const fork = await second.rt.forkThread({ threadId, afterRunId: kept.runId });
    const run = await second.rt.waitForRun(
      (await second.rt.sendMessage({ threadId: fork.threadId, text: "[where]" })).runId,
    );
    expect(run.status).toBe("completed");
    expect(second.rt.views.transfers.get(fork.threadId)?.resolution).toBe(resolution);
    expect({ inThreadCwd: existsSync(join(workspace, FILE)), inProcessCwd: existsSync(outside) }).toEqual({
      inThreadCwd: true,
      inProcessCwd: false,
    });
    expect(await readFile(join(workspace, FILE), "utf8")).toBe("the fork was here\n");

    // Every thread call of the contract the adapter has was made (the portable variant's native fork was tried, and
    // failed).
    expect(new Set(calls.map((c) => c.method))).toEqual(new Set(THREAD_CALLS.filter((m) => m in second.adapter)));
    expect(calls.filter((c) => c.cwd !== workspace || ("parentCwd" in c && c.parentCwd !== workspace))).toEqual([]);
  });
});
