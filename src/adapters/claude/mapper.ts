import type { TurnTerminalStatus } from "../../domain/entities.js";
import type { ProviderItemKind, RequestPayload, StepStatus } from "../../domain/items.js";
import type { ProviderEvent } from "../contract.js";

/**
 * Claude Agent SDK messages -> normalized provider events, per provider thread (one SDK
 * session). Claude has no turn ids: a turn is what follows a user message up to its `result`.
 * Tool kinds map from exact tool names; other tools stay `tool_call`s under their own name.
 * A subagent (the Agent tool, formerly Task) is a subagent node; the messages it forwards carry
 * `parent_tool_use_id` and nest under it, and its permission prompts name it by its agent id, which its task's start
 * ties to its tool use. TodoWrite is a todo list, ExitPlanMode's plan a
 * proposed plan.
 */

type Block = {
  type: string;
  id?: string;
  text?: string;
  thinking?: string;
  name?: string;
  input?: Record<string, unknown>;
};
type Msg = {
  type: string;
  subtype?: string;
  uuid?: string;
  session_id?: string;
  event?: Record<string, unknown>;
  message?: { id?: string; content?: unknown };
  is_error?: boolean;
  result?: string;
  parent_tool_use_id?: string | null;
  /** task_notification: the subagent's tool use, how it ended and its report. */
  tool_use_id?: string;
  status?: string;
  summary?: string;
  /** On a tool result: the tool's own account (a background agent's says `async_launched`). */
  tool_use_result?: { status?: string };
  /** task_started: the task's id (a subagent's agent id, which its permission prompts carry). */
  task_id?: string;
};
type Tracked = ProviderItemKind | "todo" | "plan" | "subagent";

/** The subagent tool: `Agent` in Claude Code 2.x, `Task` before. */
const SUBAGENT_TOOLS = new Set(["Agent", "Task"]);

const TOOL_KIND: Record<string, ProviderItemKind> = {
  Bash: "command_execution",
  Edit: "file_change",
  Write: "file_change",
  NotebookEdit: "file_change",
};

const str = (v: unknown): string | undefined => (typeof v === "string" ? v : undefined);

/** A tool use as the request a permission prompt stands for. */
export function permissionPayload(tool: string, input: Record<string, unknown>): RequestPayload {
  if (tool === "Bash")
    return {
      kind: "command",
      command: str(input.command) ?? "",
      ...(str(input.description) ? { reason: str(input.description)! } : {}),
    };
  if (TOOL_KIND[tool] === "file_change")
    return { kind: "file_change", path: str(input.file_path) ?? str(input.notebook_path) ?? "" };
  if (tool === "Read") return { kind: "file_read", path: str(input.file_path) ?? "" };
  if (tool === "AskUserQuestion" && Array.isArray(input.questions) && input.questions.length > 0) {
    type Asked = {
      question?: string;
      header?: string;
      options?: Array<{ label?: string; description?: string }>;
      multiSelect?: boolean;
    };
    // Claude keys the answers by question text: that text is the question's id.
    const questions = (input.questions as Asked[]).map((q) => ({
      id: q.question ?? "",
      question: q.question ?? "",
      ...(q.header ? { header: q.header } : {}),
      ...(q.options
        ? {
            options: q.options.map((o) => ({
              label: o.label ?? "",
              ...(o.description ? { description: o.description } : {}),
            })),
          }
        : {}),
      ...(q.multiSelect !== undefined ? { multiSelect: q.multiSelect } : {}),
    }));
    return { kind: "user_input", questions };
  }
  // ExitPlanMode asks to leave plan mode with its plan: the plan itself is a proposed-plan artifact.
  if (tool === "ExitPlanMode") return { kind: "plan_approval", plan: str(input.plan) ?? "" };
  // Another of Claude's own tools asks: an approval of that tool (never the embedder's tool, which only Tiller runs).
  return { kind: "tool_approval", toolName: tool, input };
}

/** What Claude writes to its transcript as a user entry that is not a prompt of its own. */
const INTERRUPT_MARKER = "[Request interrupted by user";

