import { describe, expect, it } from "vitest";
import { ProviderEventSchema, type ProviderEvent } from "../../src/adapters/contract.js";
import {
  mapUpdate,
  newThreadState,
  outcomeOf,
  permissionAnswer,
  permissionRequest,
  promptOf,
  turnEnded,
  turnFailed,
  type AcpThreadState,
} from "../../src/adapters/acp/mapper.js";
import type {
  PermissionOption,
  PromptResponse,
  RequestPermissionRequest,
  RequestPermissionResponse,
  SessionUpdate,
} from "../../src/adapters/acp/protocol/sdk.js";
import type { RawOutputFields } from "../../src/adapters/acp/tools.js";

type StopReason = PromptResponse["stopReason"];
import { RequestPayloadSchema, type RequestDecision, type RequestPayload } from "../../src/domain/items.js";
// The SDK's own wire schemas (not exported by its package entry): every input below goes through them first, so the
// mapper sees exactly what the SDK would hand it, hostile-but-valid inputs included.
import {
  zPromptResponse,
  zRequestPermissionRequest,
  zSessionUpdate,
} from "../../node_modules/@agentclientprotocol/sdk/dist/v1/unstable/schema/zod.gen.js";

/**
 * The ACP mapper against the Agent Client Protocol itself (v1: prompt-turn, tool-calls, agent-plan, the schema) and
 * the contract's documented meaning (`src/adapters/contract.ts`, `src/domain/items.ts`, docs/events.md). Every
 * expectation here comes from those texts, never from the mapper's code: a test that fails is a disagreement to
 * report, not an expectation to bend. Every event the mapper produces must parse with `ProviderEventSchema` and carry
 * the ACP session it came from as its `threadRef`.
 */

const SESSION = "sess_abc123def456";
const WHERE = { threadRef: SESSION };

/** Every event is a valid provider event of this session. */
function valid(events: ProviderEvent[]): ProviderEvent[] {
  for (const event of events) {
    const parsed = ProviderEventSchema.safeParse(event);
    expect(parsed.success, `${JSON.stringify(event).slice(0, 300)}: ${parsed.error?.message ?? ""}`).toBe(true);
    if (event.type !== "session.state") expect(event.threadRef).toBe(SESSION);
  }
  return events;
}

/** One ACP session as the client sees it: what the agent sends, through the SDK's schemas, then the mapper. */
class Session {
  readonly state: AcpThreadState = newThreadState();
  /** Everything the mapper produced so far, in order. */
  readonly events: ProviderEvent[] = [];
  /** Where the target says the agent's raw output holds a tool's output (the adapter option `rawOutput`). */
  raw: RawOutputFields = {};

  private keep(events: ProviderEvent[]): ProviderEvent[] {
    this.events.push(...valid(events));
    return events;
  }

  update(raw: Record<string, unknown>): ProviderEvent[] {
    const update = zSessionUpdate.parse(raw) as SessionUpdate;
    return this.keep(mapUpdate(this.state, WHERE, update, this.raw));
  }

  message(text: string, messageId?: string): ProviderEvent[] {
    return this.update({ sessionUpdate: "agent_message_chunk", content: { type: "text", text }, messageId });
  }

  thought(text: string, messageId?: string): ProviderEvent[] {
    return this.update({ sessionUpdate: "agent_thought_chunk", content: { type: "text", text }, messageId });
  }

  permission(
    toolCall: Record<string, unknown>,
    options: PermissionOption[] = OPTIONS,
  ): { events: ProviderEvent[]; itemRef: string | undefined; request: RequestPayload } {
    const params = zRequestPermissionRequest.parse({
      sessionId: SESSION,
      toolCall,
      options,
    }) as RequestPermissionRequest;
    const asked = permissionRequest(this.state, WHERE, params);
    this.keep(asked.events);
    const request = RequestPayloadSchema.safeParse(asked.request);
    expect(request.success, `${JSON.stringify(asked.request)}: ${request.error?.message ?? ""}`).toBe(true);
    return asked;
  }

  /** The prompt's response; `cancelAsked`: the client sent `session/cancel` for the turn (default: it did). */
  end(stopReason: StopReason, cancelAsked = true): ProviderEvent[] {
    const response = zPromptResponse.parse({ stopReason }) as PromptResponse;
    return this.keep(turnEnded(this.state, WHERE, response, cancelAsked));
  }

  fail(message: string): ProviderEvent[] {
    return this.keep(turnFailed(this.state, WHERE, message));
  }
}

type Of<T extends ProviderEvent["type"]> = Extract<ProviderEvent, { type: T }>;
const only = <T extends ProviderEvent["type"]>(events: ProviderEvent[], type: T): Array<Of<T>> =>
  events.filter((e): e is Of<T> => e.type === type);
/** The events' shapes, for sequences: `item.started:assistant_message`, `turn.terminal`... */
const shape = (events: ProviderEvent[]): string[] =>
  events.map((e) => ("kind" in e && e.type.startsWith("item.") ? `${e.type}:${e.kind}` : e.type));
const startedOf = (events: ProviderEvent[], itemRef: string) =>
  only(events, "item.started").filter((e) => e.itemRef === itemRef);
const completedOf = (events: ProviderEvent[], itemRef: string) =>
  only(events, "item.completed").filter((e) => e.itemRef === itemRef);
const text = (content: string) => ({ type: "content", content: { type: "text", text: content } });

/** The options every ACP agent may offer (tool-calls, "Permission Options"). */
const OPTIONS: PermissionOption[] = [
  { optionId: "opt-allow-once", name: "Allow once", kind: "allow_once" },
  { optionId: "opt-allow-always", name: "Always allow", kind: "allow_always" },
  { optionId: "opt-reject-once", name: "Reject", kind: "reject_once" },
  { optionId: "opt-reject-always", name: "Always reject", kind: "reject_always" },
];
const decision = (d: RequestDecision) => ({ kind: "decision" as const, decision: d });
const selected = (answer: RequestPermissionResponse): string | null =>
  answer.outcome.outcome === "selected" ? answer.outcome.optionId : null;

