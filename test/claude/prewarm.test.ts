import { afterEach, describe, expect, it } from "vitest";
import { hostKey } from "../../src/runtime/hosts/hostKey.js";
import { isRunning } from "../../src/runtime/hosts/process.js";
import { claudeWorld, until, type ClaudeWorld } from "./harness.js";

/**
 * The `prewarm` option on the real Claude host (the pinned Agent SDK, against the model simulator): the host is
 * running before any thread exists, the first turn runs in that very process, and close stops it.
 */

let world: ClaudeWorld | null = null;
afterEach(async () => {
  await world?.cleanup();
  world = null;
});

describe("claude: prewarm", () => {
  it("starts the host at open; the first turn runs in it; close stops it", async () => {
    world = await claudeWorld({ prewarm: ["claude"] });
    const w = world;
    const key = await hostKey(w.adapter.hostSpec);
    await until("the prewarmed host", () => w.rt.hosts.pids(key).length > 0);
    const [pid] = w.rt.hosts.pids(key);
    expect(w.rt.listThreads()).toEqual([]);

    const { threadId } = await w.rt.createThread({ providerTarget: "claude", cwd: w.workspace });
    w.sim.push({ text: "warm hello" });
    const run = await w.rt.waitForRun((await w.rt.sendMessage({ threadId, text: "hi" })).runId);
    expect(run.status).toBe("completed");
    const sessions = [...w.rt.views.sessions.keys()];
    expect(sessions.map((id) => w.adapter.hostPid(id))).toEqual([pid]);
    expect(w.rt.hosts.pids(key)).toEqual([pid]);

    await w.rt.close();
    expect(isRunning(pid!)).toBe(false);
  });
});
