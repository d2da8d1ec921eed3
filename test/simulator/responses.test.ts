import { afterEach, beforeEach, describe, expect, it } from "vitest";
import { startModelSimulator, type ModelSimulator } from "../../src/simulator/index.js";
import { deltas, post, postSse, types, type ParsedEvent } from "./client.js";

let sim: ModelSimulator;
beforeEach(async () => {
  sim = await startModelSimulator();
});
afterEach(async () => {
  await sim.close();
});

const request = (extra: Record<string, unknown> = {}) => ({ model: "gpt-sim", stream: true, input: [], ...extra });
const completedOutput = (events: ParsedEvent[]) => {
  const last = events.at(-1);
  expect(last?.event).toBe("response.completed");
  return (last?.data.response as { output: Array<Record<string, unknown>> }).output;
};

describe("Responses dialect", () => {
  it("streams text as the documented event sequence", async () => {
    sim.push({ text: "Hello there from the loopback simulator" });
    const events = await postSse(`${sim.url}/v1/responses`, request());

    const sequence = types(events);
    const deltaCount = sequence.filter((t) => t === "response.output_text.delta").length;
    expect(deltaCount).toBeGreaterThan(1);
    expect(sequence).toEqual([
      "response.created",
      "response.output_item.added",
      "response.content_part.added",
      ...Array<string>(deltaCount).fill("response.output_text.delta"),
      "response.output_text.done",
      "response.content_part.done",
      "response.output_item.done",
      "response.completed",
    ]);
    events.forEach((e, i) => {
      expect(e.data.type).toBe(e.event);
      expect(e.data.sequence_number).toBe(i);
    });

    expect(deltas(events, "response.output_text.delta")).toBe("Hello there from the loopback simulator");
    expect(events[0]?.data.response).toMatchObject({
      object: "response",
      status: "in_progress",
      model: "gpt-sim",
      output: [],
    });
    const done = events.find((e) => e.event === "response.output_item.done")?.data.item;
    expect(done).toMatchObject({
      type: "message",
      role: "assistant",
      status: "completed",
      content: [{ type: "output_text", text: "Hello there from the loopback simulator", annotations: [] }],
    });
    const completed = events.at(-1)?.data.response;
    expect(completed).toMatchObject({
      status: "completed",
      usage: {
        input_tokens: 100,
        input_tokens_details: { cached_tokens: 0 },
        output_tokens: 10,
        output_tokens_details: { reasoning_tokens: 0 },
        total_tokens: 110,
      },
    });
    expect(completedOutput(events)).toEqual([done]);
  });

  it("emits reasoning as a summary item before the message", async () => {
    sim.push({ text: "Done.", reasoning: "Weighing the options carefully" });
    const events = await postSse(`${sim.url}/v1/responses`, request());

    expect(deltas(events, "response.reasoning_summary_text.delta")).toBe("Weighing the options carefully");
    const summaryDone = events.find((e) => e.event === "response.reasoning_summary_text.done");
    expect(summaryDone?.data).toMatchObject({
      output_index: 0,
      summary_index: 0,
      text: "Weighing the options carefully",
    });
    const output = completedOutput(events);
    expect(output.map((item) => item.type)).toEqual(["reasoning", "message"]);
    expect(output[0]).toMatchObject({ summary: [{ type: "summary_text", text: "Weighing the options carefully" }] });
    // The reasoning item is finished before the message item starts.
    const sequence = types(events);
    expect(sequence.indexOf("response.output_item.done")).toBeLessThan(sequence.indexOf("response.content_part.added"));
  });

  it("emits function calls and custom tool calls with streamed arguments", async () => {
    const args = { command: ["bash", "-lc", "ls -la"], workdir: "/tmp" };
    const patch = "*** Begin Patch\n*** Add File: a.txt\n+hello\n*** End Patch\n";
    sim.push({
      text: "Running it.",
      tools: [
        { name: "shell", args },
        { name: "apply_patch", custom: true, input: patch, id: "call_patch" },
      ],
    });
    const events = await postSse(`${sim.url}/v1/responses`, request());

    const output = completedOutput(events);
    expect(output.map((item) => item.type)).toEqual(["message", "function_call", "custom_tool_call"]);
    const [, fn, custom] = output;
    expect(fn).toMatchObject({ name: "shell", arguments: JSON.stringify(args) });
    expect(fn?.call_id).toMatch(/^call_\d+$/);
    expect(custom).toMatchObject({ name: "apply_patch", call_id: "call_patch", input: patch });

    expect(JSON.parse(deltas(events, "response.function_call_arguments.delta"))).toEqual(args);
    expect(events.filter((e) => e.event === "response.function_call_arguments.delta").length).toBeGreaterThan(1);
    expect(events.find((e) => e.event === "response.function_call_arguments.done")?.data).toMatchObject({
      item_id: fn?.id,
      output_index: 1,
      arguments: JSON.stringify(args),
    });
    expect(deltas(events, "response.custom_tool_call_input.delta")).toBe(patch);
    expect(events.find((e) => e.event === "response.custom_tool_call_input.done")?.data).toMatchObject({
      item_id: custom?.id,
      output_index: 2,
      input: patch,
    });
    const added = events
      .filter((e) => e.event === "response.output_item.added")
      .map((e) => e.data.item as Record<string, unknown>);
    expect(added[1]).toMatchObject({ type: "function_call", call_id: fn?.call_id, arguments: "" });
  });

  it("computes a reply from the incoming request", async () => {
    sim.push({ text: "first" }, (req) => {
      const body = req.body as { input: Array<{ content: string }> };
      return { text: `you said: ${body.input[0]?.content ?? "?"} (request #${req.id})` };
    });
    await postSse(`${sim.url}/v1/responses`, request());
    const events = await postSse(`${sim.url}/v1/responses`, request({ input: [{ role: "user", content: "ping" }] }));

    expect(deltas(events, "response.output_text.delta")).toBe("you said: ping (request #2)");
    expect(sim.pending()).toBe(0);
  });

  it("answers an HTTP error in the OpenAI error shape", async () => {
    sim.push({ status: 500, error: "boom" }, { status: 429 });
    const first = await post(`${sim.url}/v1/responses`, request());
    expect(first.status).toBe(500);
    expect(await first.json()).toEqual({ error: { message: "boom", type: "server_error", param: null, code: null } });

    const second = await post(`${sim.url}/v1/responses`, request());
    expect(second.status).toBe(429);
    expect(await second.json()).toMatchObject({
      error: { type: "rate_limit_exceeded", message: "simulated HTTP 429" },
    });
  });

  it("answers stream:false with the completed response as JSON", async () => {
    sim.push({ text: "plain", reasoning: "hmm" });
    const res = await post(`${sim.url}/v1/responses`, request({ stream: false }));
    expect(res.headers.get("content-type")).toBe("application/json");
    const body = (await res.json()) as { status: string; output: Array<{ type: string }> };
    expect(body.status).toBe("completed");
    expect(body.output.map((item) => item.type)).toEqual(["reasoning", "message"]);
  });
});
