import { existsSync } from "node:fs";
import { readFile, realpath, rm, writeFile } from "node:fs/promises";
import { join } from "node:path";
import { expect } from "vitest";
import type { ProviderAdapter } from "../../src/adapters/contract.js";
import type { Reply } from "../../src/simulator/index.js";
import type { ModelSimulator } from "../../src/simulator/index.js";
import type { PolicyName } from "../../src/machines/policies.js";
import type { Runtime } from "../../src/runtime/runtime.js";
import { sawInNextRequest as saw } from "../codex/harness.js";
import { alive } from "../faults/helpers.js";
import { until } from "../support/runtime.js";

/**
 * Scenarios every real provider must pass the same way under Tiller (the provider differs,
 * the contract does not): interrupt with a request pending, resume in a new host, native fork,
 * rollback with file checkpoints, SIGKILL of the host mid-turn. Each provider's suite runs
 * them against its real binary; timings are printed, never asserted.
 */

export interface ProviderWorld {
  rt: Runtime;
  sim: ModelSimulator;
  workspace: string;
  target: string;
  hostPid(sessionId: string): number | null;
  /** The current runtime's adapter (its methods may be wrapped to watch the boundary). */
  readonly adapter: ProviderAdapter;
  reopen(): Promise<Runtime>;
  /**
   * For a provider that writes its conversation down lazily: resolves once this prompt of the thread is on disk (a kill
   * after it finds it there).
   */
  untilWrittenDown?(threadId: string, prompt: string): Promise<void>;
}

const report = (target: string, name: string, ms: number) =>
  console.info(`${target} timing: ${name}: ${ms.toFixed(0)} ms`);

async function thread(w: ProviderWorld): Promise<string> {
  return (await w.rt.createThread({ providerTarget: w.target, cwd: w.workspace })).threadId;
}

async function pendingRequest(w: ProviderWorld, threadId: string) {
  await until("a request", () => w.rt.views.pendingRequests(threadId).length === 1);
  return w.rt.views.pendingRequests(threadId)[0]!;
}

const hostPids = (w: ProviderWorld) =>
  [...w.rt.views.sessions.keys()].map((id) => w.hostPid(id)).filter((p): p is number => p !== null);

/** `writesNever` asks the model to run a command that writes never.txt (and needs approval). */
export async function interruptWhileRequestPending(w: ProviderWorld, writesNever: Reply): Promise<void> {
  const threadId = await thread(w);
  w.sim.push(writesNever);
  const { runId } = await w.rt.sendMessage({ threadId, text: "run then stop" });
  const request = await pendingRequest(w, threadId);
  const t0 = performance.now();
  await w.rt.interrupt({ runId });
  const run = await w.rt.waitForRun(runId);
  report(w.target, "interrupt -> terminal (request pending)", performance.now() - t0);
  expect(run.status).toBe("interrupted");
  expect(w.rt.views.requests.get(request.requestId)?.status).not.toBe("pending");
  expect(existsSync(join(w.workspace, "never.txt"))).toBe(false);
}

export async function resumesInNewHost(w: ProviderWorld): Promise<void> {
  const threadId = await thread(w);
  w.sim.push({ text: "noted" });
  await w.rt.waitForRun((await w.rt.sendMessage({ threadId, text: "the word is FLAMINGO" })).runId);
  await w.untilWrittenDown?.(threadId, "the word is FLAMINGO");
  const [before] = hostPids(w);
  const rt = await w.reopen();
  w.sim.push(saw("FLAMINGO"));
  const run = await rt.waitForRun((await rt.sendMessage({ threadId, text: "what was the word?" })).runId);
  expect(run.items.at(-1)?.text).toBe("saw FLAMINGO");
  expect(before).toBeGreaterThan(0);
  expect(alive(before!)).toBe(false); // this answer came from a new host process
  expect(run.items.some((i) => i.kind === "handoff")).toBe(false); // resumed natively, not rebuilt
}

