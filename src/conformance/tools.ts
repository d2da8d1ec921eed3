import { and } from "xstate";
import type { ProviderEvent } from "../index.js";
import { claims, completed, finding, type Check, type Finding } from "./findings.js";
import { DYNAMIC_TOOL, type Harness } from "./harness.js";

/**
 * The tool part of the conformance model (the seed's tool and streaming capabilities): a turn that thinks, runs a
 * command without asking, and replies. What the record claims of tool items (started, completed, their output, their
 * ids, streamed output, streamed reasoning) is read where the adapter says it: its provider events, and the run's
 * nodes a user sees.
 */

export const TOOL_OUTPUT = "conformance tool output";
/** The behaviour runs a shell command: its item is a command execution. */
const TOOL_KINDS = new Set(["command_execution"]);

const MCP = "tools.supportsMcpTools";
const DYNAMIC = "tools.supportsDynamicToolCallbacks";
/** The MCP tool a turn calls. */
export const MCP_TOOL = { server: "conformance", tool: "lookup" } as const;
const scripts = (kind: string) => ({ type: "scripts", params: { kind } });

export const toolIdleEvents = {
  TOOL: [{ guard: scripts("tool"), target: "toolRan" }],
  MCP_TOOL: [
    { guard: and([scripts("mcp"), "hasMcpTools"]), target: "mcpShown" },
    { guard: scripts("mcp"), target: "mcpPlain" },
  ],
  CALL_BACK: [
    { guard: and([scripts("dynamic_tool"), "callsBack"]), target: "calledBack" },
    { guard: scripts("dynamic_tool"), target: "notCalledBack" },
  ],
};
const FIELDS = [
  "tools.emitsToolStarted",
  "tools.emitsToolCompleted",
  "tools.emitsToolOutput",
  "tools.exposesToolItemIds",
  "streaming.streamsToolOutput",
  "streaming.streamsReasoning",
];
export const toolStates = {
  toolRan: { type: "final", meta: { fields: FIELDS } },
  mcpShown: { type: "final", meta: { fields: [MCP] } },
  mcpPlain: { type: "final", meta: { fields: [MCP] } },
  calledBack: { type: "final", meta: { fields: [DYNAMIC] } },
  notCalledBack: { type: "final", meta: { fields: [DYNAMIC] } },
} as const;

export const toolDrives: Record<string, (h: Harness) => Promise<void>> = {
  TOOL: async (h) => {
    const runId = await h.send({ kind: "tool", text: h.nextText("reply"), output: TOOL_OUTPUT });
    if (!runId) throw new Error(`sending a tool turn was refused: ${h.lastError?.code}`);
    await h.untilTerminal(runId);
  },
  MCP_TOOL: async (h) => {
    const runId = await h.send({ kind: "mcp", text: h.nextText("reply"), ...MCP_TOOL });
    if (!runId) throw new Error(`sending an MCP tool turn was refused: ${h.lastError?.code}`);
    await h.untilTerminal(runId);
  },
  CALL_BACK: async (h) => {
    const runId = await h.send({ kind: "dynamic_tool", text: h.nextText("reply"), tool: DYNAMIC_TOOL.name });
    if (!runId) throw new Error(`sending a tool call-back turn was refused: ${h.lastError?.code}`);
    await h.untilTerminal(runId);
  },
};

type Item = Extract<ProviderEvent, { type: "item.started" | "item.delta" | "item.completed" }>;
const isItem = (e: ProviderEvent): e is Item =>
  e.type === "item.started" || e.type === "item.delta" || e.type === "item.completed";

const toolNode = (h: Harness, kind: string) => h.events("node.started", (e) => e.runId === h.runId && e.kind === kind);

