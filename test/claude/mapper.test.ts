import { describe, expect, it } from "vitest";
import { ClaudeThreadMapper, cutAfter, lastPrompt, type TranscriptEntry } from "../../src/adapters/claude/mapper.js";
import type { SDKMessage } from "../../src/adapters/claude/protocol/sdk.js";

/**
 * Where a rollback resumes Claude's session, from its transcript as `getSessionMessages`
 * returns it (entries as Claude Code 2.1 writes them: prompts, slash-command records, tool
 * results, the interrupt marker).
 */

/** As much of an SDK message as the mapper reads (the SDK's types require fields it never reads). */
const sdk = (message: object) => message as SDKMessage;

const user = (uuid: string, content: unknown): TranscriptEntry => ({
  type: "user",
  uuid,
  parent_tool_use_id: null,
  message: { role: "user", content },
});
const assistant = (uuid: string, text: string): TranscriptEntry => ({
  type: "assistant",
  uuid,
  parent_tool_use_id: null,
  message: { role: "assistant", content: [{ type: "text", text }] },
});
const text = (t: string) => [{ type: "text", text: t }];

const transcript: TranscriptEntry[] = [
  user("p1", text("first")),
  assistant("a1", "one"),
  user("cmd", "<command-name>/model</command-name>"),
  user("out", "<local-command-stdout>Set model to `claude-haiku-4-5`</local-command-stdout>"),
  user("p2", text("second")),
  {
    type: "assistant",
    uuid: "a2-tool",
    parent_tool_use_id: null,
    message: { content: [{ type: "tool_use", id: "toolu_4", name: "Bash", input: {} }] },
  },
  user("r2", [{ type: "tool_result", tool_use_id: "toolu_4", content: "hi" }]),
  { type: "assistant", uuid: "sub", parent_tool_use_id: "toolu_4", message: { content: text("a subagent's words") } },
  assistant("a2", "two"),
  user("p3", text("third")),
  assistant("a3", "working"),
  user("int", text("[Request interrupted by user]")),
  user("p4", text("also consider this")),
  assistant("a4", "done"),
];

describe("claude rollback point", () => {
  it("cuts just before the first dropped prompt; interrupted attempts are turns, the interrupt marker is not", () => {
    expect(cutAfter(transcript, 1)).toBe("int");
    expect(cutAfter(transcript, 2)).toBe("a2");
    expect(cutAfter(transcript, 3)).toBe("out");
  });

  it("refuses to drop every turn or more turns than there are, and drops nothing for zero", () => {
    expect(cutAfter(transcript, 4)).toBeNull();
    expect(cutAfter(transcript, 9)).toBeNull();
    expect(cutAfter(transcript, 0)).toBeNull();
    expect(cutAfter([], 1)).toBeNull();
  });

  it("finds the last prompt Claude wrote down (not its interrupt marker)", () => {
    expect(lastPrompt(transcript)).toBe("also consider this");
    expect(lastPrompt(transcript.slice(0, 12))).toBe("third");
    expect(lastPrompt([])).toBeNull();
  });
});

describe("claude subagent of a permission prompt", () => {
  // As Claude sends them: the Agent tool's use, then its task's start naming the agent id its prompts carry.
  const agentUse = {
    type: "assistant",
    parent_tool_use_id: null,
    message: { id: "msg_1", content: [{ type: "tool_use", id: "toolu_2", name: "Agent", input: { prompt: "p" } }] },
  };
  const taskStarted = (taskId: string, toolUseId: string) => ({
    type: "system",
    subtype: "task_started",
    task_id: taskId,
    tool_use_id: toolUseId,
  });

  it("names the subagent's item once its task's start is mapped, asked before or after", async () => {
    const mapper = new ClaudeThreadMapper("thread");
    const signal = new AbortController().signal;
    mapper.map(sdk(agentUse));
    // Claude's prompt can reach the host before the message saying the task started has been mapped.
    const early = mapper.subagentRef("agent-a", signal);
    expect(mapper.map(sdk(taskStarted("agent-a", "toolu_2")))).toEqual([]);
    expect(await early).toBe("toolu_2");
    expect(await mapper.subagentRef("agent-a", signal)).toBe("toolu_2");
  });

  it("names none for a task of no subagent it knows, or once the prompt is aborted", async () => {
    const mapper = new ClaudeThreadMapper("thread");
    const shell = mapper.subagentRef("task-b", new AbortController().signal);
    mapper.map(sdk(taskStarted("task-b", "toolu_9")));
    expect(await shell).toBeUndefined();
    const aborted = new AbortController();
    const waiting = mapper.subagentRef("agent-c", aborted.signal);
    aborted.abort();
    expect(await waiting).toBeUndefined();
  });
});

describe("claude items beside a running subagent", () => {
  // Claude's SDK names the task a message belongs to (`parent_tool_use_id`), and `null` for the parent's own.
  const toolUse = (parent: string | null, id: string) => ({
    type: "assistant",
    parent_tool_use_id: parent,
    message: { id: `msg_${id}`, content: [{ type: "tool_use", id, name: "Bash", input: { command: "ls" } }] },
  });

  it("says a tool of the parent is the turn's own, and a subagent's tool is its task's", () => {
    const mapper = new ClaudeThreadMapper("thread");
    expect(mapper.map(sdk(toolUse(null, "toolu_root")))).toMatchObject([
      { type: "item.started", itemRef: "toolu_root", parentItemRef: null },
    ]);
    expect(mapper.map(sdk(toolUse("toolu_task", "toolu_sub")))).toMatchObject([
      { type: "item.started", itemRef: "toolu_sub", parentItemRef: "toolu_task" },
    ]);
  });

  it("says a streamed item (only the parent streams) is the turn's own", () => {
    const mapper = new ClaudeThreadMapper("thread");
    const start = { type: "content_block_start", index: 0, content_block: { type: "text", text: "" } };
    const started = mapper.map(sdk({ type: "stream_event", parent_tool_use_id: null, event: start }));
    expect(started).toMatchObject([{ type: "item.started", kind: "assistant_message", parentItemRef: null }]);
  });
});