export async function forksNatively(w: ProviderWorld): Promise<void> {
  const threadId = await thread(w);
  w.sim.push({ text: "noted" });
  await w.rt.waitForRun((await w.rt.sendMessage({ threadId, text: "the colour is TEAL" })).runId);
  const fork = await w.rt.forkThread({ threadId });
  w.sim.push(saw("TEAL"));
  const run = await w.rt.waitForRun((await w.rt.sendMessage({ threadId: fork.threadId, text: "which colour?" })).runId);
  expect(run.items.at(-1)?.text).toBe("saw TEAL");
  expect(w.rt.views.transfers.get(fork.threadId)?.resolution).toBe("native");
  w.sim.push(saw("which colour?"));
  const parent = await w.rt.waitForRun((await w.rt.sendMessage({ threadId, text: "parent again" })).runId);
  expect(parent.items.at(-1)?.text).toBe("missing which colour?");
}

/**
 * A native fork made by a new runtime (new adapter, new host) runs its tools in the thread's
 * cwd, never in the embedding process's working directory. `runs(command)` asks the model to
 * run a shell command (asking or not: every request is accepted).
 */
export async function forkAfterReopenRunsInThreadCwd(
  w: ProviderWorld,
  runs: (command: string) => Reply,
): Promise<void> {
  const threadId = await thread(w);
  w.sim.push({ text: "noted" });
  await w.rt.waitForRun((await w.rt.sendMessage({ threadId, text: "remember this" })).runId);
  await w.untilWrittenDown?.(threadId, "remember this");
  const rt = await w.reopen();
  const fork = await rt.forkThread({ threadId });
  const file = `where-${w.target}-${process.pid}.txt`;
  const outside = join(process.cwd(), file);
  w.sim.push(runs(`pwd > ${file}`), { text: "done" });
  const { runId } = await rt.sendMessage({ threadId: fork.threadId, text: "where are you?" });
  const stop = acceptEveryRequest(rt, fork.threadId);
  let inProcessCwd = false;
  try {
    const run = await rt.waitForRun(runId);
    expect(run.status).toBe("completed");
  } finally {
    stop();
    inProcessCwd = existsSync(outside);
    if (inProcessCwd) await rm(outside); // never leave the stray file in the checkout
  }
  expect(rt.views.transfers.get(fork.threadId)?.resolution).toBe("native");
  expect({ inThreadCwd: existsSync(join(w.workspace, file)), inProcessCwd }).toEqual({
    inThreadCwd: true,
    inProcessCwd: false,
  });
  expect(await realpath((await readFile(join(w.workspace, file), "utf8")).trim())).toBe(await realpath(w.workspace));
}

/** Accepts every request of the thread as it opens (a user who says yes to everything). */
function acceptEveryRequest(rt: Runtime, threadId: string): () => void {
  return rt.subscribe({ threadId, afterSeq: 0 }, ({ event }) => {
    if (event.type === "request.opened")
      void rt
        .respond({ requestId: event.requestId, response: { kind: "decision", decision: "accept" } })
        .catch(() => undefined);
  });
}

/**
 * Needs a runtime opened with `checkpoints: true`. `degradations`: the policies the provider's
 * rollback is expected to record (none for a rollback the runtime can check).
 */
export async function rollsBackWithFiles(w: ProviderWorld, degradations: PolicyName[]): Promise<void> {
  const threadId = await thread(w);
  w.sim.push({ text: "one" }, { text: "two" });
  const first = await w.rt.waitForRun((await w.rt.sendMessage({ threadId, text: "keep ALPHA" })).runId);
  await writeFile(join(w.workspace, "later.txt"), "written after run 1\n");
  await w.rt.waitForRun((await w.rt.sendMessage({ threadId, text: "drop BRAVO" })).runId);
  const receipt = await w.rt.rollback({ threadId, toRunId: first.runId });
  expect(receipt).toMatchObject({ provider: "rolled_back", filesRestored: true });
  expect(w.rt.views.runs.get(first.runId)!.fallbacks.map((f) => f.policy)).toEqual(degradations);
  expect(existsSync(join(w.workspace, "later.txt"))).toBe(false);
  w.sim.push((req) => ({
    text: `${JSON.stringify(req.body).includes("ALPHA")}/${JSON.stringify(req.body).includes("BRAVO")}`,
  }));
  const run = await w.rt.waitForRun((await w.rt.sendMessage({ threadId, text: "what is left?" })).runId);
  expect(run.items.at(-1)?.text).toBe("true/false");
  expect((await w.rt.readThread(threadId)).runs.map((r) => r.status)).toEqual([
    "completed",
    "rolled_back",
    "completed",
  ]);
}

