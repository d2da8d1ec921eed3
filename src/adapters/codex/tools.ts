import type { ProviderItemKind } from "../../domain/items.js";
import type { DynamicToolDefinition, ProviderEvent } from "../contract.js";
import type { DynamicToolSpec, ThreadItem } from "./protocol/types.js";
import type { CodexThreadItem } from "./transport.js";

/**
 * Codex's tools as the runtime sees them: which native item is which item kind, its name and
 * detail, the `update_plan` tool (offered per thread), and the embedder's tools as Codex's
 * dynamic tools. A native item this adapter does not project is a `tool_call` named
 * `codex:<type>`: visibly unknown, never silently dropped.
 */

/** The native item types with a kind of their own (the rest are tools, named `codex:<type>`). */
const KINDS: Partial<Record<ThreadItem["type"], ProviderItemKind>> = {
  agentMessage: "assistant_message",
  reasoning: "reasoning",
  commandExecution: "command_execution",
  fileChange: "file_change",
  mcpToolCall: "tool_call",
  dynamicToolCall: "tool_call",
};

/** Native items that are not part of the agent's output (the user's own message, bookkeeping). */
const IGNORED = new Set<string>([
  "userMessage",
  "hookPrompt",
  "contextCompaction",
  "enteredReviewMode",
  "exitedReviewMode",
]);

/** The item kind of a native item; null for one that is not the agent's output. `plan` items are plans (mapper.ts). */
export function kindOf(item: CodexThreadItem): ProviderItemKind | null {
  if (item.type === "(unknown)") return "tool_call";
  if (IGNORED.has(item.type)) return null;
  return KINDS[item.type] ?? "tool_call";
}

export type ItemDetail = NonNullable<Extract<ProviderEvent, { type: "item.started" }>["detail"]>;

/** What an item says when it starts: a command, the files of a change, a tool's name and input. */
export function detailOf(item: CodexThreadItem): ItemDetail | undefined {
  switch (item.type) {
    case "commandExecution":
      return { command: item.command };
    case "fileChange":
      return {
        path: item.changes
          .map((c) => c.path)
          .filter(Boolean)
          .join(", "),
        diff: item.changes.map((c) => c.diff).join("\n"),
      };
    // Not tagged `mcp`: the record says no MCP tools until a real-binary test shows one (GAP.md).
    case "mcpToolCall":
      return { toolName: `${item.server}.${item.tool}`, input: item.arguments ?? null };
    case "dynamicToolCall":
      return { toolName: item.namespace ? `${item.namespace}.${item.tool}` : item.tool, input: item.arguments ?? null };
    case "(unknown)":
      return { toolName: `codex:${item.nativeType}` };
    default:
      return item.type in KINDS ? undefined : { toolName: `codex:${item.type}` };
  }
}

/**
 * Thread config that offers the model `update_plan` (off by default in 0.171 for the bundled
 * models): without it Codex answers the call "unsupported call: update_plan" and plans never appear.
 */
export const UPDATE_PLAN_TOOL = { tools: { update_plan: { enabled: true } } };

/**
 * The embedder's tools as Codex's dynamic tools (experimental: `thread/start` takes them, resume and fork do not;
 * a call comes back as an `item/tool/call` request, answered through the runtime).
 */
export function dynamicTools(tools: readonly DynamicToolDefinition[]): { dynamicTools?: DynamicToolSpec[] } {
  if (tools.length === 0) return {};
  return {
    dynamicTools: tools.map((t) => ({
      type: "function",
      name: t.name,
      description: t.description,
      inputSchema: t.inputSchema,
    })),
  };
}
