import { describe, expect, it } from "vitest";
import {
  createScriptedAdapter,
  defineCapabilities,
  type DomainEvent,
  type LogRecord,
  type ScriptStep,
} from "../../src/index.js";
import { ofType, openTestRuntime } from "../support/runtime.js";
import { declaring } from "./hostileProvider.js";

/**
 * `tools.supportsMcpTools`: an MCP tool call is a tool item with its server and tool names, where the record says the
 * provider has MCP tools; from a provider whose record says it has none, a tool item tagged MCP is a protocol warning
 * (`mcp_tools_unavailable`) and is shown as a plain tool. The affordances say which, before the first turn.
 */

const steps: ScriptStep[] = [
  {
    type: "tool",
    name: "docs.search",
    input: { q: "zod" },
    output: "3 hits",
    mcp: { server: "docs", tool: "search" },
  },
  { type: "text", text: "found them" },
];

const protocolWarnings = (events: LogRecord<DomainEvent>[]) =>
  ofType(events, "warning").filter((w) => w.message.startsWith("protocol_error:"));

describe("an MCP tool call", () => {
  for (const supportsMcpTools of [true, false]) {
    it(`is a tool item with its server and tool, or a plain tool and a warning (${supportsMcpTools})`, async () => {
      // The provider tags its MCP calls whatever its record says; the record decides what the runtime believes.
      const provider = createScriptedAdapter({
        capabilities: { tools: { supportsMcpTools: true } },
        script: () => steps,
      });
      const record = defineCapabilities({ tools: { supportsMcpTools } });
      const { rt, events, cleanup } = await openTestRuntime({ p: declaring(provider, record) });
      try {
        const { threadId } = await rt.createThread({ providerTarget: "p" });
        expect(rt.affordances(threadId).tools.mcp).toBe(supportsMcpTools ? "named" : "none");
        const run = await rt.waitForRun((await rt.sendMessage({ threadId, text: "search" })).runId);
        expect(run.status).toBe("completed");
        const tool = run.items.find((i) => i.kind === "tool")!;
        const started = ofType(events, "node.started").find((n) => n.kind === "tool_call")!;
        const policies = ofType(events, "policy.applied").filter((p) => p.policy === "mcp_tools_unavailable");
        expect(tool.detail?.toolName).toBe("docs.search");
        expect(tool.output).toBe("3 hits");
        if (supportsMcpTools) {
          expect(started.detail?.mcp).toEqual({ server: "docs", tool: "search" });
          expect(tool.detail?.mcp).toEqual({ server: "docs", tool: "search" });
          expect(protocolWarnings(events)).toEqual([]);
          expect(policies).toEqual([]);
        } else {
          expect(started.detail).not.toHaveProperty("mcp");
          expect(tool.detail).not.toHaveProperty("mcp");
          expect(protocolWarnings(events).map((w) => w.message)).toEqual([
            "protocol_error: p reported an MCP tool call (docs.search), which its capability record says cannot " +
              "happen (tools.supportsMcpTools is false)",
          ]);
          expect(policies.map((p) => [p.capability, p.outcome, p.runId])).toEqual([
            ["tools.supportsMcpTools", "refused", run.runId],
          ]);
        }
      } finally {
        await cleanup();
      }
    });
  }

  it("from a provider without MCP tools that says so, is a plain tool and nothing more", async () => {
    const provider = createScriptedAdapter({ script: () => steps }); // supportsMcpTools false: it tags nothing
    const { rt, events, cleanup } = await openTestRuntime({ p: provider });
    try {
      const { threadId } = await rt.createThread({ providerTarget: "p" });
      const run = await rt.waitForRun((await rt.sendMessage({ threadId, text: "search" })).runId);
      const tool = run.items.find((i) => i.kind === "tool")!;
      expect(tool.detail?.toolName).toBe("docs.search");
      expect(tool.detail).not.toHaveProperty("mcp");
      expect(protocolWarnings(events)).toEqual([]);
      expect(ofType(events, "policy.applied").filter((p) => p.policy === "mcp_tools_unavailable")).toEqual([]);
    } finally {
      await cleanup();
    }
  });
});
