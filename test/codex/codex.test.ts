import { existsSync } from "node:fs";
import { readFile } from "node:fs/promises";
import { join } from "node:path";
import { afterEach, describe, expect, it } from "vitest";
import { createScriptedAdapter } from "../../src/index.js";
import * as conformance from "../providers/conformance.js";
import { codexWorld, patch, sawInNextRequest, shell, until, type CodexWorld } from "./harness.js";

const asProvider = (w: CodexWorld): conformance.ProviderWorld => ({
  get rt() {
    return w.rt;
  },
  sim: w.sim,
  workspace: w.workspace,
  target: "codex",
  hostPid: (id) => w.adapter.hostPid(id),
  get adapter() {
    return w.adapter;
  },
  reopen: () => w.reopen(),
});

/**
 * The real Codex binary under Tiller, offline: every scenario drives `codex app-server`
 * through the runtime against the model simulator. Timings are printed for the closing
 * note, never asserted.
 */

let world: CodexWorld | null = null;
afterEach(async () => {
  await world?.cleanup();
  world = null;
});

const report = (name: string, ms: number) => console.info(`codex timing: ${name}: ${ms.toFixed(0)} ms`);

async function thread(w: CodexWorld): Promise<string> {
  return (await w.rt.createThread({ providerTarget: "codex", cwd: w.workspace })).threadId;
}

async function pendingRequest(w: CodexWorld, threadId: string) {
  await until("an approval", () => w.rt.views.pendingRequests(threadId).length === 1);
  return w.rt.views.pendingRequests(threadId)[0]!;
}

describe("codex: turns", () => {
  it("runs a text turn; the session's capability record comes from the handshake", async () => {
    world = await codexWorld();
    const threadId = await thread(world);
    world.sim.push({ text: "Hello from the simulator!", reasoning: "a greeting is due" });
    const t0 = performance.now();
    const run = await world.rt.waitForRun((await world.rt.sendMessage({ threadId, text: "say hi" })).runId);
    report("host start + text turn", performance.now() - t0);
    expect(run.status).toBe("completed");
    expect(run.items.map((i) => [i.kind, i.text])).toEqual([
      ["user_message", "say hi"],
      ["reasoning", "a greeting is due"],
      ["assistant_message", "Hello from the simulator!"],
    ]);
    const started = [...world.rt.actors.sessions.values()][0]!.getSnapshot().context;
    expect(started.capabilities?.turns.supportsActiveSteering).toBe(true);
    const request = world.sim.requests.at(-1)!;
    expect(request.url).toBe("/v1/responses");
    expect(request.headers.authorization).toBe("[redacted]");
    const t1 = performance.now();
    world.sim.push({ text: "again" });
    expect((await world.rt.waitForRun((await world.rt.sendMessage({ threadId, text: "again" })).runId)).status).toBe(
      "completed",
    );
    report("second text turn (warm host)", performance.now() - t1);
  });

  it("asks before a command: accepted runs it and the output reaches the model; declined does not run it", async () => {
    world = await codexWorld();
    const threadId = await thread(world);
    world.sim.push(shell("echo approved > ran.txt && echo OUT-42"), sawInNextRequest("OUT-42"));
    const accepted = await world.rt.sendMessage({ threadId, text: "run it" });
    const request = await pendingRequest(world, threadId);
    expect(request.payload).toMatchObject({ kind: "command", command: expect.stringContaining("echo approved") });
    await world.rt.respond({ requestId: request.requestId, response: { kind: "decision", decision: "accept" } });
    const run = await world.rt.waitForRun(accepted.runId);
    expect(run.status).toBe("completed");
    expect(run.items.find((i) => i.kind === "command")?.output).toContain("OUT-42");
    expect(run.items.at(-1)?.text).toBe("saw OUT-42");
    expect(existsSync(join(world.workspace, "ran.txt"))).toBe(true);

    world.sim.push(shell("echo declined > nope.txt"), sawInNextRequest("rejected"));
    const declined = await world.rt.sendMessage({ threadId, text: "run this too" });
    const second = await pendingRequest(world, threadId);
    await world.rt.respond({ requestId: second.requestId, response: { kind: "decision", decision: "decline" } });
    const run2 = await world.rt.waitForRun(declined.runId);
    expect(run2.status).toBe("completed");
    expect(existsSync(join(world.workspace, "nope.txt"))).toBe(false);
    expect(world.rt.views.requests.get(second.requestId)?.status).toBe("resolved");
  });

  it("asks before a file change under a read-only sandbox, and applies it once accepted", async () => {
    world = await codexWorld({ runtime: { sandbox: "read-only" } });
    const threadId = await thread(world);
    world.sim.push(patch("new.txt", "brand new"), { text: "patched" });
    const { runId } = await world.rt.sendMessage({ threadId, text: "add a file" });
    const request = await pendingRequest(world, threadId);
    expect(request.payload).toMatchObject({ kind: "file_change", path: expect.stringContaining("new.txt") });
    await world.rt.respond({ requestId: request.requestId, response: { kind: "decision", decision: "accept" } });
    const run = await world.rt.waitForRun(runId);
    expect(run.status).toBe("completed");
    expect(await readFile(join(world.workspace, "new.txt"), "utf8")).toBe("brand new\n");
    expect(run.items.some((i) => i.kind === "file_change")).toBe(true);
  });
});