type TranscriptEntry = { type: string; uuid: string; parent_tool_use_id: string | null; message: unknown };

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
    const blocks = content as Block[];
    const text = blocks
      .filter((b) => b.type === "text")
      .map((b) => b.text ?? "")
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

  map(raw: unknown): ProviderEvent[] {
    const m = raw as Msg;
    const at = { threadRef: this.threadRef };
    switch (m.type) {
      case "stream_event":
        // Subagents' text arrives whole in their forwarded messages: only the parent streams.
        return m.parent_tool_use_id ? [] : this.#stream(m.event ?? {});
      case "assistant": {
        // A subagent's message names its task; the parent's names none (`null`): its items are the turn's own.
        const parent = m.parent_tool_use_id ?? null;
        const blocks = Array.isArray(m.message?.content) ? (m.message!.content as Block[]) : [];
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
      case "user": {
        const blocks = Array.isArray(m.message?.content)
          ? (m.message!.content as Array<Block & { tool_use_id?: string; content?: unknown; is_error?: boolean }>)
          : [];
        return blocks.flatMap((b): ProviderEvent[] => {
          if (b.type !== "tool_result" || !b.tool_use_id) return [];
          const known = this.#tools.get(b.tool_use_id);
          if (known === "todo" || known === "plan") return [];
          const output =
            typeof b.content === "string"
              ? b.content
              : Array.isArray(b.content)
                ? (b.content as Block[]).map((c) => c.text ?? "").join("")
                : "";
          if (known === "subagent") {
            // A background agent (when allowed) was only launched: it ends with its task notification.
            if (m.tool_use_result?.status === "async_launched") return [];
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
      case "system":
        if (m.subtype === "task_started" && m.task_id) this.#taskStarted(m.task_id, m.tool_use_id);
        // A subagent's own report of how it ended (cleaner than the tool result that wraps it).
        if (m.subtype === "task_notification" && m.tool_use_id && this.#tools.get(m.tool_use_id) === "subagent") {
          const status =
            m.status === "completed"
              ? "completed"
              : m.status === "stopped" || m.status === "killed"
                ? "interrupted"
                : "failed";
          return this.#subagentEnded(m.tool_use_id, status, m.summary ?? "");
        }
        return [];
      case "result": {
        this.#blocksSeen.clear();
        const interrupted = this.interrupting && m.subtype !== "success";
        this.interrupting = false;
        const status = m.subtype === "success" ? "completed" : interrupted ? "interrupted" : "failed";
        return [
          {
            type: "turn.terminal",
            ...at,
            status,
            threadDisposition: "reusable",
            failureClass: status === "failed" ? "provider_error" : null,
            message: status === "failed" ? (m.result ?? m.subtype ?? "error") : null,
            retryable: false,
          },
        ];
      }
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

  #taskStarted(taskId: string, toolUseId: string | undefined): void {
    this.#agents.set(taskId, toolUseId && this.#tools.get(toolUseId) === "subagent" ? toolUseId : undefined);
    for (const resolve of this.#awaitingAgent.get(taskId) ?? []) resolve();
    this.#awaitingAgent.delete(taskId);
  }

  #stream(event: Record<string, unknown>): ProviderEvent[] {
    const at = { threadRef: this.threadRef };
    switch (event.type) {
      case "message_start":
        this.#messageId = str((event.message as { id?: string } | undefined)?.id) ?? this.#messageId;
        this.#streaming.clear();
        return [];
      case "content_block_start": {
        const index = Number(event.index);
        const block = (event.content_block ?? {}) as Block;
        const kind: ProviderItemKind | null =
          block.type === "text" ? "assistant_message" : block.type === "thinking" ? "reasoning" : null;
        if (!kind) return [];
        const ref = `${this.#messageId}:${index}`;
        this.#streaming.set(index, { ref, kind });
        // Only the parent streams: a streamed item is the turn's own, even while a subagent runs beside it.
        return [{ type: "item.started", ...at, itemRef: ref, parentItemRef: null, kind }];
      }
      case "content_block_delta": {
        const open = this.#streaming.get(Number(event.index));
        const delta = (event.delta ?? {}) as { type?: string; text?: string; thinking?: string };
        const text =
          delta.type === "text_delta" ? delta.text : delta.type === "thinking_delta" ? delta.thinking : undefined;
        return open && text
          ? [{ type: "item.delta", ...at, itemRef: open.ref, kind: open.kind, stream: "text", delta: text }]
          : [];
      }
      default:
        return [];
    }
  }

  #toolUse(block: Block, parent: string | null): ProviderEvent[] {
    const at = { threadRef: this.threadRef };
    const id = block.id!;
    const input = block.input ?? {};
    if (block.name === "TodoWrite") {
      this.#tools.set(id, "todo");
      const todos = Array.isArray(input.todos) ? (input.todos as Array<{ content?: string; status?: string }>) : [];
      const status = (s?: string) =>
        (s === "completed" ? "completed" : s === "in_progress" ? "in_progress" : "pending") as StepStatus;
      return [
        { type: "todo.updated", ...at, items: todos.map((t) => ({ text: t.content ?? "", status: status(t.status) })) },
      ];
    }
    if (block.name === "ExitPlanMode") {
      this.#tools.set(id, "plan");
      return [{ type: "plan.proposed", ...at, itemRef: id, text: str(input.plan) ?? "" }];
    }
    if (SUBAGENT_TOOLS.has(block.name!)) {
      this.#tools.set(id, "subagent");
      const prompt = str(input.prompt);
      return [
        {
          type: "subagent.started",
          ...at,
          itemRef: id,
          agent: str(input.subagent_type) ?? "general-purpose",
          ...(prompt ? { prompt } : {}),
        },
      ];
    }
    const kind = TOOL_KIND[block.name!] ?? "tool_call";
    this.#tools.set(id, kind);
    const detail =
      kind === "command_execution"
        ? { command: str(input.command) ?? "" }
        : kind === "file_change"
          ? {
              path: str(input.file_path) ?? "",
              ...(str(input.new_string) ? { diff: `+${str(input.new_string)}` } : {}),
            }
          : { toolName: block.name!, input };
    return [{ type: "item.started", ...at, itemRef: id, parentItemRef: parent, kind, detail }];
  }

  #subagentEnded(itemRef: string, status: TurnTerminalStatus, result: string): ProviderEvent[] {
    if (this.#ended.has(itemRef)) return [];
    this.#ended.add(itemRef);
    return [{ type: "subagent.completed", threadRef: this.threadRef, itemRef, status, result }];
  }
}
