import { afterEach, describe, expect, it } from "vitest";
import type { RuntimeOptions } from "../../src/index.js";
import { codexWorld, type CodexWorld } from "./harness.js";

/**
 * The embedder's tools on the real Codex binary, offline: offered as Codex's dynamic tools when a thread starts, a
 * model's call comes back as an `item/tool/call` request that the runtime answers with the tool's result, and the
 * result reaches the model in its next request.
 */

let world: CodexWorld | null = null;
afterEach(async () => {
  await world?.cleanup();
  world = null;
});

/** The function call output the model was given for a call id, as the Responses API carries it. */
function toolOutputIn(body: unknown, callId: string): string | undefined {
  const input = (body as { input?: Array<{ type?: string; call_id?: string; output?: unknown }> }).input ?? [];
  const output = input.find((i) => i.type === "function_call_output" && i.call_id === callId)?.output;
  return typeof output === "string" ? output : output === undefined ? undefined : JSON.stringify(output);
}

describe("codex: dynamic tools", () => {
  it("calls an embedder tool back: the model calls it, the runtime answers, the result reaches the model", async () => {
    const calls: unknown[] = [];
    const tools: NonNullable<RuntimeOptions["tools"]> = [
      {
        name: "lookup_order",
        description: "Looks an order up by its number",
        inputSchema: { type: "object", properties: { order: { type: "number" } }, required: ["order"] },
        handler: async (input) => {
          calls.push(input);
          return { order: (input as { order: number }).order, status: "shipped-TOOL-77" };
        },
      },
    ];
    world = await codexWorld({ runtime: { tools } });
    const { rt, sim } = world;
    const { threadId } = await rt.createThread({ providerTarget: "codex", cwd: world.workspace });
    sim.push({ tools: [{ name: "lookup_order", args: { order: 42 }, id: "call-order-42" }] }, (request) => ({
      text: (toolOutputIn(request.body, "call-order-42") ?? "").includes("shipped-TOOL-77")
        ? "order 42 has shipped"
        : "the tool's result never came",
    }));
    const run = await rt.waitForRun((await rt.sendMessage({ threadId, text: "where is order 42?" })).runId);
    expect(run.status).toBe("completed");

    // Offered to the model by name, with its schema.
    const offered = JSON.stringify(sim.requests.find((r) => r.dialect === "responses")!.body);
    expect(offered).toContain("lookup_order");
    expect(offered).toContain("Looks an order up by its number");
    // Called back once, with the model's input; answered by the runtime, never by a user.
    expect(calls).toEqual([{ order: 42 }]);
    const requests = [...rt.views.requests.values()];
    expect(requests.map((r) => [r.kind, r.payload, r.status, r.response])).toEqual([
      [
        "dynamic_tool",
        { kind: "dynamic_tool", toolName: "lookup_order", input: { order: 42 } },
        "resolved",
        { kind: "tool_result", output: '{"order":42,"status":"shipped-TOOL-77"}', success: true },
      ],
    ]);
    expect(run.items.at(-1)).toMatchObject({ kind: "assistant_message", text: "order 42 has shipped" });
    const fallbacks = run.fallbacks.map((f) => f.policy);
    expect(fallbacks).not.toContain("dynamic_tools_unsupported");
    expect(fallbacks).not.toContain("undeclared_request_declined");
  });
});