// Recorded from gemini-cli 0.61.0 over ACP (the reference transcript gemini-acp.jsonl): a permission request about a
// tool call never announced before, its options, and the update that completed the call.
const GEMINI_CALL = "run_shell_command__run_shell_command_1796026431621_0";
const GEMINI_OPTIONS: PermissionOption[] = [
  { optionId: "proceed_always", name: "Allow for this session", kind: "allow_always" },
  { optionId: "proceed_once", name: "Allow", kind: "allow_once" },
  { optionId: "cancel", name: "Reject", kind: "reject_once" },
];
const GEMINI_TOOL_CALL = {
  toolCallId: GEMINI_CALL,
  status: "pending",
  title: "echo approved-run > ran.txt && echo OUT-42",
  content: [text("[current working directory <workspace>] (write file)")],
  locations: [],
  kind: "execute",
};

describe("acp mapper: message and thought chunks", () => {
  // prompt-turn: "agent_message_chunk: A streamed chunk of the Agent's response." Chunks have no end of their own: a
  // run of them is one message, ended by what comes next or by the turn's end.
  it("makes consecutive agent_message_chunks one assistant message, completed when a non-chunk update arrives", () => {
    const s = new Session();
    const first = s.message("I'll analyze ");
    expect(shape(first)).toEqual(["item.started:assistant_message", "item.delta:assistant_message"]);
    expect(shape(s.message("your code "))).toEqual(["item.delta:assistant_message"]);
    expect(shape(s.message("for issues."))).toEqual(["item.delta:assistant_message"]);
    const deltas = only(s.events, "item.delta");
    expect(deltas.map((d) => d.delta).join("")).toBe("I'll analyze your code for issues.");
    expect(deltas.every((d) => d.stream === "text")).toBe(true);
    expect(only(s.events, "item.completed")).toEqual([]);

    const next = s.update({ sessionUpdate: "tool_call", toolCallId: "call_001", title: "Analyzing", kind: "other" });
    expect(shape(next)).toEqual(["item.completed:assistant_message", "item.started:tool_call"]);
    expect(only(next, "item.completed")[0]!.status).toBe("completed");
    expect(only(s.events, "item.started").filter((e) => e.kind === "assistant_message")).toHaveLength(1);
  });

  it("completes an open message at the turn's end, before the terminal", () => {
    const s = new Session();
    s.message("Hello");
    s.message(" there");
    const end = s.end("end_turn");
    expect(shape(end)).toEqual(["item.completed:assistant_message", "turn.terminal"]);
    expect(only(end, "item.completed")[0]!.status).toBe("completed");
  });

  it("ends the message when a thought chunk follows, and starts a reasoning item (and back again)", () => {
    const s = new Session();
    s.message("Let me think.");
    const thought = s.thought("The user wants X");
    expect(shape(thought)).toEqual([
      "item.completed:assistant_message",
      "item.started:reasoning",
      "item.delta:reasoning",
    ]);
    expect(only(thought, "item.delta")[0]!.delta).toBe("The user wants X");
    expect(shape(s.thought(", so Y."))).toEqual(["item.delta:reasoning"]);
    const answer = s.message("Here is Y.");
    expect(shape(answer)).toEqual([
      "item.completed:reasoning",
      "item.started:assistant_message",
      "item.delta:assistant_message",
    ]);
    expect(shape(s.end("end_turn"))).toEqual(["item.completed:assistant_message", "turn.terminal"]);
    expect(only(s.events, "item.started")).toHaveLength(3);
    expect(only(s.events, "item.completed")).toHaveLength(3);
  });

  // prompt-turn: "Chunks with the same messageId belong to the same message; a changed messageId indicates a new
  // message." The contract: a native ref is the item's `itemRef`.
  it("starts a new item when the messageId changes, each item named by its messageId", () => {
    const s = new Session();
    s.message("one ", "msg_1");
    s.message("message", "msg_1");
    const second = s.message("another", "msg_2");
    expect(shape(second)).toEqual([
      "item.completed:assistant_message",
      "item.started:assistant_message",
      "item.delta:assistant_message",
    ]);
    expect(second.map((e) => ("itemRef" in e ? e.itemRef : null))).toEqual(["msg_1", "msg_2", "msg_2"]);
    s.end("end_turn");
    for (const ref of ["msg_1", "msg_2"]) {
      expect(startedOf(s.events, ref)).toHaveLength(1);
      expect(completedOf(s.events, ref)).toHaveLength(1);
    }
    const firstDeltas = only(s.events, "item.delta").filter((d) => d.itemRef === "msg_1");
    expect(firstDeltas.map((d) => d.delta).join("")).toBe("one message");
  });

  it("names a thought's item by its messageId too", () => {
    const s = new Session();
    s.thought("hmm", "th_1");
    s.end("end_turn");
    expect(startedOf(s.events, "th_1").map((e) => e.kind)).toEqual(["reasoning"]);
    expect(completedOf(s.events, "th_1").map((e) => e.kind)).toEqual(["reasoning"]);
  });

  // The same sentence read the other way: chunks that share a messageId are ONE message, whatever comes between
  // them. One message must be one item, never two items under one native ref.
  it("keeps chunks sharing a messageId in one item, even with a tool call between them", () => {
    const s = new Session();
    s.message("Let me check. ", "msg_1");
    s.update({ sessionUpdate: "tool_call", toolCallId: "call_1", title: "Reading", kind: "read", status: "completed" });
    s.message("Done checking.", "msg_1");
    s.end("end_turn");
    expect(startedOf(s.events, "msg_1")).toHaveLength(1);
    expect(completedOf(s.events, "msg_1")).toHaveLength(1);
  });

  // A user message between two runs of agent chunks (a steer's echo, history) means the agent's message before it
  // ended: the agent's chunks after it are another message.
  it("does not merge two agent messages that a user message separates", () => {
    const s = new Session();
    s.message("First answer.");
    s.update({ sessionUpdate: "user_message_chunk", content: { type: "text", text: "and also this" } });
    s.message("Second answer.");
    s.end("end_turn");
    const messages = only(s.events, "item.started").filter((e) => e.kind === "assistant_message");
    expect(messages).toHaveLength(2);
    const firstCompleted = s.events.findIndex((e) => e.type === "item.completed" && e.kind === "assistant_message");
    const secondStarted = s.events.lastIndexOf(messages[1]!);
    expect(firstCompleted).toBeGreaterThanOrEqual(0);
    expect(firstCompleted).toBeLessThan(secondStarted);
  });

  it.each([
    ["image", { type: "image", data: "iVBORw0KGgo=", mimeType: "image/png" }],
    ["audio", { type: "audio", data: "UklGRg==", mimeType: "audio/wav" }],
    ["resource_link", { type: "resource_link", name: "main.py", uri: "file:///home/user/main.py" }],
  ])("streams nothing for non-text content (%s), and does not split the message it sits in", (_, content) => {
    const alone = new Session();
    expect(only(alone.update({ sessionUpdate: "agent_message_chunk", content }), "item.delta")).toEqual([]);

    const s = new Session();
    s.message("Look at ");
    expect(only(s.update({ sessionUpdate: "agent_message_chunk", content }), "item.delta")).toEqual([]);
    s.message("this.");
    s.end("end_turn");
    expect(only(s.events, "item.started")).toHaveLength(1);
    expect(only(s.events, "item.completed")).toHaveLength(1);
    expect(
      only(s.events, "item.delta")
        .map((d) => d.delta)
        .join(""),
    ).toBe("Look at this.");
  });
});

