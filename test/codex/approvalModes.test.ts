import { existsSync } from "node:fs";
import { join } from "node:path";
import { afterEach, describe, expect, it } from "vitest";
import type { CodexAdapterOptions } from "../../src/adapters/codex/adapter.js";
import { isTerminalRunStatus } from "../../src/runtime/projectionRuns.js";
import { codexSimulatorOptions } from "../../src/adapters/codex/transport.js";
import { codexWorld, sawInNextRequest, shell, until, type CodexWorld } from "./harness.js";

/**
 * The runtime mode's approvals on the real Codex binary, through the runtime, against the model
 * simulator. `approvals: "never"` runs a session's turns under Codex's `never` policy; `on_request`
 * under the adapter's `approvalPolicy` (the harness: `untrusted`, which asks before any command
 * that is not known to be safe), or Codex's configured policy when the adapter names none.
 * Codex keeps a thread's last policy, so every turn restates its session's.
 */

let world: CodexWorld | null = null;
afterEach(async () => {
  await world?.cleanup();
  world = null;
});

async function thread(w: CodexWorld): Promise<string> {
  return (await w.rt.createThread({ providerTarget: "codex", cwd: w.workspace })).threadId;
}

/** A command the model runs in the sandbox, asking for nothing itself. */
const command = (cmd: string) => ({ tools: [{ name: "exec_command", args: { cmd } }] });
const never = { runtimeMode: { approvals: "never" as const } };
const onRequest = { runtimeMode: { approvals: "on_request" as const } };

/** Waits until the run ends or asks something, whichever comes first: a run that asks never ends unanswered. */
async function endOrAsk(w: CodexWorld, threadId: string, runId: string) {
  await until(
    "the run to end or ask",
    () => isTerminalRunStatus(w.rt.views.runs.get(runId)!.status) || w.rt.views.pendingRequests(threadId).length > 0,
  );
  return w.rt.views.pendingRequests(threadId);
}

describe("codex: approvals in the runtime mode", () => {
  it("never: a command the policy would ask about runs without a request; on_request asks again", async () => {
    world = await codexWorld();
    const w = world;
    const threadId = await thread(w);
    w.sim.push(command("echo unasked > never.txt && echo NEVER-$((6*7))"), sawInNextRequest("NEVER-42"));
    const unasked = await w.rt.sendMessage({ threadId, text: "run it", ...never });
    expect(await endOrAsk(w, threadId, unasked.runId)).toEqual([]);
    const run = await w.rt.waitForRun(unasked.runId);
    expect(run.status).toBe("completed");
    expect(run.items.find((i) => i.kind === "command")?.output).toContain("NEVER-42");
    expect(run.items.at(-1)?.text).toBe("saw NEVER-42");
    expect(existsSync(join(w.workspace, "never.txt"))).toBe(true);

    // The thread ran under `never`, which Codex keeps: the on_request session's turn restates `untrusted`.
    w.sim.push(command("echo asked > asked.txt && echo ASKED-$((6*7))"), sawInNextRequest("ASKED-42"));
    const asked = await w.rt.sendMessage({ threadId, text: "run this", ...onRequest });
    const [request] = await endOrAsk(w, threadId, asked.runId);
    expect(request?.payload).toMatchObject({ kind: "command", command: expect.stringContaining("echo asked") });
    await w.rt.respond({ requestId: request!.requestId, response: { kind: "decision", decision: "accept" } });
    expect((await w.rt.waitForRun(asked.runId)).items.at(-1)?.text).toBe("saw ASKED-42");
  });

  it("on_request without an adapter policy restates Codex's configured one after a turn under never", async () => {
    // Codex's configured policy, set the way an embedder sets any Codex config (`untrusted` is no config value in
    // 0.171: the app-server refuses to start with it).
    const adapter = (sim: { url: string }): Partial<CodexAdapterOptions> => ({
      approvalPolicy: undefined,
      config: { ...codexSimulatorOptions(sim.url).config, approval_policy: "on-request" },
    });
    world = await codexWorld({ adapter });
    const w = world;
    const threadId = await thread(w);
    w.sim.push({ text: "nothing to run" });
    await w.rt.waitForRun((await w.rt.sendMessage({ threadId, text: "hi", ...never })).runId);

    // The configured policy (on-request) asks before an escalated command.
    w.sim.push(shell("echo escalated > escalated.txt && echo ESC-$((6*7))"), sawInNextRequest("ESC-42"));
    const { runId } = await w.rt.sendMessage({ threadId, text: "run it", ...onRequest });
    const [request] = await endOrAsk(w, threadId, runId);
    expect(request?.payload).toMatchObject({ kind: "command", command: expect.stringContaining("echo escalated") });
    await w.rt.respond({ requestId: request!.requestId, response: { kind: "decision", decision: "accept" } });
    expect((await w.rt.waitForRun(runId)).items.at(-1)?.text).toBe("saw ESC-42");
    expect(existsSync(join(w.workspace, "escalated.txt"))).toBe(true);
  });
});
