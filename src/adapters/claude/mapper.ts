import type { TurnTerminalStatus } from "../../domain/entities.js";
import type { ProviderItemKind } from "../../domain/items.js";
import type { ProviderEvent } from "../contract.js";
import type {
  SDKAssistantMessage,
  SDKMessage,
  SDKPartialAssistantMessage,
  SDKResultMessage,
  SDKTaskNotificationMessage,
  SDKUserMessage,
  SessionMessage,
} from "./protocol/sdk.js";
import { identify, type ToolInput } from "./tools.js";

/**
 * Claude Agent SDK messages -> normalized provider events, per provider thread (one SDK
 * session). Claude has no turn ids: a turn is what follows a user message up to its `result`.
 * What a tool use is (an item of some kind, a todo list, a plan, a subagent) is `tools.ts`'s.
 * A subagent's forwarded messages carry `parent_tool_use_id` and nest under it, and its permission prompts name it by
 * its agent id, which its task's start ties to its tool use.
 *
 * The messages are typed as the SDK declares them (`protocol/`), but come from the Claude binary: fields the mapping
 * depends on are still checked where a wrong one would throw.
 */

type ContentBlock = SDKAssistantMessage["message"]["content"][number];
type StreamEvent = SDKPartialAssistantMessage["event"];
type UserBlock = Exclude<SDKUserMessage["message"]["content"], string>[number];
type ToolResult = Extract<UserBlock, { type: "tool_result" }>;
type Tracked = ProviderItemKind | "todo" | "plan" | "subagent";

/** What Claude writes to its transcript as a user entry that is not a prompt of its own. */
const INTERRUPT_MARKER = "[Request interrupted by user";

/** A transcript entry (`getSessionMessages`), as much of it as the rollback reads. */
export type TranscriptEntry = Pick<SessionMessage, "type" | "uuid" | "parent_tool_use_id" | "message">;

/** A transcript's blocks are read from disk as Claude wrote them: nothing about them is assumed. */
type WrittenBlock = { type?: unknown; text?: unknown };

/**
 * The prompts of a transcript (`getSessionMessages`), in order, with their place in the main
 * chain. A prompt is a user entry with text (not a tool result, a slash command's record or
 * Claude's interrupt marker), which is what each attempt of a run sends.
 */
function prompts(messages: ReadonlyArray<TranscriptEntry>): {
  chain: TranscriptEntry[];
  prompts: Array<{ index: number; text: string }>;
} {
  const chain = messages.filter((m) => m.parent_tool_use_id === null);
  const found = chain.flatMap((m, index) => {
    const content = (m.message as { content?: unknown } | null)?.content;
    if (m.type !== "user" || !Array.isArray(content)) return [];
    const blocks = content as WrittenBlock[];
    const text = blocks
      .filter((b) => b.type === "text")
      .map((b) => (typeof b.text === "string" ? b.text : ""))
      .join("");
    return blocks.some((b) => b.type === "tool_result") || text === "" || text.startsWith(INTERRUPT_MARKER)
      ? []
      : [{ index, text }];
  });
  return { chain, prompts: found };
}

/**
 * Where to resume so the last `turns` turns are gone: the transcript entry just before the
 * first dropped prompt, or null when there are not that many turns to drop and one to keep.
 */
export function cutAfter(messages: ReadonlyArray<TranscriptEntry>, turns: number): string | null {
  const { chain, prompts: found } = prompts(messages);
  const firstDropped = found[found.length - turns];
  return turns > 0 && found.length - turns >= 1 && firstDropped !== undefined
    ? chain[firstDropped.index - 1]!.uuid
    : null;
}

/** The text of the transcript's last prompt, or null when it has none. */
export function lastPrompt(messages: ReadonlyArray<TranscriptEntry>): string | null {
  return prompts(messages).prompts.at(-1)?.text ?? null;
}

/** A tool result's output as text (its text blocks; images and documents say nothing). */
function outputOf(result: ToolResult): string {
  const content: unknown = result.content;
  if (typeof content === "string") return content;
  return Array.isArray(content)
    ? (content as WrittenBlock[]).map((c) => (c.type === "text" && typeof c.text === "string" ? c.text : "")).join("")
    : "";
}

const taskStatus = (status: SDKTaskNotificationMessage["status"] | "killed"): TurnTerminalStatus =>
  status === "completed" ? "completed" : status === "stopped" || status === "killed" ? "interrupted" : "failed";