describe("acp mapper: tool calls", () => {
  // tool-calls, "Creating": kind is one of the closed ToolKind list; the contract's item kinds say what each is.
  it.each([
    ["execute", "command_execution"],
    ["edit", "file_change"],
    ["delete", "file_change"],
    ["move", "file_change"],
    ["read", "tool_call"],
    ["search", "tool_call"],
    ["fetch", "tool_call"],
    ["think", "tool_call"],
    ["switch_mode", "tool_call"],
    ["other", "tool_call"],
  ])("starts a %s tool call as a %s item named by its toolCallId", (kind, itemKind) => {
    const s = new Session();
    const events = s.update({ sessionUpdate: "tool_call", toolCallId: "call_001", title: "Doing it", kind });
    expect(events).toHaveLength(1);
    expect(events[0]).toMatchObject({ type: "item.started", itemRef: "call_001", kind: itemKind });
  });

  // tool-calls: kind is "The category of tool being invoked", `other` the default.
  it("starts a tool call without a kind as a generic tool call", () => {
    const s = new Session();
    const events = s.update({ sessionUpdate: "tool_call", toolCallId: "call_001", title: "Something" });
    expect(events).toMatchObject([{ type: "item.started", itemRef: "call_001", kind: "tool_call" }]);
  });

  it("gives a command its command line, and a generic tool its name and input", () => {
    const s = new Session();
    const [command] = s.update({
      sessionUpdate: "tool_call",
      toolCallId: "call_cmd",
      name: "run_shell_command",
      title: "Run the tests",
      kind: "execute",
      rawInput: { command: "npm test -- --run" },
    });
    expect(command).toMatchObject({ kind: "command_execution", detail: { command: "npm test -- --run" } });
    expect((command as Of<"item.started">).detail?.toolName).toBe("run_shell_command");

    const [read] = s.update({
      sessionUpdate: "tool_call",
      toolCallId: "call_read",
      name: "read_file",
      title: "Reading configuration file",
      kind: "read",
      rawInput: { path: "/home/user/project/config.json" },
    });
    expect(read).toMatchObject({
      kind: "tool_call",
      detail: { toolName: "read_file", input: { path: "/home/user/project/config.json" } },
    });
  });

  // tool-calls, "Diffs": path "The absolute file path being modified", oldText "The original content (null for new
  // files)", newText "The new content after modification".
  it("gives a file change its path and a diff of oldText against newText", () => {
    const s = new Session();
    const path = "/home/user/project/src/config.json";
    const [started] = s.update({
      sessionUpdate: "tool_call",
      toolCallId: "call_edit",
      title: "Enable debug",
      kind: "edit",
      locations: [{ path }],
      content: [{ type: "diff", path, oldText: '{\n  "debug": false\n}', newText: '{\n  "debug": true\n}' }],
    });
    expect(started).toMatchObject({ type: "item.started", kind: "file_change", detail: { path } });
    const diff = (started as Of<"item.started">).detail?.diff ?? "";
    const lines = diff.split("\n");
    expect(diff).toContain(path);
    expect(lines).toContain('-  "debug": false');
    expect(lines).toContain('+  "debug": true');
  });

  it("takes a file change's path from its diff when it reports no location, and diffs a new file as all added", () => {
    const s = new Session();
    const path = "/home/user/project/NEW.md";
    const [started] = s.update({
      sessionUpdate: "tool_call",
      toolCallId: "call_new",
      title: "Create NEW.md",
      kind: "edit",
      content: [{ type: "diff", path, oldText: null, newText: "# New\n\nbody\n" }],
    });
    expect(started).toMatchObject({ kind: "file_change", detail: { path } });
    const lines = ((started as Of<"item.started">).detail?.diff ?? "").split("\n");
    expect(lines).toEqual(expect.arrayContaining(["+# New", "+body"]));
    expect(lines.filter((l) => l.startsWith("-") && !l.startsWith("---"))).toEqual([]);
  });

  // prompt-turn, steps 3 and 5: tool_call (pending), tool_call_update in_progress, then the final status with its
  // content. One tool call is one item: started once, completed once.
  it("makes a tool call and its updates one item, completed once with the text of its final content", () => {
    const s = new Session();
    s.update({
      sessionUpdate: "tool_call",
      toolCallId: "call_001",
      title: "Analyzing",
      kind: "other",
      status: "pending",
    });
    s.update({ sessionUpdate: "tool_call_update", toolCallId: "call_001", status: "in_progress" });
    s.update({
      sessionUpdate: "tool_call_update",
      toolCallId: "call_001",
      status: "in_progress",
      content: [text("Found 3 configuration files...")],
    });
    const done = s.update({
      sessionUpdate: "tool_call_update",
      toolCallId: "call_001",
      status: "completed",
      content: [text("Analysis complete:\n- No syntax errors found")],
    });
    expect(startedOf(s.events, "call_001")).toHaveLength(1);
    expect(completedOf(s.events, "call_001")).toHaveLength(1);
    expect(completedOf(done, "call_001")[0]).toMatchObject({
      kind: "tool_call",
      status: "completed",
      // tool_call_update's content: "Replace the content collection": the final content is the tool's output.
      output: "Analysis complete:\n- No syntax errors found",
    });
  });

  it("completes a failed tool call as failed, with the error its content carries", () => {
    const s = new Session();
    s.update({ sessionUpdate: "tool_call", toolCallId: "call_x", title: "ls /nope", kind: "execute" });
    const failed = s.update({
      sessionUpdate: "tool_call_update",
      toolCallId: "call_x",
      status: "failed",
      content: [text("ls: cannot access '/nope': No such file or directory")],
    });
    expect(failed).toMatchObject([
      {
        type: "item.completed",
        itemRef: "call_x",
        kind: "command_execution",
        status: "failed",
        output: "ls: cannot access '/nope': No such file or directory",
      },
    ]);
  });

  // tool-calls: `rawOutput` is "Raw output returned by the tool", its shape the agent's; content is what it shows.
  it("takes a tool's raw output for its output where its content shows none: as text, or the target's field", () => {
    const s = new Session();
    s.update({ sessionUpdate: "tool_call", toolCallId: "call_r", title: "echo", kind: "execute" });
    const text = s.update({
      sessionUpdate: "tool_call_update",
      toolCallId: "call_r",
      status: "completed",
      rawOutput: "OUT-1",
    });
    expect(completedOf(text, "call_r")[0]).toMatchObject({ output: "OUT-1" });
    s.raw = { text: "aggregated_output", exitCode: "exit_code" };
    s.update({ sessionUpdate: "tool_call", toolCallId: "call_o", title: "echo", kind: "execute" });
    const done = s.update({
      sessionUpdate: "tool_call_update",
      toolCallId: "call_o",
      status: "completed",
      rawOutput: { aggregated_output: "OUT-2\n", exit_code: 3 },
    });
    expect(completedOf(done, "call_o")[0]).toMatchObject({ output: "OUT-2\n", exitCode: 3 });
  });

  it("prefers a raw output that is text to the content shown, and reads no field the target did not name", () => {
    const s = new Session();
    s.update({ sessionUpdate: "tool_call", toolCallId: "call_c", title: "echo", kind: "execute" });
    const shown = s.update({
      sessionUpdate: "tool_call_update",
      toolCallId: "call_c",
      status: "completed",
      content: [{ type: "content", content: { type: "text", text: "```console\nraw\n```" } }],
      rawOutput: "raw",
    });
    expect(completedOf(shown, "call_c")[0]).toMatchObject({ output: "raw" });
    s.update({ sessionUpdate: "tool_call", toolCallId: "call_n", title: "echo", kind: "execute" });
    const unnamed = s.update({
      sessionUpdate: "tool_call_update",
      toolCallId: "call_n",
      status: "completed",
      rawOutput: { aggregated_output: "hidden", exit_code: 0 },
    });
    expect(completedOf(unnamed, "call_n")[0]!.output).toBeUndefined();
    expect(completedOf(unnamed, "call_n")[0]!.exitCode).toBeUndefined();
  });

  it("starts a pending call once it runs, as said by then; what it showed pending is not output", () => {
    const s = new Session();
    // claude-agent-acp announces a call before its input is known, then fills it in.
    const announced = s.update({
      sessionUpdate: "tool_call",
      toolCallId: "call_p",
      title: "Terminal",
      kind: "execute",
      status: "pending",
      rawInput: {},
      content: [{ type: "content", content: { type: "text", text: "Proposed: echo hi" } }],
    });
    expect(announced).toEqual([]);
    s.update({
      sessionUpdate: "tool_call_update",
      toolCallId: "call_p",
      title: "echo hi",
      rawInput: { command: "echo hi" },
    });
    const ran = s.update({ sessionUpdate: "tool_call_update", toolCallId: "call_p", status: "in_progress" });
    expect(ran).toMatchObject([{ type: "item.started", detail: { command: "echo hi" } }]);
    const done = s.update({ sessionUpdate: "tool_call_update", toolCallId: "call_p", status: "completed" });
    expect(completedOf(done, "call_p")[0]!.output).toBeUndefined();
  });

  it("starts, at the turn's end, a call that never ran nor asked (the turn's end cancels it)", () => {
    const s = new Session();
    s.update({ sessionUpdate: "tool_call", toolCallId: "call_q", title: "ls", kind: "execute", status: "pending" });
    expect(shape(s.end("end_turn"))).toEqual(["item.started:command_execution", "turn.terminal"]);
  });

  it("starts the item of an update about a tool call it never saw announced", () => {
    const s = new Session();
    const first = s.update({
      sessionUpdate: "tool_call_update",
      toolCallId: "call_late",
      status: "in_progress",
      kind: "execute",
      title: "make build",
    });
    expect(first).toMatchObject([{ type: "item.started", itemRef: "call_late", kind: "command_execution" }]);
    s.update({ sessionUpdate: "tool_call_update", toolCallId: "call_late", status: "completed" });
    expect(startedOf(s.events, "call_late")).toHaveLength(1);
    expect(completedOf(s.events, "call_late")).toMatchObject([{ status: "completed" }]);
  });

  it("changes nothing with updates after the tool call completed", () => {
    const s = new Session();
    s.update({ sessionUpdate: "tool_call", toolCallId: "call_1", title: "grep", kind: "search" });
    s.update({ sessionUpdate: "tool_call_update", toolCallId: "call_1", status: "completed", content: [text("3")] });
    for (const late of [
      { status: "failed" },
      { status: "in_progress" },
      { status: "completed", content: [text("4")] },
      { content: [text("more")] },
      { kind: "execute", title: "other" },
    ])
      expect(s.update({ sessionUpdate: "tool_call_update", toolCallId: "call_1", ...late })).toEqual([]);
    expect(completedOf(s.events, "call_1")).toMatchObject([{ status: "completed", output: "3" }]);
  });

  it.each(["completed", "failed"] as const)("starts and ends a tool call that arrives already %s", (status) => {
    const s = new Session();
    const events = s.update({
      sessionUpdate: "tool_call",
      toolCallId: "call_done",
      title: "Read file",
      kind: "read",
      status,
      content: [text("contents")],
    });
    expect(shape(events)).toEqual(["item.started:tool_call", "item.completed:tool_call"]);
    expect(only(events, "item.completed")[0]).toMatchObject({ itemRef: "call_done", status, output: "contents" });
  });

  // tool_call_update: "kind: Update the tool kind". An item is one node of one kind: whatever the agent says later, the
  // item it started ends under the kind it started with (else its completion names another item).
  it("completes a tool call under the item kind it started with, even when an update changes its ToolKind", () => {
    const s = new Session();
    s.update({ sessionUpdate: "tool_call", toolCallId: "call_k", title: "Working" });
    s.update({
      sessionUpdate: "tool_call_update",
      toolCallId: "call_k",
      kind: "execute",
      status: "completed",
      rawInput: { command: "ls" },
    });
    const [started] = startedOf(s.events, "call_k");
    const [completed] = completedOf(s.events, "call_k");
    expect(completed?.kind).toBe(started?.kind);
  });

  it("keeps tool calls apart by toolCallId when they interleave", () => {
    const s = new Session();
    s.update({ sessionUpdate: "tool_call", toolCallId: "a", title: "A", kind: "read" });
    s.update({ sessionUpdate: "tool_call", toolCallId: "b", title: "B", kind: "execute" });
    s.update({ sessionUpdate: "tool_call_update", toolCallId: "b", status: "completed", content: [text("B out")] });
    s.update({ sessionUpdate: "tool_call_update", toolCallId: "a", status: "failed", content: [text("A err")] });
    expect(completedOf(s.events, "a")).toMatchObject([{ kind: "tool_call", status: "failed", output: "A err" }]);
    expect(completedOf(s.events, "b")).toMatchObject([
      { kind: "command_execution", status: "completed", output: "B out" },
    ]);
  });
});

