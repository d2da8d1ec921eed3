import type { ProviderEvent } from "../index.js";
import { claims, completed, finding, type Check, type Finding } from "./findings.js";
import type { Harness } from "./harness.js";

/**
 * The tool part of the conformance model (the seed's tool and streaming capabilities): a turn that thinks, runs a
 * command without asking, and replies. What the record claims of tool items (started, completed, their output, their
 * ids, streamed output, streamed reasoning) is read where the adapter says it: its provider events, and the run's
 * nodes a user sees.
 */

export const TOOL_OUTPUT = "conformance tool output";
/** The behaviour runs a shell command: its item is a command execution. */
const TOOL_KINDS = new Set(["command_execution"]);

export const toolIdleEvents = {
  TOOL: [{ guard: { type: "scripts", params: { kind: "tool" } }, target: "toolRan" }],
};
const FIELDS = [
  "tools.emitsToolStarted",
  "tools.emitsToolCompleted",
  "tools.emitsToolOutput",
  "tools.exposesToolItemIds",
  "streaming.streamsToolOutput",
  "streaming.streamsReasoning",
];
export const toolStates = { toolRan: { type: "final", meta: { fields: FIELDS } } } as const;

export const toolDrives: Record<string, (h: Harness) => Promise<void>> = {
  TOOL: async (h) => {
    const runId = await h.send({ kind: "tool", text: h.nextText("reply"), output: TOOL_OUTPUT });
    if (!runId) throw new Error(`sending a tool turn was refused: ${h.lastError?.code}`);
    await h.untilTerminal(runId);
  },
};

type Item = Extract<ProviderEvent, { type: "item.started" | "item.delta" | "item.completed" }>;
const isItem = (e: ProviderEvent): e is Item =>
  e.type === "item.started" || e.type === "item.delta" || e.type === "item.completed";

export const toolChecks: Record<string, Check> = {
  toolRan: (h, caps) => {
    // The path's only turn is this one: every item the adapter streamed is its.
    const items = h.provider.filter(isItem);
    const tool = items.filter((e) => TOOL_KINDS.has(e.kind));
    const has = (type: Item["type"]) => tool.some((e) => e.type === type);
    const out: Finding[] = [];
    // The turn ran one shell command: an item of any other tool kind misnames it.
    const misnamed = items.filter(
      (e) => e.kind !== "assistant_message" && e.kind !== "reasoning" && !TOOL_KINDS.has(e.kind),
    );
    for (const [type, field] of [
      ["item.started", "tools.emitsToolStarted"],
      ["item.completed", "tools.emitsToolCompleted"],
    ] as const) {
      const wrong = misnamed.find((e) => e.type === type);
      if (wrong)
        out.push(finding(field, false, "", `the shell command the turn ran was reported as a ${wrong.kind} item`));
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
    if (caps.tools.emitsToolOutput)
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
