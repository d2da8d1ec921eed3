import { existsSync } from "node:fs";
import { writeFile } from "node:fs/promises";
import { join } from "node:path";
import { afterEach, describe, expect, it } from "vitest";
import type { DomainEvent, LogRecord } from "../../src/index.js";
import { sawInNextRequest as saw } from "../codex/harness.js";
import { ofType } from "../support/runtime.js";
import { claudeWorld, until, type ClaudeWorld } from "./harness.js";

/**
 * Which approvals the real Claude Code binary asks for, and from where (offline, against the model simulator), as the
 * capability record declares them: the runtime declines and warns about any kind or origin the record denies.
 */

let world: ClaudeWorld | null = null;
afterEach(async () => {
  await world?.cleanup();
  world = null;
});

/** Every durable event of the world's runtime, from the start of its log. */
function recorded(w: ClaudeWorld): LogRecord<DomainEvent>[] {
  const events: LogRecord<DomainEvent>[] = [];
  w.rt.subscribe({ afterSeq: 0 }, (record) => events.push(record));
  return events;
}

const protocolWarnings = (events: LogRecord<DomainEvent>[]) =>
  ofType(events, "warning").filter((w) => w.message.startsWith("protocol_error:"));

async function thread(w: ClaudeWorld): Promise<string> {
  return (await w.rt.createThread({ providerTarget: "claude", cwd: w.workspace })).threadId;
}

/** The thread's next pending request (one that is not `answered`). */
async function nextRequest(w: ClaudeWorld, threadId: string, answered: ReadonlySet<string> = new Set()) {
  const open = () => w.rt.views.pendingRequests(threadId).filter((r) => !answered.has(r.requestId));
  await until("a permission prompt", () => open().length > 0);
  return open()[0]!;
}

async function answer(w: ClaudeWorld, requestId: string, decision: "accept" | "decline"): Promise<void> {
  await w.rt.respond({ requestId, response: { kind: "decision", decision } });
  await until("the request resolved", () => w.rt.views.requests.get(requestId)?.status !== "pending");
}

describe("claude: file-read approvals", () => {
  it("asks before a Read outside the cwd: accepted, Claude reads the file; declined, it does not", async () => {
    // The default sandbox (workspace-write): reads inside the cwd go ahead, a read outside it asks.
    world = await claudeWorld();
    const events = recorded(world);
    const threadId = await thread(world);
    expect(world.rt.affordances(threadId).approvalKinds).toContain("file_read");
    const outside = join(world.root, "outside.txt");
    const read = { tools: [{ name: "Read", args: { file_path: outside } }] };

    for (const decision of ["accept", "decline"] as const) {
      // Each run's own content: what Claude read in an earlier run is in the conversation the model is sent.
      const content = `OUTSIDE-${decision}`;
      await writeFile(outside, `${content}\n`);
      world.sim.push(read, saw(content));
      const { runId } = await world.rt.sendMessage({ threadId, text: `read it (${decision})` });
      const request = await nextRequest(world, threadId);
      expect(request.payload).toEqual({ kind: "file_read", path: outside });
      await answer(world, request.requestId, decision);
      const run = await world.rt.waitForRun(runId);
      expect(run.status).toBe("completed");
      expect(run.items.find((i) => i.kind === "tool")?.detail).toMatchObject({
        status: decision === "accept" ? "completed" : "failed",
      });
      expect(run.items.at(-1)?.text).toBe(`${decision === "accept" ? "saw" : "missing"} ${content}`);
      expect(world.rt.views.requests.get(request.requestId)?.status).toBe("resolved");
    }
    expect(protocolWarnings(events)).toEqual([]);
  });
});

describe("claude: approvals from subagents", () => {
  it("a subagent's own permission prompts hang under the subagent's node and are answered there", async () => {
    // Under read-only, the subagent's command and write both ask.
    world = await claudeWorld({ sandbox: "read-only" });
    const events = recorded(world);
    const threadId = await thread(world);
    const file = join(world.workspace, "sub.txt");
    const agent = { description: "delegate", prompt: "make things", subagent_type: "general-purpose" };
    world.sim.push(
      { tools: [{ name: "Agent", args: agent }] },
      { tools: [{ name: "Bash", args: { command: "mkdir made", description: "needed for the test" } }] },
      { tools: [{ name: "Write", args: { file_path: file, content: "written" } }] },
      { text: "SUB-DONE" },
      { text: "parent done" },
    );
    const { runId } = await world.rt.sendMessage({ threadId, text: "delegate it" });
    const command = await nextRequest(world, threadId);
    expect(command.payload).toMatchObject({ kind: "command", command: "mkdir made" });
    await answer(world, command.requestId, "accept");
    const write = await nextRequest(world, threadId, new Set([command.requestId]));
    expect(write.payload).toMatchObject({ kind: "file_change", path: file });
    await answer(world, write.requestId, "decline");
    const run = await world.rt.waitForRun(runId);
    expect(run.status).toBe("completed");

    const subagent = ofType(events, "node.started").find((n) => n.runId === runId && n.kind === "subagent")!;
    const parentOf = (nodeId: string) => ofType(events, "node.started").find((n) => n.nodeId === nodeId)?.parentNodeId;
    expect([parentOf(command.nodeId), parentOf(write.nodeId)]).toEqual([subagent.nodeId, subagent.nodeId]);
    expect(protocolWarnings(events)).toEqual([]);
    expect(ofType(events, "policy.applied").filter((p) => p.policy === "subagent_request_at_root")).toEqual([]);
    expect([existsSync(join(world.workspace, "made")), existsSync(file)]).toEqual([true, false]);
    expect(run.items.find((i) => i.kind === "subagent")?.result).toBe("SUB-DONE");
  });
});
