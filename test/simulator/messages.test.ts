import { afterEach, beforeEach, describe, expect, it } from "vitest";
import { startModelSimulator, type ModelSimulator } from "../../src/simulator/index.js";
import { post, postSse, readRest, readUntil, parseSse, types, type ParsedEvent } from "./client.js";

let sim: ModelSimulator;
beforeEach(async () => {
  sim = await startModelSimulator();
});
afterEach(async () => {
  await sim.close();
});

const request = (extra: Record<string, unknown> = {}) => ({
  model: "claude-sim",
  max_tokens: 1024,
  stream: true,
  messages: [{ role: "user", content: "hi" }],
  ...extra,
});

type Delta = Record<string, unknown> & { type: string };
const blockDeltas = (events: ParsedEvent[], index: number): Delta[] =>
  events.filter((e) => e.event === "content_block_delta" && e.data.index === index).map((e) => e.data.delta as Delta);
const joinField = (list: Delta[], field: string) => list.map((d) => d[field] as string).join("");
const stopReason = (events: ParsedEvent[]) =>
  (events.find((e) => e.event === "message_delta")?.data.delta as { stop_reason: string }).stop_reason;

describe("Messages dialect", () => {
  it("streams text as the documented event sequence", async () => {
    sim.push({ text: "Hello from the loopback simulator" });
    const events = await postSse(`${sim.url}/v1/messages?beta=true`, request());

    const textDeltas = blockDeltas(events, 0);
    expect(textDeltas.length).toBeGreaterThan(1);
    expect(types(events)).toEqual([
      "message_start",
      "ping",
      "content_block_start",
      ...Array<string>(textDeltas.length).fill("content_block_delta"),
      "content_block_stop",
      "message_delta",
      "message_stop",
    ]);
    for (const e of events) expect(e.data.type).toBe(e.event);
    expect(events[0]?.data.message).toMatchObject({
      type: "message",
      role: "assistant",
      model: "claude-sim",
      content: [],
      stop_reason: null,
      usage: { input_tokens: 100, output_tokens: 0 },
    });
    expect(events[2]?.data).toMatchObject({ index: 0, content_block: { type: "text", text: "" } });
    expect(textDeltas.every((d) => d.type === "text_delta")).toBe(true);
    expect(joinField(textDeltas, "text")).toBe("Hello from the loopback simulator");
    expect(stopReason(events)).toBe("end_turn");
    expect(events.find((e) => e.event === "message_delta")?.data.usage).toEqual({ output_tokens: 10 });
    expect(sim.requests[0]).toMatchObject({ dialect: "messages", url: "/v1/messages?beta=true" });
  });

  it("streams reasoning as a signed thinking block before the text", async () => {
    sim.push({ text: "Answer.", reasoning: "Let me think this through" });
    const events = await postSse(`${sim.url}/v1/messages`, request());

    const starts = events.filter((e) => e.event === "content_block_start").map((e) => e.data.content_block as Delta);
    expect(starts.map((b) => b.type)).toEqual(["thinking", "text"]);
    const thinking = blockDeltas(events, 0);
    expect(
      joinField(
        thinking.filter((d) => d.type === "thinking_delta"),
        "thinking",
      ),
    ).toBe("Let me think this through");
    expect(thinking.at(-1)).toMatchObject({ type: "signature_delta", signature: expect.any(String) });
    expect(joinField(blockDeltas(events, 1), "text")).toBe("Answer.");
  });

  it("streams tool_use blocks whose input_json_delta chunks reassemble to the args", async () => {
    const bash = { command: "ls -la /tmp", description: "List files" };
    const read = { file_path: "/tmp/notes.txt" };
    sim.push({
      text: "Checking.",
      tools: [
        { name: "Bash", args: bash },
        { name: "Read", args: read, id: "toolu_fixed" },
      ],
    });
    const events = await postSse(`${sim.url}/v1/messages`, request());

    const starts = events.filter((e) => e.event === "content_block_start").map((e) => e.data.content_block as Delta);
    expect(starts.map((b) => b.type)).toEqual(["text", "tool_use", "tool_use"]);
    expect(starts[1]).toMatchObject({ name: "Bash", input: {} });
    expect(starts[1]?.id).toMatch(/^toolu_\d+$/);
    expect(starts[2]).toMatchObject({ name: "Read", id: "toolu_fixed", input: {} });

    const bashDeltas = blockDeltas(events, 1);
    expect(bashDeltas.length).toBeGreaterThan(1);
    expect(bashDeltas.every((d) => d.type === "input_json_delta")).toBe(true);
    expect(JSON.parse(joinField(bashDeltas, "partial_json"))).toEqual(bash);
    expect(JSON.parse(joinField(blockDeltas(events, 2), "partial_json"))).toEqual(read);
    expect(stopReason(events)).toBe("tool_use");
  });

  it("answers a non-streaming request with one JSON message", async () => {
    sim.push({ text: "Plain answer.", reasoning: "brief" }, { tools: [{ name: "Bash", args: { command: "pwd" } }] });
    const res = await post(`${sim.url}/v1/messages`, request({ stream: false }));
    expect(res.headers.get("content-type")).toBe("application/json");
    expect(await res.json()).toMatchObject({
      type: "message",
      role: "assistant",
      model: "claude-sim",
      stop_reason: "end_turn",
      content: [
        { type: "thinking", thinking: "brief" },
        { type: "text", text: "Plain answer." },
      ],
      usage: { input_tokens: 100, output_tokens: 10 },
    });

    // Like the real API, leaving `stream` out also means a JSON answer.
    const { stream: _omitted, ...withoutStream } = request();
    const second = await post(`${sim.url}/v1/messages`, withoutStream);
    expect(await second.json()).toMatchObject({
      stop_reason: "tool_use",
      content: [{ type: "tool_use", name: "Bash", input: { command: "pwd" } }],
    });
  });

  it("answers HTTP errors in the Anthropic error shape", async () => {
    sim.push({ status: 529, error: "Overloaded" }, { status: 400 });
    const overloaded = await post(`${sim.url}/v1/messages`, request());
    expect(overloaded.status).toBe(529);
    expect(await overloaded.json()).toEqual({
      type: "error",
      error: { type: "overloaded_error", message: "Overloaded" },
    });

    const invalid = await post(`${sim.url}/v1/messages`, request());
    expect(invalid.status).toBe(400);
    expect(await invalid.json()).toEqual({
      type: "error",
      error: { type: "invalid_request_error", message: "simulated HTTP 400" },
    });
  });

  it("holds a hanging message stream after its first text delta until released", async () => {
    sim.push({ hang: true, text: "Working" });
    const res = await post(`${sim.url}/v1/messages`, request());
    const { reader, text } = await readUntil(res, "text_delta");
    expect(text).not.toContain("message_stop");

    sim.releaseHang();
    const events = parseSse(text + (await readRest(reader)));
    expect(types(events).at(-1)).toBe("message_stop");
    expect(joinField(blockDeltas(events, 0), "text")).toBe("Working");
    expect(sim.requests[0]?.aborted).toBe(false);
  });

  it("records x-api-key masked", async () => {
    await postSse(`${sim.url}/v1/messages`, request(), {
      "X-Api-Key": "sk-ant-secret",
      "anthropic-version": "2023-06-01",
    });
    const headers = sim.requests[0]?.headers ?? {};
    expect(headers["x-api-key"]).toBe("[redacted]");
    expect(headers["anthropic-version"]).toBe("2023-06-01");
    expect(JSON.stringify(sim.requests)).not.toContain("sk-ant-secret");
  });
});
