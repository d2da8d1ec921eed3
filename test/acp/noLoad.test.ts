import { join } from "node:path";
import { afterEach, describe, expect, it } from "vitest";
import { createAcpAdapter } from "../../src/adapters/acp/adapter.js";
import { FAKE_AGENT, fakeWorld, TARGET, type FakeScript, type FakeWorld } from "./fakeAgent.js";

/**
 * An agent that advertises neither `session/load` nor `session/resume` (ACP lets it): its thread cannot be taken up
 * in a new agent process. The resume fails typed (`resume_failed`), and the runtime opens a new ACP session and hands
 * it the conversation (the handoff item, reason `resume_failed`, a full summary as user context): the degradation is
 * visible, nothing is lost.
 */

const worlds: FakeWorld[] = [];
afterEach(async () => {
  for (const w of worlds.splice(0)) await w.cleanup();
});

/** An agent that cannot load: its `initialize` advertises nothing. */
const CANNOT_LOAD: FakeScript = {
  initialize: [{ reply: { protocolVersion: 1, agentCapabilities: {}, authMethods: [] } }],
};

describe("acp: an agent that cannot load a session", () => {
  it("a new agent process rebuilds the thread with a full handoff, recorded as resume_failed", async () => {
    const first = await fakeWorld(CANNOT_LOAD);
    worlds.push(first);
    const rt = await first.open();
    const { threadId } = await rt.createThread({ providerTarget: TARGET, cwd: first.root });
    expect((await rt.waitForRun((await rt.sendMessage({ threadId, text: "the word is HERON" })).runId)).status).toBe(
      "completed",
    );
    await rt.close();
    // A new runtime on the same data, with a new adapter and so a new agent process, which cannot load the session.
    const fresh = createAcpAdapter({
      agent: {
        command: process.execPath,
        args: [FAKE_AGENT],
        env: { FAKE_ACP_SCRIPT: join(first.root, "script.json") },
        cwd: first.root,
      },
    });
    const again = await first.open({ providers: { [TARGET]: fresh } });
    const next = await again.waitForRun((await again.sendMessage({ threadId, text: "what was the word?" })).runId);
    expect(next.status).toBe("completed");
    expect(next.items.find((i) => i.kind === "handoff")?.detail).toMatchObject({
      reason: "resume_failed",
      strategy: "full_thread_summary",
    });
    // The new ACP session's first prompt carried the conversation, as user context before the user's text.
    const prompts = first.sent().filter((m) => m.method === "session/prompt");
    expect(prompts).toHaveLength(2);
    const blocks = (prompts[1]!.params as { prompt: Array<{ text: string }> }).prompt.map((b) => b.text);
    expect(blocks).toHaveLength(2);
    expect(blocks[0]).toContain("HERON");
    expect(blocks[1]).toBe("what was the word?");
    // The agent was asked for no session/load (it advertises none): each process made a session of its own.
    expect(first.sent().filter((m) => m.method === "session/load")).toEqual([]);
    expect(first.sent().filter((m) => m.method === "session/new")).toHaveLength(2);
  });
});
