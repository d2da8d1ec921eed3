import { describe, expect, it } from "vitest";
import { identify, permissionPayload } from "../../src/adapters/claude/tools.js";
import { ProviderEventSchema } from "../../src/adapters/contract.js";
import { ClaudeThreadMapper } from "../../src/adapters/claude/mapper.js";
import type { SDKMessage } from "../../src/adapters/claude/protocol/sdk.js";

/**
 * Claude's tools as the runtime sees them. A tool's input is what the model wrote: fields of the wrong type or
 * missing read as absent, and never make a malformed event.
 */

const toolUse = (name: string, input: unknown) =>
  ({
    type: "assistant",
    parent_tool_use_id: null,
    message: { id: "msg_1", content: [{ type: "tool_use", id: "toolu_1", name, input }] },
  }) as unknown as SDKMessage;

describe("claude tools", () => {
  it("names each tool's role and detail, by the SDK's field names", () => {
    expect(identify("Bash", { command: "ls", description: "list" })).toEqual({
      role: "item",
      kind: "command_execution",
      detail: { command: "ls" },
    });
    expect(identify("Edit", { file_path: "/w/a.ts", old_string: "a", new_string: "b" })).toEqual({
      role: "item",
      kind: "file_change",
      detail: { path: "/w/a.ts", diff: "+b" },
    });
    expect(identify("NotebookEdit", { notebook_path: "/w/n.ipynb" })).toMatchObject({ detail: { path: "/w/n.ipynb" } });
    expect(identify("Agent", { prompt: "look", subagent_type: "Explore" })).toEqual({
      role: "subagent",
      agent: "Explore",
      prompt: "look",
    });
    expect(identify("Task", {})).toEqual({ role: "subagent", agent: "general-purpose" });
    expect(identify("ExitPlanMode", { plan: "1. do" })).toEqual({ role: "plan", text: "1. do" });
    expect(identify("TodoWrite", { todos: [{ content: "a", status: "in_progress", activeForm: "A" }] })).toEqual({
      role: "todo",
      items: [{ text: "a", status: "in_progress" }],
    });
    expect(identify("WebSearch", { query: "q" })).toEqual({
      role: "item",
      kind: "tool_call",
      detail: { toolName: "WebSearch", input: { query: "q" } },
    });
  });

  it("reads fields of the wrong type as absent: the events stay of the contract's shape", () => {
    const odd: Array<[string, unknown]> = [
      ["Bash", { command: 7 }],
      ["Edit", { file_path: ["x"], new_string: {} }],
      ["TodoWrite", { todos: [null, { content: 3, status: "done" }] }],
      ["TodoWrite", { todos: "none" }],
      ["Agent", { prompt: 1, subagent_type: null }],
      ["ExitPlanMode", { plan: 2 }],
      ["Bash", null],
      ["Read", "a string"],
    ];
    for (const [name, input] of odd) {
      const events = new ClaudeThreadMapper("thread").map(toolUse(name, input));
      expect(events.length, name).toBe(1);
      for (const event of events)
        expect(ProviderEventSchema.safeParse(event).success, JSON.stringify(event)).toBe(true);
    }
    expect(identify("TodoWrite", { todos: [null, { content: 3, status: "done" }] })).toEqual({
      role: "todo",
      items: [
        { text: "", status: "pending" },
        { text: "", status: "pending" },
      ],
    });
  });

  it("makes a permission prompt the request it stands for", () => {
    expect(permissionPayload("Bash", { command: "rm x", description: "tidy" })).toEqual({
      kind: "command",
      command: "rm x",
      reason: "tidy",
    });
    expect(permissionPayload("Write", { file_path: "/w/b" })).toEqual({ kind: "file_change", path: "/w/b" });
    expect(permissionPayload("Read", { file_path: "/etc/hosts" })).toEqual({ kind: "file_read", path: "/etc/hosts" });
    expect(
      permissionPayload("AskUserQuestion", {
        questions: [
          { question: "Which?", header: "Pick", options: [{ label: "A", description: "a" }], multiSelect: 1 },
        ],
      }),
    ).toEqual({
      kind: "user_input",
      questions: [{ id: "Which?", question: "Which?", header: "Pick", options: [{ label: "A", description: "a" }] }],
    });
    expect(permissionPayload("ExitPlanMode", { plan: "p" })).toEqual({ kind: "plan_approval", plan: "p" });
    expect(permissionPayload("WebFetch", { url: "u" })).toEqual({
      kind: "tool_approval",
      toolName: "WebFetch",
      input: { url: "u" },
    });
  });
});