describe("acp mapper: plans", () => {
  // agent-plan: "the agent must send a complete list of all entries with their current status. The client replaces
  // the entire plan with each update."
  it("maps a plan's entries to the steps of plan.updated, with their statuses, whole each time", () => {
    const s = new Session();
    const entry = (content: string, status: string, priority = "medium") => ({ content, priority, status });
    const first = s.update({
      sessionUpdate: "plan",
      entries: [entry("Check for syntax errors", "pending", "high"), entry("Suggest improvements", "pending", "low")],
    });
    expect(first).toEqual([
      {
        type: "plan.updated",
        threadRef: SESSION,
        steps: [
          { step: "Check for syntax errors", status: "pending" },
          { step: "Suggest improvements", status: "pending" },
        ],
      },
    ]);
    const second = s.update({
      sessionUpdate: "plan",
      entries: [
        entry("Check for syntax errors", "completed"),
        entry("Identify potential type issues", "in_progress"),
        entry("Suggest improvements", "pending"),
      ],
    });
    expect(only(second, "plan.updated")[0]!.steps).toEqual([
      { step: "Check for syntax errors", status: "completed" },
      { step: "Identify potential type issues", status: "in_progress" },
      { step: "Suggest improvements", status: "pending" },
    ]);
  });

  it("ends an open message before the plan", () => {
    const s = new Session();
    s.message("Here is my plan:");
    const plan = s.update({
      sessionUpdate: "plan",
      entries: [{ content: "Do it", priority: "high", status: "pending" }],
    });
    expect(shape(plan)).toEqual(["item.completed:assistant_message", "plan.updated"]);
  });
});

