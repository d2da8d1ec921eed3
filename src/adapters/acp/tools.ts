import type { ItemDetail, ProviderItemKind, RequestPayload } from "../../domain/items.js";
import type { ToolCall, ToolCallContent, ToolCallUpdate, ToolKind } from "./protocol/sdk.js";

/**
 * Tool identity for ACP: an agent's tool calls carry a `kind` from the protocol's closed list, and that is all the
 * adapter classifies by (never a title or a name): `execute` is a command, `edit`/`delete`/`move` a file change, any
 * other kind a tool under its native name (`name`, where the agent gives one, else its kind). A permission request is
 * asked about its tool call, and asks what that call is: a command, a file change, a file read, else a tool approval.
 */

/** What the adapter knows of a tool call: the fields its `tool_call` and `tool_call_update`s said so far. */
export interface KnownTool {
  toolCallId: string;
  kind: ToolKind;
  name: string | null;
  title: string;
  rawInput: unknown;
  locations: string[];
  content: ToolCallContent[];
  /** The agent says the call is pending: its input still streams, or it waits for a permission. */
  pending: boolean;
  /** The content it showed once it ran (in progress, or ended): its output. What it showed pending describes it. */
  ranContent: ToolCallContent[] | null;
  /** What the tool returned, as the agent gives it (its shape is the agent's). */
  rawOutput: unknown;
  /** The item kind it was started under (null: not started yet); a later change of its kind does not change it. */
  started: ProviderItemKind | null;
  ended: boolean;
}

export function itemKindOf(kind: ToolKind): ProviderItemKind {
  if (kind === "execute") return "command_execution";
  if (kind === "edit" || kind === "delete" || kind === "move") return "file_change";
  return "tool_call";
}

/** A new tool call, or an update that names one the adapter has not seen (the agent's permission request, first). */
export function knownTool(call: ToolCall | ToolCallUpdate): KnownTool {
  return merge(
    {
      toolCallId: call.toolCallId,
      kind: "other",
      name: null,
      title: "",
      rawInput: undefined,
      locations: [],
      content: [],
      pending: false,
      ranContent: null,
      rawOutput: undefined,
      started: null,
      ended: false,
    },
    call,
  );
}

/** A tool call with what an update says (an absent or null field keeps what was said before). */
export function merge(tool: KnownTool, update: ToolCall | ToolCallUpdate): KnownTool {
  if (update.kind) tool.kind = update.kind;
  if (update.name) tool.name = update.name;
  if (update.title) tool.title = update.title;
  if (update.rawInput !== undefined && update.rawInput !== null) tool.rawInput = update.rawInput;
  if (update.locations) tool.locations = update.locations.map((l) => l.path);
  if (update.content) tool.content = update.content;
  if (update.status === "pending") tool.pending = true;
  else if (update.status) tool.pending = false;
  // Content shown while the call is pending describes it; from then on it is what the call produced.
  if (update.content && !tool.pending) tool.ranContent = update.content;
  if (update.rawOutput !== undefined && update.rawOutput !== null) tool.rawOutput = update.rawOutput;
  return tool;
}

const stringField = (value: unknown, field: string): string | undefined => {
  const found = typeof value === "object" && value !== null ? (value as Record<string, unknown>)[field] : undefined;
  return typeof found === "string" ? found : undefined;
};

/** The command a command tool runs: its input's `command` where it is a string, else its title (ACP's convention). */
function commandOf(tool: KnownTool): string {
  return stringField(tool.rawInput, "command") ?? tool.title;
}

/** The first diff of a tool's content, as a unified-style text (ACP gives old and new text). */
function diffOf(tool: KnownTool): { path: string; diff: string } | null {
  const diff = tool.content.find((c) => c.type === "diff");
  if (!diff) return null;
  const lines = (text: string, sign: string) =>
    text === ""
      ? []
      : text
          .replace(/\n$/, "")
          .split("\n")
          .map((l) => `${sign}${l}`);
  const text = [`--- ${diff.path}`, `+++ ${diff.path}`, ...lines(diff.oldText ?? "", "-"), ...lines(diff.newText, "+")];
  return { path: diff.path, diff: `${text.join("\n")}\n` };
}

/** The path a file tool works on: its first location, else its diff's path. */
function pathOf(tool: KnownTool): string {
  return tool.locations[0] ?? diffOf(tool)?.path ?? "";
}

export function toolDetail(tool: KnownTool): ItemDetail {
  const kind = itemKindOf(tool.kind);
  const input = tool.rawInput === undefined ? {} : { input: tool.rawInput };
  if (kind === "command_execution") return { toolName: tool.name ?? tool.kind, command: commandOf(tool), ...input };
  if (kind === "file_change") {
    const diff = diffOf(tool);
    return { toolName: tool.name ?? tool.kind, path: pathOf(tool), ...(diff ? { diff: diff.diff } : {}), ...input };
  }
  return { toolName: tool.name ?? tool.kind, ...input };
}

/**
 * What a permission request about this tool asks (the request's own kind, by the tool's kind). Where the agent gave
 * no command or path, the request does not pretend to know one (ACP: "avoid presenting the request as if argument
 * details were known"): it is a tool approval of the tool's kind, with what input there is.
 */
export function permissionPayload(tool: KnownTool): RequestPayload {
  const command = commandOf(tool);
  if (tool.kind === "execute" && command) return { kind: "command", command };
  const path = pathOf(tool);
  if ((tool.kind === "edit" || tool.kind === "delete" || tool.kind === "move") && path) {
    const diff = diffOf(tool);
    return { kind: "file_change", path, ...(diff ? { diff: diff.diff } : {}) };
  }
  if (tool.kind === "read" && path) return { kind: "file_read", path };
  return { kind: "tool_approval", toolName: tool.name ?? tool.kind, input: tool.rawInput ?? null };
}

/**
 * Where an agent that shows a tool's output in no content block puts it in the tool's `rawOutput` (agent-specific: ACP
 * leaves its shape open): the field holding the output's text, and the one holding a command's exit code.
 */
export interface RawOutputFields {
  text?: string;
  exitCode?: string;
}

/**
 * A tool's output: its raw output where that is text, else the target's field of it, else the text of the content it
 * showed once it ran (never what it showed pending: a description, a permission's prompt; never a terminal's: the
 * client runs none).
 */
export function outputOf(tool: KnownTool, fields: RawOutputFields = {}): string {
  if (typeof tool.rawOutput === "string") return tool.rawOutput;
  const text = fields.text ? rawField(tool.rawOutput, fields.text) : undefined;
  if (typeof text === "string") return text;
  const shown = (tool.ranContent ?? []).flatMap((b) =>
    b.type === "content" && b.content.type === "text" ? [b.content.text] : [],
  );
  return shown.join("\n");
}

/** A command's exit code, where the target names the raw output's field that holds it. */
export function exitCodeOf(tool: KnownTool, fields: RawOutputFields = {}): number | undefined {
  const code = fields.exitCode ? rawField(tool.rawOutput, fields.exitCode) : undefined;
  return typeof code === "number" && Number.isInteger(code) ? code : undefined;
}

const rawField = (raw: unknown, field: string): unknown =>
  typeof raw === "object" && raw !== null && !Array.isArray(raw) ? (raw as Record<string, unknown>)[field] : undefined;