export class ClaudeThreadMapper {
  /** Stream blocks by index in the current model message: their item ref. */
  #streaming = new Map<number, { ref: string; kind: ProviderItemKind }>();
  #messageId = "";
  /** Tool uses by id, for their results (TodoWrite's and ExitPlanMode's are artifacts, not items). */
  #tools = new Map<string, Tracked>();
  /** Content blocks seen per model message id (see `assistant`). */
  #blocksSeen = new Map<string, number>();
  /** Subagents whose end was already reported (by a task notification). */
  #ended = new Set<string>();
  /** Subagents' item refs by agent id, once their task has started; and the prompts waiting for one. */
  #agents = new Map<string, string | undefined>();
  #awaitingAgent = new Map<string, Array<() => void>>();
  interrupting = false;

  constructor(private readonly threadRef: string) {}

  map(message: SDKMessage): ProviderEvent[] {
    switch (message.type) {
      case "stream_event":
        // Subagents' text arrives whole in their forwarded messages: only the parent streams.
        return message.parent_tool_use_id ? [] : this.#stream(message.event);
      case "assistant":
        return this.#assistant(message);
      case "user":
        return this.#toolResults(message);
      case "system":
        if (message.subtype === "task_started" && message.task_id)
          this.#taskStarted(message.task_id, message.tool_use_id);
        // A subagent's own report of how it ended (cleaner than the tool result that wraps it).
        if (
          message.subtype === "task_notification" &&
          message.tool_use_id &&
          this.#tools.get(message.tool_use_id) === "subagent"
        )
          return this.#subagentEnded(message.tool_use_id, taskStatus(message.status), message.summary ?? "");
        return [];
      case "result":
        return this.#result(message);
      default:
        return [];
    }
  }

  /**
   * The item ref of the subagent whose agent id a permission prompt carries: known once the subagent's task has
   * started, which Claude says before the subagent does anything (so its start, too, is out by then), but its prompt
   * may reach the host before that message has been mapped. Undefined for a task that is no subagent of this thread,
   * or when `signal` aborts first.
   */
  async subagentRef(agentId: string, signal: AbortSignal): Promise<string | undefined> {
    if (!this.#agents.has(agentId) && !signal.aborted)
      await new Promise<void>((resolve) => {
        this.#awaitingAgent.set(agentId, [...(this.#awaitingAgent.get(agentId) ?? []), resolve]);
        signal.addEventListener("abort", () => resolve(), { once: true });
      });
    return this.#agents.get(agentId);
  }

  #assistant(m: SDKAssistantMessage): ProviderEvent[] {
    const at = { threadRef: this.threadRef };
    // A subagent's message names its task; the parent's names none (`null`): its items are the turn's own.
    const parent = m.parent_tool_use_id ?? null;
    const blocks: ContentBlock[] = Array.isArray(m.message?.content) ? m.message.content : [];
    // Claude Code splits a model message into one SDK message per content block: a block's
    // index (its item ref, as streamed) counts the blocks of that message seen so far.
    const messageId = m.message?.id ?? this.#messageId;
    const first = this.#blocksSeen.get(messageId) ?? 0;
    this.#blocksSeen.set(messageId, first + blocks.length);
    const out: ProviderEvent[] = [];
    blocks.forEach((block, i) => {
      const itemRef = `${messageId}:${first + i}`;
      const text = block.type === "text" ? block.text : block.type === "thinking" ? block.thinking : undefined;
      const kind: ProviderItemKind = block.type === "text" ? "assistant_message" : "reasoning";
      if (text !== undefined) {
        if (parent) out.push({ type: "item.started", ...at, itemRef, parentItemRef: parent, kind });
        out.push({ type: "item.completed", ...at, itemRef, kind, status: "completed", text });
      } else if (block.type === "tool_use" && block.id && block.name) out.push(...this.#toolUse(block, parent));
    });
    return out;
  }

  #toolResults(m: SDKUserMessage): ProviderEvent[] {
    const at = { threadRef: this.threadRef };
    const blocks: UserBlock[] = Array.isArray(m.message?.content) ? m.message.content : [];
    return blocks.flatMap((b): ProviderEvent[] => {
      if (b.type !== "tool_result" || !b.tool_use_id) return [];
      const known = this.#tools.get(b.tool_use_id);
      if (known === "todo" || known === "plan") return [];
      const output = outputOf(b);
      if (known === "subagent") {
        // A background agent (when allowed) was only launched: it ends with its task notification.
        if ((m.tool_use_result as { status?: unknown } | undefined)?.status === "async_launched") return [];
        return this.#subagentEnded(b.tool_use_id, b.is_error ? "failed" : "completed", output);
      }
      return [
        {
          type: "item.completed",
          ...at,
          itemRef: b.tool_use_id,
          kind: known ?? "tool_call",
          status: b.is_error ? "failed" : "completed",
          output,
        },
      ];
    });
  }