describe("acp mapper: what is not the turn's", () => {
  it.each([
    ["user_message_chunk", { sessionUpdate: "user_message_chunk", content: { type: "text", text: "say hi" } }],
    [
      "available_commands_update",
      { sessionUpdate: "available_commands_update", availableCommands: [{ name: "memory", description: "Memory." }] },
    ],
    ["current_mode_update", { sessionUpdate: "current_mode_update", currentModeId: "yolo" }],
    [
      "usage_update",
      { sessionUpdate: "usage_update", used: 53000, size: 200000, cost: { amount: 0.045, currency: "USD" } },
    ],
    ["session_info_update", { sessionUpdate: "session_info_update", title: "Fix the tests", updatedAt: null }],
    ["config_option_update", { sessionUpdate: "config_option_update", configOptions: [] }],
  ])("produces no event for %s", (_, raw) => {
    const s = new Session();
    expect(s.update(raw)).toEqual([]);
  });
});

describe("acp mapper: permission requests", () => {
  // tool-calls, "Requesting Permission": toolCall is "The tool call update containing details about the operation";
  // the agent may ask before it ever announced the call (gemini-cli does).
  it("starts the item of a tool call never announced before asking about it (recorded from gemini-cli)", () => {
    const s = new Session();
    const asked = s.permission(GEMINI_TOOL_CALL, GEMINI_OPTIONS);
    expect(asked.itemRef).toBe(GEMINI_CALL);
    expect(asked.events).toMatchObject([{ type: "item.started", itemRef: GEMINI_CALL, kind: "command_execution" }]);
    expect(asked.request).toEqual({ kind: "command", command: "echo approved-run > ran.txt && echo OUT-42" });

    // The recorded client chose "Allow for this session"; then the agent completed the call (content emptied).
    expect(selected(permissionAnswer(GEMINI_OPTIONS, decision("accept_for_session")))).toBe("proceed_always");
    const done = s.update({
      sessionUpdate: "tool_call_update",
      toolCallId: GEMINI_CALL,
      status: "completed",
      title: "echo approved-run > ran.txt && echo OUT-42",
      content: [],
      locations: [],
      kind: "execute",
    });
    expect(done).toMatchObject([{ type: "item.completed", itemRef: GEMINI_CALL, kind: "command_execution" }]);
    expect(only(done, "item.completed")[0]!.status).toBe("completed");
    // content: [] replaced the request's content: the tool printed nothing the agent reported.
    expect(only(done, "item.completed")[0]!.output ?? "").toBe("");
    expect(startedOf(s.events, GEMINI_CALL)).toHaveLength(1);
  });

  it.each<[string, Record<string, unknown>, RequestPayload]>([
    [
      "execute",
      { kind: "execute", title: "Run tests", rawInput: { command: "npm test" } },
      { kind: "command", command: "npm test" },
    ],
    [
      "edit",
      {
        kind: "edit",
        title: "Edit config",
        locations: [{ path: "/p/config.json" }],
        content: [{ type: "diff", path: "/p/config.json", oldText: "a\n", newText: "b\n" }],
      },
      { kind: "file_change", path: "/p/config.json", diff: expect.stringContaining("+b") as unknown as string },
    ],
    [
      "delete",
      { kind: "delete", title: "Remove tmp", locations: [{ path: "/p/tmp.txt" }] },
      { kind: "file_change", path: "/p/tmp.txt" },
    ],
    [
      "read",
      { kind: "read", title: "Read secrets", locations: [{ path: "/p/.env" }] },
      { kind: "file_read", path: "/p/.env" },
    ],
    [
      "other",
      { kind: "other", name: "deploy", title: "Deploy", rawInput: { env: "prod" } },
      { kind: "tool_approval", toolName: "deploy", input: { env: "prod" } },
    ],
    [
      "fetch",
      { kind: "fetch", name: "web_fetch", title: "Fetch", rawInput: { url: "https://example.com" } },
      { kind: "tool_approval", toolName: "web_fetch", input: { url: "https://example.com" } },
    ],
  ])("asks about a %s tool call with the payload of its kind", (_, fields, request) => {
    const s = new Session();
    const asked = s.permission({ toolCallId: "call_p", ...fields });
    expect(asked.request).toEqual(request);
    expect(startedOf(asked.events, "call_p")).toHaveLength(1);
    if (request.kind === "file_change") {
      const detail = startedOf(asked.events, "call_p")[0]!.detail;
      expect(detail?.path).toBe(request.path);
    }
  });

  // The spec's own example asks with nothing but the toolCallId: what the agent announced before is what is asked.
  // tool-calls, "pending": "The tool call hasn't started running yet because the input is either streaming or we're
  // awaiting approval" — its item starts with what the agent has said of it once it asks (then never again).
  it("asks about an announced, pending tool call with what the agent said of it, starting its item once", () => {
    const s = new Session();
    s.update({
      sessionUpdate: "tool_call",
      toolCallId: "call_001",
      title: "Clean the build",
      kind: "execute",
      status: "pending",
      rawInput: { command: "rm -rf build" },
    });
    const asked = s.permission({ toolCallId: "call_001" });
    expect(asked.events).toMatchObject([
      { type: "item.started", itemRef: "call_001", kind: "command_execution", detail: { command: "rm -rf build" } },
    ]);
    expect(asked.itemRef).toBe("call_001");
    expect(asked.request).toEqual({ kind: "command", command: "rm -rf build" });
    // Asked again (the agent may ask more than once): still one item.
    s.permission({ toolCallId: "call_001" });
    s.update({ sessionUpdate: "tool_call_update", toolCallId: "call_001", status: "in_progress" });
    s.update({ sessionUpdate: "tool_call_update", toolCallId: "call_001", status: "completed" });
    expect(startedOf(s.events, "call_001")).toHaveLength(1);
    expect(completedOf(s.events, "call_001")).toHaveLength(1);
  });

  it("ends an open message before the item of the tool call asked about", () => {
    const s = new Session();
    s.message("I need to run a command.");
    const asked = s.permission({ toolCallId: "call_m", kind: "execute", title: "make", rawInput: { command: "make" } });
    expect(shape(asked.events)).toEqual(["item.completed:assistant_message", "item.started:command_execution"]);
  });

  it("starts nothing again when the tool call is announced after the agent asked about it", () => {
    const s = new Session();
    s.permission({ toolCallId: "call_a", kind: "execute", title: "make", rawInput: { command: "make" } });
    expect(
      s.update({
        sessionUpdate: "tool_call",
        toolCallId: "call_a",
        title: "make",
        kind: "execute",
        status: "in_progress",
      }),
    ).toEqual([]);
    s.update({ sessionUpdate: "tool_call_update", toolCallId: "call_a", status: "completed", content: [text("ok")] });
    expect(startedOf(s.events, "call_a")).toHaveLength(1);
    expect(completedOf(s.events, "call_a")).toMatchObject([{ status: "completed", output: "ok" }]);
  });

  // tool-calls: "If a permission policy or UI depends on rawInput and that field is absent or unavailable, the Client
  // should avoid presenting the request as if argument details were known". A request that says only the call's kind
  // must not come out as a command or file operation whose command or path is known to be "".
  it.each([["execute"], ["edit"], ["read"]])(
    "does not present a %s request whose details the agent never gave as if they were known",
    (kind) => {
      const s = new Session();
      const { request } = s.permission({ toolCallId: "call_bare", kind });
      if (request.kind === "command") expect(request.command).not.toBe("");
      if (request.kind === "file_change" || request.kind === "file_read") expect(request.path).not.toBe("");
    },
  );

  describe("the answer, as the agent's options", () => {
    // tool-calls, "Permission Options": allow_once "Allow this operation only this time", allow_always "Allow this
    // operation and remember the choice", reject_once, reject_always likewise.
    it("picks allow_once to accept, allow_always to accept for the session, reject_once to decline", () => {
      expect(selected(permissionAnswer(OPTIONS, decision("accept")))).toBe("opt-allow-once");
      expect(selected(permissionAnswer(OPTIONS, decision("accept_for_session")))).toBe("opt-allow-always");
      expect(selected(permissionAnswer(OPTIONS, decision("decline")))).toBe("opt-reject-once");
    });

    it("answers with the recorded gemini-cli options by their own ids", () => {
      expect(selected(permissionAnswer(GEMINI_OPTIONS, decision("accept")))).toBe("proceed_once");
      expect(selected(permissionAnswer(GEMINI_OPTIONS, decision("accept_for_session")))).toBe("proceed_always");
      expect(selected(permissionAnswer(GEMINI_OPTIONS, decision("decline")))).toBe("cancel");
      expect(permissionAnswer(GEMINI_OPTIONS, decision("cancel"))).toEqual({ outcome: { outcome: "cancelled" } });
    });

    it("falls back to allow_once for the session, and to reject_always to decline, where only they are offered", () => {
      const once = OPTIONS.filter((o) => o.kind !== "allow_always");
      expect(selected(permissionAnswer(once, decision("accept_for_session")))).toBe("opt-allow-once");
      const always = OPTIONS.filter((o) => o.kind !== "reject_once");
      expect(selected(permissionAnswer(always, decision("decline")))).toBe("opt-reject-always");
    });

    // prompt-turn, "Cancellation": "The Client MUST respond to all pending session/request_permission requests with
    // the cancelled outcome."
    it("answers a cancellation with the cancelled outcome, whatever is offered", () => {
      expect(permissionAnswer(OPTIONS, decision("cancel"))).toEqual({ outcome: { outcome: "cancelled" } });
      expect(permissionAnswer([], decision("cancel"))).toEqual({ outcome: { outcome: "cancelled" } });
    });

    it("answers cancelled where no option matches the decision", () => {
      const allows = OPTIONS.filter((o) => o.kind.startsWith("allow"));
      const rejects = OPTIONS.filter((o) => o.kind.startsWith("reject"));
      expect(permissionAnswer(allows, decision("decline"))).toEqual({ outcome: { outcome: "cancelled" } });
      expect(permissionAnswer(rejects, decision("accept"))).toEqual({ outcome: { outcome: "cancelled" } });
      expect(permissionAnswer(rejects, decision("accept_for_session"))).toEqual({ outcome: { outcome: "cancelled" } });
      for (const d of ["accept", "accept_for_session", "decline"] as const)
        expect(permissionAnswer([], decision(d))).toEqual({ outcome: { outcome: "cancelled" } });
    });

    // allow_always "Allow this operation and remember the choice": choosing it for an `accept` (this once) grants the
    // agent every later call the user never approved. Accept has no broader fallback: none matches, cancelled.
    it("never turns a one-time approval into a remembered one", () => {
      const alwaysOnly = OPTIONS.filter((o) => o.kind !== "allow_once");
      const answer = permissionAnswer(alwaysOnly, decision("accept"));
      expect(selected(answer)).not.toBe("opt-allow-always");
      expect(answer).toEqual({ outcome: { outcome: "cancelled" } });
    });
  });

  describe("the outcome, as the app stream tells it", () => {
    it("maps each option kind back to the decision, and a cancelled outcome to cancelled", () => {
      const pick = (optionId: string): RequestPermissionResponse => ({ outcome: { outcome: "selected", optionId } });
      expect(outcomeOf(OPTIONS, pick("opt-allow-once"))).toBe("accept");
      expect(outcomeOf(OPTIONS, pick("opt-allow-always"))).toBe("accept_for_session");
      expect(outcomeOf(OPTIONS, pick("opt-reject-once"))).toBe("decline");
      expect(outcomeOf(OPTIONS, pick("opt-reject-always"))).toBe("decline");
      expect(outcomeOf(OPTIONS, { outcome: { outcome: "cancelled" } })).toBe("cancelled");
    });

    it("round-trips every decision the options allow", () => {
      for (const d of ["accept", "accept_for_session", "decline"] as const) {
        expect(outcomeOf(OPTIONS, permissionAnswer(OPTIONS, decision(d)))).toBe(d);
        expect(outcomeOf(GEMINI_OPTIONS, permissionAnswer(GEMINI_OPTIONS, decision(d)))).toBe(d);
      }
      expect(outcomeOf(OPTIONS, permissionAnswer(OPTIONS, decision("cancel")))).toBe("cancelled");
    });

    // Schema (v2 wording of the same outcome): "If optionId doesn't match an offered option, the agent MUST treat the
    // request as not approved."
    it("never reports an option the agent did not offer as an approval", () => {
      const outcome = outcomeOf(OPTIONS, { outcome: { outcome: "selected", optionId: "made-up" } });
      expect(["accept", "accept_for_session"]).not.toContain(outcome);
    });
  });
});

