import { describe, expect, it } from "vitest";
import { createScriptedAdapter } from "../../src/index.js";
import { nextEvent, ofType, openTestRuntime, recordCalls } from "../support/runtime.js";

describe("plans, todo lists and subagents in the projection", () => {
  it("keeps a live plan and a proposed plan apart, and completes both with the turn", async () => {
    const adapter = createScriptedAdapter({
      capabilities: { planning: { planDeltasHaveItemIds: false } },
      script: () => [
        { type: "plan", steps: [{ step: "read", status: "in_progress" }] },
        { type: "plan", steps: [{ step: "read", status: "completed" }] },
        { type: "proposed_plan", text: "1. read 2. fix" },
        { type: "todo", items: [{ text: "fix", status: "pending" }] },
      ],
    });
    const { rt, cleanup } = await openTestRuntime({ scripted: adapter });
    try {
      const { threadId } = await rt.createThread({ providerTarget: "scripted" });
      const run = await rt.waitForRun((await rt.sendMessage({ threadId, text: "plan it" })).runId);
      const artifacts = run.items.filter((i) => i.kind !== "user_message");
      expect(artifacts.map((i) => [i.kind, i.status, i.detail?.status])).toEqual([
        ["plan", "complete", "completed"],
        ["proposed_plan", "complete", "completed"],
        ["todo_list", "complete", "completed"],
      ]);
      expect(artifacts[0]!.detail?.steps).toEqual([{ step: "read", status: "completed" }]);
      expect(artifacts[1]!.text).toBe("1. read 2. fix");
    } finally {
      await cleanup();
    }
  });

  it("shows a child thread the provider never announced as a subagent node under the run", async () => {
    // Subagent thread ids but no lifecycle events: the child turn arrives on an unknown thread.
    const inner = createScriptedAdapter({
      capabilities: { subagents: { emitsSubagentLifecycle: false } },
      script: () => [
        { type: "subagent", agent: "helper", prompt: "look", steps: [{ type: "text", text: "child says hi" }] },
        { type: "text", text: "parent done" },
      ],
    });
    const { rt, cleanup } = await openTestRuntime({ scripted: inner });
    try {
      const { threadId } = await rt.createThread({ providerTarget: "scripted" });
      const run = await rt.waitForRun((await rt.sendMessage({ threadId, text: "go" })).runId);
      expect(run.status).toBe("completed");
      const subagent = run.items.find((i) => i.kind === "subagent")!;
      expect(subagent.status).toBe("complete");
      const child = run.items.find((i) => i.kind === "assistant_message" && i.parentId === subagent.id);
      expect(child?.text).toBe("child says hi");
      const parent = run.items.find((i) => i.kind === "assistant_message" && i.parentId !== subagent.id);
      expect(parent?.text).toBe("parent done");
    } finally {
      await cleanup();
    }
  });
});

describe("a provider thread reported broken", () => {
  it("is never resumed again: the next run gets a replacement that hears the whole thread", async () => {
    let turn = 0;
    const recorded = recordCalls(
      createScriptedAdapter({
        script: () =>
          turn++ === 0
            ? [
                { type: "text", text: "half" },
                { type: "fail", message: "context corrupted", broken: true },
              ]
            : [{ type: "text", text: "fresh" }],
      }),
    );
    const { rt, events, cleanup } = await openTestRuntime({ scripted: recorded.adapter });
    try {
      const { threadId } = await rt.createThread({ providerTarget: "scripted" });
      const first = await rt.waitForRun((await rt.sendMessage({ threadId, text: "remember 7" })).runId);
      expect([first.status, first.failure?.message]).toEqual(["failed", "context corrupted"]);
      await rt.waitForRun((await rt.sendMessage({ threadId, text: "again" })).runId);
      const bound = ofType(events, "provider_thread.bound");
      expect(bound.map((b) => b.via)).toEqual(["created", "replaced"]);
      expect(ofType(events, "provider_thread.closed")).toEqual([
        expect.objectContaining({ providerThreadId: bound[0]!.providerThreadId, reason: "broken" }),
      ]);
      expect(ofType(events, "handoff.created")[0]).toMatchObject({ reason: "thread_broken", coveredRunOrdinals: [1] });
      const sends = recorded.calls.filter((c) => c.method === "sendRun");
      expect(sends[1]!.input.context).toMatchObject({ kind: "rebuild", text: expect.stringContaining("remember 7") });
    } finally {
      await cleanup();
    }
  });
});

describe("an approval inside a subagent the provider never announced", () => {
  it("is routed to the run, answerable, and the run completes (review a10)", async () => {
    const adapter = createScriptedAdapter({
      capabilities: { subagents: { emitsSubagentLifecycle: false } },
      script: () => [
        {
          type: "subagent",
          agent: "worker",
          prompt: "p",
          steps: [{ type: "command", command: "make", output: "ok", approval: true }],
        },
        { type: "text", text: "after" },
      ],
    });
    const { rt, events, cleanup } = await openTestRuntime({ s: adapter });
    try {
      const { threadId } = await rt.createThread({ providerTarget: "s" });
      const { runId } = await rt.sendMessage({ threadId, text: "go" });
      const opened = await nextEvent(rt, "request.opened", (e) => e.runId === runId);
      expect((await rt.readThread(threadId)).runs[0]!.status).toBe("waiting");
      await rt.respond({ requestId: opened.event.requestId, response: { kind: "decision", decision: "accept" } });
      const run = await rt.waitForRun(runId);
      expect(run.status).toBe("completed");
      const subagent = run.items.find((i) => i.kind === "subagent");
      expect(subagent).toBeDefined();
      expect(run.items.find((i) => i.kind === "approval")?.parentId).toBe(subagent!.id);
      expect(run.items.at(-1)).toMatchObject({ kind: "assistant_message", text: "after" });
      expect(ofType(events, "warning")).toEqual([]);
    } finally {
      await cleanup();
    }
  });
});