export const toolChecks: Record<string, Check> = {
  mcpShown: (h) => {
    const tagged = toolNode(h, "tool_call").find((n) => n.detail?.mcp?.server === MCP_TOOL.server);
    const stripped = h.policies().includes("mcp_tools_unavailable");
    const seen = tagged
      ? `an MCP call to ${tagged.detail?.mcp?.server}.${tagged.detail?.mcp?.tool}`
      : "no MCP tool call";
    return [
      finding(MCP, !!tagged && !stripped, seen, stripped ? `${seen}; mcp_tools_unavailable` : seen),
      completed(h, h.runId, MCP),
    ];
  },
  mcpPlain: (h) => {
    const tagged = toolNode(h, "tool_call").some((n) => n.detail?.mcp);
    const ok = !tagged && h.terminal(h.runId)?.status === "completed";
    return [finding(MCP, ok, "no MCP tool: the call ran as a plain tool, or not at all", "an MCP tool call anyway")];
  },
  calledBack: (h) => {
    const asked = h.events("request.opened", (e) => e.runId === h.runId && e.payload.kind === "dynamic_tool")[0];
    const node = asked && h.events("node.completed", (e) => e.nodeId === asked.nodeId)[0];
    const answered = !!node?.output?.includes(DYNAMIC_TOOL.answer);
    const seen = asked ? `called ${DYNAMIC_TOOL.name}, ${answered ? "given" : "not given"} its answer` : "no call back";
    return [finding(DYNAMIC, !!asked && answered, seen, seen), completed(h, h.runId, DYNAMIC)];
  },
  notCalledBack: (h) => {
    const asked = h.events("request.opened", (e) => e.runId === h.runId && e.payload.kind === "dynamic_tool").length;
    const unsupported = h.policies().includes("dynamic_tools_unsupported");
    const ok = asked === 0 && unsupported && h.terminal(h.runId)?.status === "completed";
    const seen = `${asked} call(s) back, dynamic_tools_unsupported ${unsupported ? "" : "not "}recorded`;
    return [finding(DYNAMIC, ok, seen, seen)];
  },
  toolRan: (h, caps) => {
    // The path's only turn is this one: every item the adapter streamed is its, and its one tool is the command.
    const items = h.provider.filter(isItem);
    const tool = items.filter((e) => e.kind !== "assistant_message" && e.kind !== "reasoning");
    const has = (type: Item["type"]) => tool.some((e) => e.type === type);
    const out: Finding[] = [];
    // A shell command reported as another kind of tool: the item that announced it misnames it.
    const misnamed = tool.some((e) => TOOL_KINDS.has(e.kind)) ? undefined : tool.find((e) => !TOOL_KINDS.has(e.kind));
    if (misnamed) {
      const field = misnamed.type === "item.completed" ? "tools.emitsToolCompleted" : "tools.emitsToolStarted";
      return [finding(field, false, "", `the shell command the turn ran was reported as a ${misnamed.kind} item`)];
    }
    if (caps.tools.emitsToolStarted)
      out.push(finding("tools.emitsToolStarted", has("item.started"), "tool started", "no tool start"));
    if (caps.tools.emitsToolCompleted)
      out.push(
        finding("tools.emitsToolCompleted", has("item.completed"), "tool completed", "no tool completion"),
        completed(h, h.runId, "tools.emitsToolCompleted"),
      );
    const node = h.events("node.started", (e) => e.runId === h.runId && TOOL_KINDS.has(e.kind))[0];
    const closed = node && h.events("node.completed", (e) => e.nodeId === node.nodeId)[0];
    const shown = closed?.output?.includes(TOOL_OUTPUT) ?? false;
    // The output comes with the tool's completion: without one, there is none to speak of.
    if (caps.tools.emitsToolOutput && (has("item.completed") || !caps.tools.emitsToolCompleted))
      out.push(finding("tools.emitsToolOutput", shown, "the output is on the tool's node", `output ${closed?.output}`));
    if (caps.tools.exposesToolItemIds && claims(caps.identity.nativeItemIds)) {
      const ref = tool.find((e) => e.itemRef)?.itemRef;
      out.push(finding("tools.exposesToolItemIds", !!ref, `tool item ref ${ref}`, "no tool item ref"));
    }
    if (caps.streaming.streamsToolOutput && caps.tools.emitsToolOutput) {
      const streamed = tool.some((e) => e.type === "item.delta" && e.stream === "output");
      out.push(finding("streaming.streamsToolOutput", streamed, "output streamed", "no output delta"));
    }
    if (caps.streaming.streamsReasoning) {
      const streamed = items.some((e) => e.type === "item.delta" && e.kind === "reasoning");
      out.push(finding("streaming.streamsReasoning", streamed, "reasoning streamed", "no reasoning delta"));
    }
    return out;
  },
};