describe("acp mapper: the prompt's response ends the turn", () => {
  // prompt-turn, "Stop Reasons": `cancelled` is "The turn was cancelled by the client"; a turn the client never asked
  // to stop was not interrupted by it.
  it("takes a cancelled turn nobody asked to stop as cancelled by the agent, never as the user's interrupt", () => {
    const s = new Session();
    const [terminal] = s.end("cancelled", false);
    expect(terminal).toMatchObject({ type: "turn.terminal", status: "cancelled", failureClass: "cancelled_by_agent" });
  });

  // prompt-turn, "Stop Reasons"; the contract: `interrupted` is a turn stopped at the client's request (docs/events.md:
  // "The run becomes interrupted only when the provider reports the terminal"), `failed` carries a failure class.
  it.each<[StopReason, "completed" | "interrupted" | "failed"]>([
    ["end_turn", "completed"],
    ["cancelled", "interrupted"],
    ["max_tokens", "failed"],
    ["max_turn_requests", "failed"],
    ["refusal", "failed"],
  ])("maps stopReason %s to a %s turn on a reusable thread", (stopReason, status) => {
    const s = new Session();
    const [terminal, ...rest] = s.end(stopReason);
    expect(rest).toEqual([]);
    expect(terminal).toMatchObject({ type: "turn.terminal", status, threadDisposition: "reusable" });
    const failureClass = (terminal as Of<"turn.terminal">).failureClass;
    if (status === "failed") {
      expect(typeof failureClass).toBe("string");
      expect(failureClass).not.toBe("");
    } else expect(failureClass ?? null).toBeNull();
  });

  it("gives each failed stop reason its own failure class", () => {
    const classes = (["max_tokens", "max_turn_requests", "refusal"] as const).map(
      (r) => (new Session().end(r)[0] as Of<"turn.terminal">).failureClass,
    );
    expect(new Set(classes).size).toBe(3);
  });

  // prompt-turn, "Cancellation": the agent MAY send updates after session/cancel, before its response; the open
  // message (recorded: gemini-cli streamed "Thinking", then answered cancelled) ends before the terminal.
  it("completes the open message or thought before a cancelled turn's terminal", () => {
    const s = new Session();
    s.message("Thinking");
    expect(shape(s.end("cancelled"))).toEqual(["item.completed:assistant_message", "turn.terminal"]);
    const t = new Session();
    t.thought("Considering");
    const end = t.end("max_tokens");
    expect(shape(end)).toEqual(["item.completed:reasoning", "turn.terminal"]);
  });

  // prompt-turn: "Once a prompt turn completes, the Client may send another session/prompt to continue the
  // conversation": the next turn's output is new items.
  it("leaves the thread ready for the next turn: its chunks start a new message", () => {
    const s = new Session();
    s.message("Hello from fake Gemini!");
    s.end("end_turn");
    const next = s.message("Second turn.");
    expect(shape(next)).toEqual(["item.started:assistant_message", "item.delta:assistant_message"]);
    expect(shape(s.end("end_turn"))).toEqual(["item.completed:assistant_message", "turn.terminal"]);
    const again = s.end("end_turn");
    expect(shape(again)).toEqual(["turn.terminal"]);
  });

  it("fails a prompt the agent answered with an error, on a reusable thread, its message closed first", () => {
    const s = new Session();
    s.message("partial");
    const events = s.fail("Internal error: model overloaded");
    expect(shape(events)).toEqual(["item.completed:assistant_message", "turn.terminal"]);
    expect(events[1]).toMatchObject({
      status: "failed",
      threadDisposition: "reusable",
      message: "Internal error: model overloaded",
    });
    expect((events[1] as Of<"turn.terminal">).failureClass).toEqual(expect.any(String));
  });

  it("sends a handoff's context before the user's text, as text blocks of the prompt", () => {
    expect(promptOf("run a command", null)).toEqual([{ type: "text", text: "run a command" }]);
    const prompt = promptOf("go on", { kind: "handoff", text: "Summary so far", delivery: "synthetic_user" });
    // Under the kit's context header (src/adapters/kit/context.ts), as every adapter delivers user context.
    expect(prompt).toEqual([
      { type: "text", text: "Context from earlier in this conversation (handoff):\nSummary so far" },
      { type: "text", text: "go on" },
    ]);
  });
});