/** `needsApproval` asks the model to run a command that needs approval. */
export async function survivesHostSigkill(w: ProviderWorld, needsApproval: Reply): Promise<void> {
  const threadId = await thread(w);
  w.sim.push({ text: "before" });
  await w.rt.waitForRun((await w.rt.sendMessage({ threadId, text: "the code is KILO" })).runId);
  w.sim.push(needsApproval);
  const { runId } = await w.rt.sendMessage({ threadId, text: "run something" });
  const request = await pendingRequest(w, threadId);
  await w.untilWrittenDown?.(threadId, "run something");
  const [pid] = hostPids(w);
  const t0 = performance.now();
  process.kill(pid!, "SIGKILL");
  const run = await w.rt.waitForRun(runId);
  report(w.target, "SIGKILL of the host -> run failed", performance.now() - t0);
  expect(run.status).toBe("failed");
  expect(run.failure?.failureClass).toBe("provider_session_lost");
  await expect(
    w.rt.respond({ requestId: request.requestId, response: { kind: "decision", decision: "accept" } }),
  ).rejects.toMatchObject({ code: "not_resumable" });
  w.sim.push(saw("KILO"));
  const next = await w.rt.waitForRun((await w.rt.sendMessage({ threadId, text: "still there?" })).runId);
  expect(next.status).toBe("completed");
  expect(next.items.at(-1)?.text).toBe("saw KILO");
}

/**
 * Needs a world with a second target "other" (a scripted provider that says "other says
 * PAPAYA"). A switch there and back hands the provider a delta; a thread begun elsewhere
 * hands it the full summary, as user context.
 */
export async function takesHandoff(w: ProviderWorld): Promise<void> {
  const threadId = await thread(w);
  w.sim.push({ text: "first" });
  await w.rt.waitForRun((await w.rt.sendMessage({ threadId, text: "start here" })).runId);
  await w.rt.waitForRun((await w.rt.sendMessage({ threadId, text: "now elsewhere", providerTarget: "other" })).runId);
  w.sim.push(saw("PAPAYA"));
  const back = await w.rt.waitForRun(
    (await w.rt.sendMessage({ threadId, text: "back again", providerTarget: w.target })).runId,
  );
  expect(back.items.at(-1)?.text).toBe("saw PAPAYA");
  expect(back.items.find((i) => i.kind === "handoff")?.detail).toMatchObject({
    strategy: "delta_since_last_seen",
    reason: "provider_switch",
  });
  const fresh = await w.rt.createThread({ providerTarget: "other", cwd: w.workspace });
  await w.rt.waitForRun((await w.rt.sendMessage({ threadId: fresh.threadId, text: "begin elsewhere" })).runId);
  w.sim.push(saw("other says PAPAYA"));
  const full = await w.rt.waitForRun(
    (await w.rt.sendMessage({ threadId: fresh.threadId, text: "over to you", providerTarget: w.target })).runId,
  );
  expect(full.items.at(-1)?.text).toBe("saw other says PAPAYA");
  expect(full.items.find((i) => i.kind === "handoff")?.detail).toMatchObject({ strategy: "full_thread_summary" });
  expect(full.fallbacks.map((f) => f.policy)).toContain("handoff_as_user_context");
}

/**
 * A turn that says nothing for longer than `turnSilenceMs` while its provider still runs it is
 * vouched for by the adapter (`isTurnAlive`) and left running; an interrupt still ends it.
 * The world's runtime must have a short `turnSilenceMs`.
 */
export async function silentTurnVouchedFor(w: ProviderWorld): Promise<void> {
  const threadId = await thread(w);
  w.sim.push({ hang: true, text: "working on it" });
  let vouched = 0;
  const probe = w.adapter.isTurnAlive!.bind(w.adapter);
  w.adapter.isTurnAlive = async (input) => {
    const alive = await probe(input);
    if (alive) vouched += 1;
    return alive;
  };
  const { runId } = await w.rt.sendMessage({ threadId, text: "long task" });
  await until("the provider to vouch for the silent turn three times", () => vouched >= 3);
  expect(w.rt.views.runs.get(runId)!.status).toBe("running");
  await w.rt.interrupt({ runId });
  expect((await w.rt.waitForRun(runId)).status).toBe("interrupted");
}
