import type { ProviderCapabilities } from "../../capabilities/index.js";
import type { RequestPayload } from "../../domain/items.js";
import type { ScriptStep } from "./host/script.js";

/**
 * Tool identity of the scripted provider: a scripted tool is a `tool_call` item named by its tool, tagged with its MCP
 * server and tool only where the record says tool calls are MCP items; an embedder's tool the model calls back is a
 * `tool_call` item and a `dynamic_tool` request, offered only where the record takes callbacks and the session was
 * offered the tool.
 */

/** A scripted tool's item detail. */
export function toolDetail(step: Extract<ScriptStep, { type: "tool" }>, caps: ProviderCapabilities) {
  const mcp = step.mcp && caps.tools.supportsMcpTools ? { mcp: step.mcp } : {};
  return { toolName: step.name, input: step.input, ...mcp };
}

/** Whether the model may call the embedder's tool back: offered to the session, on a record that takes callbacks. */
export function canCallBack(tool: string, caps: ProviderCapabilities, offered: readonly string[] | undefined): boolean {
  return caps.tools.supportsDynamicToolCallbacks && (offered ?? []).includes(tool);
}

/** A call back to the embedder's tool: its item detail and the request the runtime answers. */
export function callBack(step: Extract<ScriptStep, { type: "tool_call" }>) {
  const input = step.input ?? null;
  const request: RequestPayload = { kind: "dynamic_tool", toolName: step.tool, input };
  return { detail: { toolName: step.tool, input }, request };
}
