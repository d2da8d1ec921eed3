import { mkdtemp, readFile, rm } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterEach, describe, expect, it } from "vitest";
import { createScriptedHostAdapter, type ScriptedHostAdapter } from "../../src/adapters/scripted/adapter.js";
import { createScriptedAdapter, createRuntime, ScriptedBackend, type RuntimeFailure } from "../../src/index.js";
import { hostKey } from "../../src/runtime/hosts/hostKey.js";
import { isRunning } from "../../src/runtime/hosts/process.js";
import type { Runtime } from "../../src/runtime/runtime.js";
import { openTestRuntime, rejection, said, sendAndWait, until } from "../support/runtime.js";

/**
 * The `prewarm` option: a target's host is started right after open, before any thread exists; the first session takes
 * it up (same process); close stops it; an idle one goes at the registry's idle TTL; one that cannot start is
 * reported, never failing open; a target that is unknown or has no host is refused.
 */

const cleanups: Array<() => Promise<void>> = [];
afterEach(async () => {
  for (const cleanup of cleanups.splice(0).reverse()) await cleanup();
});

async function open(providers: Record<string, ScriptedHostAdapter>, options: Parameters<typeof openTestRuntime>[1]) {
  const opened = await openTestRuntime(providers, options);
  cleanups.push(opened.cleanup);
  return opened.rt;
}

/** The live pids of the adapter's host in this runtime's registry. */
const hostPids = async (rt: Runtime, adapter: ScriptedHostAdapter) => rt.hosts.pids(await hostKey(adapter.hostSpec));

async function prewarmedPid(rt: Runtime, adapter: ScriptedHostAdapter): Promise<number> {
  const key = await hostKey(adapter.hostSpec);
  await until("the prewarmed host", () => rt.hosts.pids(key).length > 0);
  return rt.hosts.pids(key)[0]!;
}

describe("prewarm", () => {
  it("starts the target's host before any thread exists, and the first turn runs in it", async () => {
    const adapter = createScriptedHostAdapter();
    const rt = await open({ scripted: adapter }, { prewarm: ["scripted"] });
    const pid = await prewarmedPid(rt, adapter);
    expect(rt.listThreads()).toEqual([]);
    expect(isRunning(pid)).toBe(true);

    const { threadId } = await rt.createThread({ providerTarget: "scripted", cwd: tmpdir() });
    const run = await sendAndWait(rt, threadId, "hello");
    expect(run.status).toBe("completed");
    expect(said((await rt.readThread(threadId)).runs[0]!.items)).toContain("hello");
    const sessions = [...rt.views.sessions.keys()];
    expect(sessions).toHaveLength(1);
    expect(adapter.hostPid(sessions[0]!)).toBe(pid);
    expect(await hostPids(rt, adapter)).toEqual([pid]);
  });

  it("close() stops a prewarmed host nobody used", async () => {
    const adapter = createScriptedHostAdapter();
    const dataDir = await mkdtemp(join(tmpdir(), "tiller-prewarm-"));
    cleanups.push(() => rm(dataDir, { recursive: true, force: true }));
    const rt = (await createRuntime({ dataDir, providers: { scripted: adapter }, prewarm: true })) as Runtime;
    const pid = await prewarmedPid(rt, adapter);
    await rt.close();
    expect(isRunning(pid)).toBe(false);
  });

  it("close() right after open cuts a prewarm short: no failure reported, no host left", async () => {
    const failures: RuntimeFailure[] = [];
    const adapter = createScriptedHostAdapter();
    const dataDir = await mkdtemp(join(tmpdir(), "tiller-prewarm-"));
    cleanups.push(() => rm(dataDir, { recursive: true, force: true }));
    const rt = await createRuntime({
      dataDir,
      providers: { scripted: adapter },
      prewarm: true,
      onFailure: (f) => failures.push(f),
    });
    await rt.close();
    const records = JSON.parse(await readFile(join(dataDir, "runtimes", "hosts.json"), "utf8")) as {
      hosts: Array<{ pid: number }>;
      spawning: unknown[];
    };
    expect(records).toMatchObject({ hosts: [], spawning: [] });
    expect(failures).toEqual([]);
  });

  it("an unused prewarmed host goes at the registry's idle release", async () => {
    const adapter = createScriptedHostAdapter({ policy: { idleTtlMs: 50 } });
    const rt = await open({ scripted: adapter }, { prewarm: true });
    const pid = await prewarmedPid(rt, adapter);
    const key = await hostKey(adapter.hostSpec);
    // The registry forgets it once its exit is reported (after its output drained).
    await until("the idle host to stop", () => rt.hosts.pids(key).length === 0);
    expect(isRunning(pid)).toBe(false);
  });

  it("a host that cannot start is reported (prewarm_failed) and open still succeeds", async () => {
    const failures: RuntimeFailure[] = [];
    const adapter = createScriptedHostAdapter({
      neverReady: true,
      policy: { startupTimeoutMs: 200, restartBudget: 1, backoffMs: [10] },
    });
    const rt = await open({ scripted: adapter }, { prewarm: ["scripted"], onFailure: (f) => failures.push(f) });
    await until("the prewarm failure", () => failures.length > 0);
    expect(failures[0]).toMatchObject({
      kind: "prewarm_failed",
      target: "scripted",
      error: { code: "host_unavailable" },
    });
    expect(rt.closed).toBe(false);
  });

  it("refuses an unknown target and a target with no host, as invalid input", async () => {
    const dataDir = await mkdtemp(join(tmpdir(), "tiller-prewarm-"));
    cleanups.push(() => rm(dataDir, { recursive: true, force: true }));
    const scripted = createScriptedHostAdapter();
    const unknown = await rejection(createRuntime({ dataDir, providers: { scripted }, prewarm: ["nope"] }));
    expect(unknown).toMatchObject({ code: "invalid_input", field: "prewarm.0" });
    const inProcess = createScriptedAdapter({ backend: new ScriptedBackend() });
    const hostless = await rejection(createRuntime({ dataDir, providers: { inProcess }, prewarm: ["inProcess"] }));
    expect(hostless).toMatchObject({ code: "invalid_input", field: "prewarm.0" });
    const wrongType = await rejection(
      createRuntime({ dataDir, providers: { scripted }, prewarm: "scripted" as never }),
    );
    expect(wrongType).toMatchObject({ code: "invalid_input" });
  });

  it("`true` prewarms only the targets whose adapter has a host", async () => {
    const adapter = createScriptedHostAdapter();
    const inProcess = createScriptedAdapter({ backend: new ScriptedBackend() });
    const rt = await open({ scripted: adapter, inProcess } as never, { prewarm: true });
    await prewarmedPid(rt, adapter);
  });
});