describe("codex: model and provider switches", () => {
  it("switches model in the session: the next request names the new model", async () => {
    world = await codexWorld();
    const threadId = await thread(world);
    world.sim.push({ text: "first" }, (req) => ({ text: `model=${(req.body as { model?: string }).model}` }));
    await world.rt.waitForRun((await world.rt.sendMessage({ threadId, text: "one" })).runId);
    const run = await world.rt.waitForRun(
      (await world.rt.sendMessage({ threadId, text: "two", model: "gpt-5.4" })).runId,
    );
    expect(run.items.at(-1)?.text).toBe("model=gpt-5.4");
    expect(world.rt.views.sessions.size).toBe(1);
  });

  it("takes a handoff from another provider as user context, then a delta when it comes back", async () => {
    world = await codexWorld({
      extraProviders: { other: createScriptedAdapter({ script: () => [{ type: "text", text: "other says PAPAYA" }] }) },
    });
    await conformance.takesHandoff(asProvider(world));
  });
});

describe("codex: interrupt and steer", () => {
  it("interrupts mid-stream: the acknowledgement is not the terminal, the terminal arrives", async () => {
    world = await codexWorld();
    const threadId = await thread(world);
    world.sim.push({ hang: true, text: "working on it" });
    const { runId } = await world.rt.sendMessage({ threadId, text: "long task" });
    await until("streaming", () => world!.rt.views.runs.get(runId)!.items.some((i) => i.kind === "assistant_message"));
    const t0 = performance.now();
    const receipt = await world.rt.interrupt({ runId });
    expect(receipt.via).toBe("native");
    const run = await world.rt.waitForRun(runId);
    report("interrupt -> terminal (mid-stream)", performance.now() - t0);
    expect(run.status).toBe("interrupted");
    await until("the model request to be aborted", () => world!.sim.requests.at(-1)!.aborted);
  });

  it("a silent turn Codex is still running is vouched for by thread/read, not failed by the watchdog", async () => {
    world = await codexWorld({ runtime: { turnSilenceMs: 100 } });
    await conformance.silentTurnVouchedFor(asProvider(world));
  });

  it("interrupts while an approval is pending: the request closes, the command never runs", async () => {
    world = await codexWorld();
    await conformance.interruptWhileRequestPending(asProvider(world), shell("echo never > never.txt"));
  });

  it("steers natively: the steer text reaches the model within the same run", async () => {
    world = await codexWorld();
    const threadId = await thread(world);
    world.sim.push({ hang: true, text: "thinking" }, sawInNextRequest("also consider this"));
    const { runId } = await world.rt.sendMessage({ threadId, text: "long" });
    await until("streaming", () => world!.rt.views.runs.get(runId)!.items.some((i) => i.kind === "assistant_message"));
    const steer = await world.rt.sendMessage({ threadId, text: "also consider this", mode: "steer" });
    expect(steer).toMatchObject({ disposition: "steered", via: "native", runId });
    const run = await world.rt.waitForRun(runId);
    expect(run.status).toBe("completed");
    expect(run.attempts).toHaveLength(1);
    expect(run.items.map((i) => [i.kind, i.intent ?? null, i.text ?? null])).toContainEqual([
      "user_message",
      "steer",
      "also consider this",
    ]);
    expect(run.items.at(-1)?.text).toBe("saw also consider this");
  });
});

describe("codex: threads", () => {
  it("resumes the thread in a new host process with its history", async () => {
    world = await codexWorld();
    await conformance.resumesInNewHost(asProvider(world));
  });

  it("forks natively: the fork holds the parent's history, the parent is untouched", async () => {
    world = await codexWorld();
    await conformance.forksNatively(asProvider(world));
  });

  it("forks after a restart: the fork's tools run in the thread's cwd, not the embedding process's", async () => {
    world = await codexWorld();
    await conformance.forkAfterReopenRunsInThreadCwd(asProvider(world), shell);
  });

  it("rolls back natively: the provider forgets the later turns, files return to the checkpoint", async () => {
    world = await codexWorld({ runtime: { checkpoints: true } });
    await conformance.rollsBackWithFiles(asProvider(world), []);
  });

  it(
    "SIGKILL of the Codex host mid-turn fails the run and expires its approval; " +
      "the next run gets a new host and resumes the thread",
    async () => {
      world = await codexWorld();
      await conformance.survivesHostSigkill(asProvider(world), shell("echo never > never.txt"));
    },
  );
});
