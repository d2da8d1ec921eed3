import type { ItemKind, ProviderEvent, RequestPayload } from "../contract.js";

/**
 * Claude Agent SDK messages -> normalized provider events, per provider thread (one SDK
 * session). Claude has no turn ids: a turn is what follows a user message up to its `result`.
 * Tool kinds map from exact tool names; other tools stay `tool_call`s under their own name.
 */

type Block = { type: string; id?: string; text?: string; thinking?: string; name?: string; input?: Record<string, unknown> };
type Msg = { type: string; subtype?: string; uuid?: string; session_id?: string; event?: Record<string, unknown>; message?: { id?: string; content?: unknown }; is_error?: boolean; result?: string; parent_tool_use_id?: string | null };

const TOOL_KIND: Record<string, ItemKind> = { Bash: "command_execution", Edit: "file_change", Write: "file_change", MultiEdit: "file_change", NotebookEdit: "file_change" };

const str = (v: unknown): string | undefined => (typeof v === "string" ? v : undefined);

/** A tool use as the request a permission prompt stands for. */
export function permissionPayload(tool: string, input: Record<string, unknown>): RequestPayload {
  if (tool === "Bash") return { kind: "command", command: str(input.command) ?? "", ...(str(input.description) ? { reason: str(input.description)! } : {}) };
  if (TOOL_KIND[tool] === "file_change") return { kind: "file_change", path: str(input.file_path) ?? str(input.notebook_path) ?? "" };
  if (tool === "Read") return { kind: "file_read", path: str(input.file_path) ?? "" };
  return { kind: "dynamic_tool", toolName: tool, input };
}

export class ClaudeThreadMapper {
  /** Stream blocks by index in the current model message: their item ref. */
  #streaming = new Map<number, { ref: string; kind: ItemKind }>();
  #messageId = "";
  /** Tool uses by id, for their results (TodoWrite's are artifacts, not items). */
  #tools = new Map<string, ItemKind | "todo">();
  /** Assistant message uuids of this thread's completed turns, oldest first (rollback points). */
  readonly turnEnds: string[] = [];
  #lastAssistantUuid: string | null = null;
  interrupting = false;

  constructor(private readonly threadRef: string) {}

  map(raw: unknown): ProviderEvent[] {
    const m = raw as Msg;
    const at = { threadRef: this.threadRef };
    switch (m.type) {
      case "stream_event":
        return this.#stream(m.event ?? {});
      case "assistant": {
        if (m.uuid) this.#lastAssistantUuid = m.uuid;
        const blocks = Array.isArray(m.message?.content) ? (m.message!.content as Block[]) : [];
        const out: ProviderEvent[] = [];
        blocks.forEach((block, index) => {
          const ref = `${m.message?.id ?? this.#messageId}:${index}`;
          if (block.type === "text") out.push({ type: "item.completed", ...at, itemRef: ref, kind: "assistant_message", status: "completed", text: block.text ?? "" });
          else if (block.type === "thinking") out.push({ type: "item.completed", ...at, itemRef: ref, kind: "reasoning", status: "completed", text: block.thinking ?? "" });
          else if (block.type === "tool_use" && block.id && block.name) out.push(...this.#toolUse(block));
        });
        return out;
      }
      case "user": {
        const blocks = Array.isArray(m.message?.content) ? (m.message!.content as Array<Block & { tool_use_id?: string; content?: unknown; is_error?: boolean }>) : [];
        return blocks.flatMap((b): ProviderEvent[] => {
          if (b.type !== "tool_result" || !b.tool_use_id) return [];
          const known = this.#tools.get(b.tool_use_id);
          if (known === "todo") return [];
          const kind = known ?? "tool_call";
          const output = typeof b.content === "string" ? b.content : Array.isArray(b.content) ? (b.content as Block[]).map((c) => c.text ?? "").join("") : "";
          return [{ type: "item.completed", ...at, itemRef: b.tool_use_id, kind, status: b.is_error ? "failed" : "completed", output }];
        });
      }
      case "result": {
        const interrupted = this.interrupting && m.subtype !== "success";
        this.interrupting = false;
        if (m.subtype === "success" && this.#lastAssistantUuid) this.turnEnds.push(this.#lastAssistantUuid);
        const status = m.subtype === "success" ? "completed" : interrupted ? "interrupted" : "failed";
        return [{ type: "turn.terminal", ...at, status, threadDisposition: "reusable", failureClass: status === "failed" ? "provider_error" : null, message: status === "failed" ? (m.result ?? m.subtype ?? "error") : null, retryable: false }];
      }
      default:
        return [];
    }
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
        const kind: ItemKind | null = block.type === "text" ? "assistant_message" : block.type === "thinking" ? "reasoning" : null;
        if (!kind) return [];
        const ref = `${this.#messageId}:${index}`;
        this.#streaming.set(index, { ref, kind });
        return [{ type: "item.started", ...at, itemRef: ref, kind }];
      }
      case "content_block_delta": {
        const open = this.#streaming.get(Number(event.index));
        const delta = (event.delta ?? {}) as { type?: string; text?: string; thinking?: string };
        const text = delta.type === "text_delta" ? delta.text : delta.type === "thinking_delta" ? delta.thinking : undefined;
        return open && text ? [{ type: "item.delta", ...at, itemRef: open.ref, kind: open.kind, stream: "text", delta: text }] : [];
      }
      default:
        return [];
    }
  }

  #toolUse(block: Block): ProviderEvent[] {
    const at = { threadRef: this.threadRef };
    const input = block.input ?? {};
    if (block.name === "TodoWrite") {
      this.#tools.set(block.id!, "todo");
      const todos = Array.isArray(input.todos) ? (input.todos as Array<{ content?: string; status?: string }>) : [];
      const status = (s?: string) => (s === "completed" ? "completed" : s === "in_progress" ? "in_progress" : "pending") as "completed" | "in_progress" | "pending";
      return [{ type: "todo.updated", ...at, items: todos.map((t) => ({ text: t.content ?? "", status: status(t.status) })) }];
    }
    const kind = TOOL_KIND[block.name!] ?? "tool_call";
    this.#tools.set(block.id!, kind);
    const detail =
      kind === "command_execution"
        ? { command: str(input.command) ?? "" }
        : kind === "file_change"
          ? { path: str(input.file_path) ?? "", ...(str(input.new_string) ? { diff: `+${str(input.new_string)}` } : {}) }
          : { toolName: block.name!, input };
    return [{ type: "item.started", ...at, itemRef: block.id!, kind, detail }];
  }
}