  #result(m: SDKResultMessage): ProviderEvent[] {
    this.#blocksSeen.clear();
    // A result with no subtype to read still ends the turn: failed at once as a protocol error (an event with a
    // message that is no string would be dropped at the adapter, and the turn left to the watchdog).
    if (typeof (m.subtype as unknown) !== "string") {
      this.interrupting = false;
      return [
        {
          type: "turn.terminal",
          threadRef: this.threadRef,
          status: "failed",
          threadDisposition: "reusable",
          failureClass: "protocol_error",
          message: "claude sent a result message with no subtype: the turn's end cannot be read",
          retryable: false,
        },
      ];
    }
    const interrupted = this.interrupting && m.subtype !== "success";
    this.interrupting = false;
    const status = m.subtype === "success" ? "completed" : interrupted ? "interrupted" : "failed";
    const said = m.subtype === "success" ? m.result : undefined;
    return [
      {
        type: "turn.terminal",
        threadRef: this.threadRef,
        status,
        threadDisposition: "reusable",
        failureClass: status === "failed" ? "provider_error" : null,
        message: status === "failed" ? (said ?? m.subtype ?? "error") : null,
        retryable: false,
      },
    ];
  }

  #taskStarted(taskId: string, toolUseId: string | undefined): void {
    this.#agents.set(taskId, toolUseId && this.#tools.get(toolUseId) === "subagent" ? toolUseId : undefined);
    for (const resolve of this.#awaitingAgent.get(taskId) ?? []) resolve();
    this.#awaitingAgent.delete(taskId);
  }

  #stream(event: StreamEvent): ProviderEvent[] {
    const at = { threadRef: this.threadRef };
    switch (event?.type) {
      case "message_start":
        this.#messageId = typeof event.message?.id === "string" ? event.message.id : this.#messageId;
        this.#streaming.clear();
        return [];
      case "content_block_start": {
        const block = event.content_block;
        const kind: ProviderItemKind | null =
          block?.type === "text" ? "assistant_message" : block?.type === "thinking" ? "reasoning" : null;
        if (!kind) return [];
        const ref = `${this.#messageId}:${event.index}`;
        this.#streaming.set(Number(event.index), { ref, kind });
        // Only the parent streams: a streamed item is the turn's own, even while a subagent runs beside it.
        return [{ type: "item.started", ...at, itemRef: ref, parentItemRef: null, kind }];
      }
      case "content_block_delta": {
        const open = this.#streaming.get(Number(event.index));
        const delta = event.delta;
        const text =
          delta?.type === "text_delta" ? delta.text : delta?.type === "thinking_delta" ? delta.thinking : undefined;
        return open && text
          ? [{ type: "item.delta", ...at, itemRef: open.ref, kind: open.kind, stream: "text", delta: text }]
          : [];
      }
      default:
        return [];
    }
  }

  #toolUse(block: Extract<ContentBlock, { type: "tool_use" }>, parent: string | null): ProviderEvent[] {
    const at = { threadRef: this.threadRef };
    const id = block.id;
    const input: ToolInput = typeof block.input === "object" && block.input !== null ? (block.input as ToolInput) : {};
    const tool = identify(block.name, input);
    switch (tool.role) {
      case "todo":
        this.#tools.set(id, "todo");
        return [{ type: "todo.updated", ...at, items: tool.items }];
      case "plan":
        this.#tools.set(id, "plan");
        return [{ type: "plan.proposed", ...at, itemRef: id, text: tool.text }];
      case "subagent":
        this.#tools.set(id, "subagent");
        return [
          {
            type: "subagent.started",
            ...at,
            itemRef: id,
            agent: tool.agent,
            ...(tool.prompt ? { prompt: tool.prompt } : {}),
          },
        ];
      case "item":
        this.#tools.set(id, tool.kind);
        return [
          { type: "item.started", ...at, itemRef: id, parentItemRef: parent, kind: tool.kind, detail: tool.detail },
        ];
    }
  }

  #subagentEnded(itemRef: string, status: TurnTerminalStatus, result: string): ProviderEvent[] {
    if (this.#ended.has(itemRef)) return [];
    this.#ended.add(itemRef);
    return [{ type: "subagent.completed", threadRef: this.threadRef, itemRef, status, result }];
  }
}