describe("acp mapper: hostile but schema-valid input", () => {
  it("streams empty chunks and empty messageIds without an invalid event, losing no text", () => {
    const s = new Session();
    s.message("", "");
    s.message("a", "");
    s.message("");
    s.thought("", "");
    s.message("b");
    s.end("end_turn");
    const texts = only(s.events, "item.delta")
      .filter((d) => d.kind === "assistant_message")
      .map((d) => d.delta);
    expect(texts.join("")).toBe("ab");
    expect(only(s.events, "turn.terminal")).toHaveLength(1);
  });

  it("produces only valid events for a tool call whose toolCallId is empty", () => {
    const s = new Session();
    s.update({ sessionUpdate: "tool_call", toolCallId: "", title: "", kind: "execute" });
    s.update({ sessionUpdate: "tool_call_update", toolCallId: "", status: "completed" });
    s.permission({ toolCallId: "" });
  });

  it("leaves a tool call as it was on an update whose fields are all null", () => {
    const s = new Session();
    s.update({
      sessionUpdate: "tool_call",
      toolCallId: "call_n",
      name: "grep",
      title: "Search",
      kind: "search",
      rawInput: { q: "x" },
      content: [text("2 matches")],
    });
    const nulls = s.update({
      sessionUpdate: "tool_call_update",
      toolCallId: "call_n",
      kind: null,
      status: null,
      title: null,
      name: null,
      content: null,
      locations: null,
      rawInput: null,
      rawOutput: null,
    });
    expect(nulls).toEqual([]);
    const done = s.update({ sessionUpdate: "tool_call_update", toolCallId: "call_n", status: "completed" });
    expect(done).toMatchObject([
      { type: "item.completed", kind: "tool_call", status: "completed", output: "2 matches" },
    ]);
  });

  it("starts a tool call whose first news is an update of nulls, and keeps it one item", () => {
    const s = new Session();
    s.update({ sessionUpdate: "tool_call_update", toolCallId: "call_z", kind: null, status: null, content: null });
    s.update({ sessionUpdate: "tool_call_update", toolCallId: "call_z", status: "failed" });
    expect(startedOf(s.events, "call_z")).toHaveLength(1);
    expect(completedOf(s.events, "call_z")).toMatchObject([{ status: "failed" }]);
  });

  it("reads a ToolKind or status the SDK could not parse as absent", () => {
    const s = new Session();
    const started = s.update({ sessionUpdate: "tool_call", toolCallId: "call_b", title: "?", kind: "browse" });
    expect(started).toMatchObject([{ type: "item.started", kind: "tool_call" }]);
    expect(s.update({ sessionUpdate: "tool_call_update", toolCallId: "call_b", status: "exploded" })).toEqual([]);
  });

  it("maps a plan with no entries (or entries the SDK dropped) to an empty plan", () => {
    const s = new Session();
    expect(s.update({ sessionUpdate: "plan", entries: [] })).toEqual([
      { type: "plan.updated", threadRef: SESSION, steps: [] },
    ]);
    expect(only(s.update({ sessionUpdate: "plan", entries: "garbage" }), "plan.updated")[0]!.steps).toEqual([]);
    const partly = s.update({
      sessionUpdate: "plan",
      entries: [
        { content: "", priority: "high", status: "pending" },
        { content: "bad", priority: "high", status: "exploded" },
      ],
    });
    expect(only(partly, "plan.updated")[0]!.steps).toEqual([{ step: "", status: "pending" }]);
  });

  it("passes a huge delta through whole", () => {
    const s = new Session();
    const huge = "x".repeat(8 * 1024 * 1024);
    s.message(huge);
    s.message("y");
    s.end("end_turn");
    const deltas = only(s.events, "item.delta").map((d) => d.delta);
    expect(deltas.join("").length).toBe(huge.length + 1);
    expect(deltas.join("").endsWith("xy")).toBe(true);
  });

  it("survives a huge tool output and odd raw inputs", () => {
    const s = new Session();
    for (const [i, rawInput] of [
      [],
      "just a string",
      42,
      true,
      { command: 7 },
      { nested: { deep: [1, null] } },
    ].entries())
      s.update({ sessionUpdate: "tool_call", toolCallId: `call_${i}`, title: `t${i}`, kind: "execute", rawInput });
    const huge = "line\n".repeat(200_000);
    const done = s.update({
      sessionUpdate: "tool_call_update",
      toolCallId: "call_0",
      status: "completed",
      content: [text(huge)],
    });
    expect(only(done, "item.completed")[0]!.output).toBe(huge);
    expect(only(s.events, "item.started")).toHaveLength(6);
    for (const started of only(s.events, "item.started")) expect(typeof started.detail?.command).toBe("string");
  });

  it("diffs empty and identical texts without an invalid event", () => {
    const s = new Session();
    s.update({
      sessionUpdate: "tool_call",
      toolCallId: "call_d",
      title: "",
      kind: "edit",
      content: [
        { type: "diff", path: "/p/a", oldText: "", newText: "" },
        { type: "diff", path: "/p/b", oldText: "same\n", newText: "same\n" },
      ],
    });
    s.update({ sessionUpdate: "tool_call_update", toolCallId: "call_d", status: "completed" });
    expect(completedOf(s.events, "call_d")).toHaveLength(1);
  });
});
