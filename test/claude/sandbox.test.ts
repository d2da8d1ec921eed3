import { existsSync } from "node:fs";
import { join } from "node:path";
import { afterEach, describe, expect, it } from "vitest";
import type { RequestPayload } from "../../src/domain/items.js";
import { claudeWorld, permissionModes, until, type ClaudeWorld } from "./harness.js";

/**
 * The runtime's `sandbox` option on the real Claude Code binary (offline, against the model simulator): what Claude
 * may do without asking, as the permission mode its host starts it under (read from Claude's command line).
 */

let world: ClaudeWorld | null = null;
afterEach(async () => {
  await world?.cleanup();
  world = null;
});

const write = (path: string) => ({ tools: [{ name: "Write", args: { file_path: path, content: "written" } }] });
const bash = (command: string) => ({
  tools: [{ name: "Bash", args: { command, description: "needed for the test" } }],
});

async function thread(w: ClaudeWorld): Promise<string> {
  return (await w.rt.createThread({ providerTarget: "claude", cwd: w.workspace })).threadId;
}

/** Waits for the run to end or for a request of the thread to open, whichever comes first: the request, if any. */
async function nextRequestOrEnd(w: ClaudeWorld, threadId: string, runId: string) {
  const ended = () => ["completed", "failed", "interrupted", "cancelled"].includes(w.rt.views.runs.get(runId)!.status);
  await until("a request or the run's end", () => w.rt.views.pendingRequests(threadId).length > 0 || ended());
  return w.rt.views.pendingRequests(threadId)[0] ?? null;
}

async function decline(w: ClaudeWorld, threadId: string, runId: string, expected: RequestPayload): Promise<void> {
  const request = await nextRequestOrEnd(w, threadId, runId);
  expect(request?.payload).toMatchObject(expected);
  await w.rt.respond({ requestId: request!.requestId, response: { kind: "decision", decision: "decline" } });
  await until("the request resolved", () => w.rt.views.requests.get(request!.requestId)?.status !== "pending");
}

describe("claude: the runtime's sandbox", () => {
  it("read-only: Claude asks before a write and a file-system command; declined, nothing is written", async () => {
    world = await claudeWorld({ sandbox: "read-only" });
    const threadId = await thread(world);
    const file = join(world.workspace, "w.txt");
    world.sim.push(write(file), bash("mkdir made"), { text: "done" });
    const { runId } = await world.rt.sendMessage({ threadId, text: "write things" });
    await decline(world, threadId, runId, { kind: "file_change", path: file });
    expect(permissionModes(world)).toEqual(["default"]);
    await decline(world, threadId, runId, { kind: "command", command: "mkdir made" });
    expect((await world.rt.waitForRun(runId)).status).toBe("completed");
    expect([existsSync(file), existsSync(join(world.workspace, "made"))]).toEqual([false, false]);
  });

  it(
    "workspace-write (the default): writes and file-system commands in the cwd go ahead without asking; " +
      "a write outside it asks",
    async () => {
      world = await claudeWorld();
      const threadId = await thread(world);
      const inside = join(world.workspace, "w.txt");
      const outside = join(world.root, "outside.txt");
      world.sim.push(write(inside), bash("mkdir made"), write(outside), { text: "done" });
      const { runId } = await world.rt.sendMessage({ threadId, text: "write things" });
      await decline(world, threadId, runId, { kind: "file_change", path: outside });
      expect(permissionModes(world)).toEqual(["acceptEdits"]);
      expect((await world.rt.waitForRun(runId)).status).toBe("completed");
      expect([existsSync(inside), existsSync(join(world.workspace, "made")), existsSync(outside)]).toEqual([
        true,
        true,
        false,
      ]);
    },
  );

  it("full-access: nothing asks, outside the cwd either", async () => {
    // As root, Claude bypasses permissions only when told it runs in a deliberate sandbox (IS_SANDBOX=1, GAP.md).
    world = await claudeWorld({ sandbox: "full-access" }, { env: { IS_SANDBOX: "1" } });
    const threadId = await thread(world);
    const outside = join(world.root, "outside.txt");
    world.sim.push(write(outside), bash("echo ran > ran.txt"), { text: "done" });
    const { runId } = await world.rt.sendMessage({ threadId, text: "write things" });
    expect(await nextRequestOrEnd(world, threadId, runId)).toBeNull();
    expect((await world.rt.waitForRun(runId)).status).toBe("completed");
    expect(permissionModes(world)).toEqual(["bypassPermissions"]);
    expect([existsSync(outside), existsSync(join(world.workspace, "ran.txt"))]).toEqual([true, true]);
  });
});
