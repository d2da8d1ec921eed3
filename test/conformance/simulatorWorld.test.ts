import { afterEach, describe, expect, it } from "vitest";
import { contextHeader, userPrompt } from "../../src/adapters/kit/index.js";
import type { ProviderAdapter } from "../../src/adapters/contract.js";
import { simulatorWorld, type SimulatorProvider, type WorldRun } from "../../src/conformance/index.js";

/**
 * The generic simulator world, spoken to as a provider would (plain HTTP, both dialects): replies keyed by the turn's
 * user text and moved on by tool results, and the evidence read back from the requests (the turn's text, the
 * conversation before it, its context and how it came, its model, the steers of a turn its requests name).
 */

let run: WorldRun | null = null;
afterEach(async () => {
  await run?.close();
  run = null;
});

async function open(turnKey?: (request: { headers: Record<string, string> }) => string | null) {
  let provider: SimulatorProvider | null = null;
  const world = simulatorWorld({
    name: "http",
    adapter: (given) => ((provider = given), {} as ProviderAdapter),
    tools: { command: ({ asks }) => ({ name: "Bash", args: { command: asks ? "node -v" : "echo hi" } }) },
    ...(turnKey ? { evidence: { turnKey: (r) => turnKey(r) } } : {}),
  });
  run = await world.open();
  run.adapter();
  const post = async (path: string, body: object, headers: Record<string, string> = {}) => {
    const response = await fetch(`${provider!.baseUrl}${path}`, {
      method: "POST",
      headers: { "content-type": "application/json", ...headers },
      body: JSON.stringify({ model: "m1", stream: false, ...body }),
    });
    return (await response.json()) as Record<string, unknown>;
  };
  return { world, run, provider: provider!, post };
}

describe("simulatorWorld", () => {
  it("scripts text, hold and what the tools spell; hands each adapter the simulator, a key and a HOME", async () => {
    const { world, provider } = await open();
    expect([...world.scripts]).toEqual(["text", "hold", "approval:command", "tool"]);
    expect(provider.baseUrl).toMatch(/^http:\/\/127\.0\.0\.1:\d+$/);
    expect(provider.env[provider.apiKeyEnv]).toBeTruthy();
    expect(provider.home).toContain("tiller-conformance-http-");
  });

  it("answers a turn by its user text, step by step (Messages), and reads its evidence", async () => {
    const { run, post } = await open();
    run.next({ kind: "text", text: "first reply" }, { userText: "text 1" });
    run.next({ kind: "approval", approval: "command", text: "done" }, { userText: "ask 2" });
    const first = [{ role: "user", content: "text 1" }];
    expect((await post("/v1/messages", { messages: first })).content).toEqual([{ type: "text", text: "first reply" }]);
    const context = { kind: "handoff" as const, text: "we spoke", delivery: "synthetic_user" as const };
    const asked = [
      ...first,
      { role: "assistant", content: "first reply" },
      { role: "user", content: userPrompt(context, "ask 2", "x") },
    ];
    const call = (await post("/v1/messages", { messages: asked })).content as Array<{ name?: string; input?: unknown }>;
    expect(call[0]).toMatchObject({ name: "Bash", input: { command: "node -v" } });
    const result = { role: "user", content: [{ type: "tool_result", tool_use_id: "t", content: "v20" }] };
    const end = await post("/v1/messages", {
      messages: [
        ...asked,
        { role: "assistant", content: [{ type: "tool_use", id: "t", name: "Bash", input: {} }] },
        result,
      ],
    });
    expect(end.content).toEqual([{ type: "text", text: "done" }]);
    expect(run.lastTurn()).toEqual({
      text: "ask 2",
      priorUserTexts: ["text 1"],
      steers: [],
      context: { text: `${contextHeader("handoff")}we spoke`, delivery: "synthetic_user" },
      model: "m1",
    });
  });

  it("reads developer and system context, and the steers of a turn its requests name (Responses)", async () => {
    const { run, post } = await open((r) => r.headers["x-turn"] ?? null);
    run.next({ kind: "text", text: "ok" }, { userText: "turn 1" });
    run.next({ kind: "text", text: "ok" }, { userText: "steer 2" });
    const message = (role: string, text: string) => ({
      type: "message",
      role,
      content: [{ type: "input_text", text }],
    });
    const told = message("developer", `${contextHeader("fork")}the fork's history`);
    const opening = [told, message("user", "turn 1")];
    await post("/v1/responses", { input: opening }, { "x-turn": "a" });
    await post("/v1/responses", { input: [...opening, message("user", "steer 2")] }, { "x-turn": "a" });
    expect(run.lastTurn()).toMatchObject({
      text: "turn 1",
      priorUserTexts: [],
      steers: ["steer 2"],
      context: { text: `${contextHeader("fork")}the fork's history`, delivery: "developer" },
    });
    const system = `You are a model.\n${contextHeader("rebuild")}all of it`;
    await post("/v1/messages", { system, messages: [{ role: "user", content: "turn 1" }] });
    expect(run.lastTurn()?.context).toEqual({ text: `${contextHeader("rebuild")}all of it`, delivery: "system" });
  });
});
