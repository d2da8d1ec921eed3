import { gzipSync } from "node:zlib";
import { afterEach, describe, expect, it } from "vitest";
import { startModelSimulator, type ModelSimulator, type ModelSimulatorOptions } from "../../src/simulator/index.js";
import { deltas, parseSse, post, postSse, readRest, readUntil, types } from "./client.js";

let sim: ModelSimulator | undefined;
async function start(options: ModelSimulatorOptions = {}): Promise<ModelSimulator> {
  sim = await startModelSimulator(options);
  return sim;
}
afterEach(async () => {
  await sim?.close();
  sim = undefined;
});

const responsesBody = { model: "gpt-sim", stream: true, input: [] };
const messagesBody = { model: "claude-sim", stream: true, max_tokens: 64, messages: [] };
const responseText = async (s: ModelSimulator, body: unknown = responsesBody) =>
  deltas(await postSse(`${s.url}/v1/responses`, body), "response.output_text.delta");
const messageText = async (s: ModelSimulator) =>
  (await postSse(`${s.url}/v1/messages`, messagesBody))
    .filter((e) => e.event === "content_block_delta")
    .map((e) => (e.data.delta as { text: string }).text)
    .join("");

describe("model simulator server", () => {
  it("listens on 127.0.0.1 only", async () => {
    const s = await start();
    expect(s.url).toBe(`http://127.0.0.1:${s.port}`);
    expect(s.port).toBeGreaterThan(0);
  });

  it("serves one FIFO queue across requests and dialects, then the fallback", async () => {
    const s = await start();
    s.push({ text: "one" }, { text: "two" }, { text: "three" });
    expect(s.pending()).toBe(3);
    expect(await responseText(s)).toBe("one");
    expect(await messageText(s)).toBe("two");
    expect(await responseText(s)).toBe("three");
    expect(s.pending()).toBe(0);
    expect(await responseText(s)).toBe("(simulator: no scripted reply)");
    expect(s.requests.map((r) => [r.id, r.dialect])).toEqual([
      [1, "responses"],
      [2, "messages"],
      [3, "responses"],
      [4, "responses"],
    ]);
  });

  it("uses defaultReply once the queue is empty", async () => {
    const s = await start({ defaultReply: { text: "default" } });
    s.push({ text: "scripted" });
    expect(await responseText(s)).toBe("scripted");
    expect(await responseText(s)).toBe("default");
  });

  it("answers side requests without consuming the queue", async () => {
    const s = await start({
      sideReply: (req) => ((req.body as { metadata?: { side?: boolean } }).metadata?.side ? { text: "a title" } : null),
    });
    s.push({ text: "main" });
    expect(await responseText(s, { ...responsesBody, metadata: { side: true } })).toBe("a title");
    expect(s.pending()).toBe(1);
    expect(await responseText(s)).toBe("main");
    expect(s.requests).toHaveLength(2);
  });

  it("records method, url, lower-cased headers with credentials masked, and the parsed body", async () => {
    const s = await start();
    await postSse(`${s.url}/v1/responses?x=1`, responsesBody, {
      Authorization: "Bearer sk-live-secret",
      "OpenAI-Beta": "responses=experimental",
    });
    const [req] = await s.waitForRequests(1);
    expect(req).toMatchObject({
      id: 1,
      method: "POST",
      url: "/v1/responses?x=1",
      dialect: "responses",
      aborted: false,
      body: responsesBody,
    });
    expect(req?.headers.authorization).toBe("[redacted]");
    expect(req?.headers["openai-beta"]).toBe("responses=experimental");
    expect(req?.headers["content-type"]).toBe("application/json");
    expect(JSON.stringify(s.requests)).not.toContain("sk-live-secret");
  });

  it("decodes a gzip-compressed request body", async () => {
    const s = await start();
    await fetch(`${s.url}/v1/responses`, {
      method: "POST",
      headers: { "content-type": "application/json", "content-encoding": "gzip" },
      body: gzipSync(JSON.stringify(responsesBody)),
    }).then((r) => r.text());
    expect(s.requests[0]?.body).toEqual(responsesBody);
  });

  it("lists no models and 404s unknown routes without consuming the queue", async () => {
    const s = await start();
    s.push({ text: "kept" });
    const models = await fetch(`${s.url}/v1/models`);
    expect(models.status).toBe(200);
    expect(await models.json()).toMatchObject({ object: "list", data: [] });
    const missing = await post(`${s.url}/v1/chat/completions`, {});
    expect(missing.status).toBe(404);
    expect(await missing.json()).toMatchObject({ error: { type: "not_found_error" } });
    expect(s.pending()).toBe(1);
    expect(s.requests.map((r) => [r.method, r.url, r.dialect])).toEqual([
      ["GET", "/v1/models", "unknown"],
      ["POST", "/v1/chat/completions", "unknown"],
    ]);
  });

  it("resolves waitForRequests when the count is reached", async () => {
    const s = await start();
    const waiting = s.waitForRequests(2);
    await responseText(s);
    await responseText(s);
    expect((await waiting).map((r) => r.id)).toEqual([1, 2]);
  });

  it("marks a hanging request aborted when the client aborts", async () => {
    const s = await start();
    s.push({ hang: true, text: "thinking" });
    const controller = new AbortController();
    const res = await post(`${s.url}/v1/responses`, responsesBody, { signal: controller.signal });
    const { reader, text } = await readUntil(res, "response.output_text.delta");
    expect(types(parseSse(text))).toEqual([
      "response.created",
      "response.output_item.added",
      "response.content_part.added",
      "response.output_text.delta",
    ]);
    expect(deltas(parseSse(text), "response.output_text.delta")).toBe("thinking");

    controller.abort();
    await reader.read().catch(() => undefined);
    await s.waitForAbort(1);
    expect(s.requests[0]?.aborted).toBe(true);
  });

  it("completes a hanging stream normally on releaseHang", async () => {
    const s = await start();
    s.push({ hang: true });
    const res = await post(`${s.url}/v1/responses`, responsesBody);
    const { reader, text } = await readUntil(res, "response.output_text.delta");
    s.releaseHang();
    const events = parseSse(text + (await readRest(reader)));
    expect(types(events).slice(-4)).toEqual([
      "response.output_text.done",
      "response.content_part.done",
      "response.output_item.done",
      "response.completed",
    ]);
    expect(events.map((e) => e.data.sequence_number)).toEqual(events.map((_, i) => i));
    expect(deltas(events, "response.output_text.delta")).toBe("…");
    await expect(s.waitForAbort(1)).rejects.toThrow(/without being aborted/);
    expect(s.requests[0]?.aborted).toBe(false);
  });

  it("completes hanging streams on close", async () => {
    const s = await start();
    s.push({ hang: true });
    const res = await post(`${s.url}/v1/responses`, responsesBody);
    const { reader, text } = await readUntil(res, "response.output_text.delta");
    await s.close();
    const events = parseSse(text + (await readRest(reader)));
    expect(types(events).at(-1)).toBe("response.completed");
    await expect(s.waitForRequests(5)).rejects.toThrow(/closed/);
  });

  it("turns a throwing reply function or a malformed spec into an HTTP 500", async () => {
    const s = await start();
    s.push(
      () => {
        throw new Error("script bug");
      },
      { nonsense: true } as never,
    );
    const thrown = await post(`${s.url}/v1/responses`, responsesBody);
    expect(thrown.status).toBe(500);
    expect(await thrown.json()).toMatchObject({ error: { message: expect.stringContaining("script bug") } });
    const malformed = await post(`${s.url}/v1/messages`, messagesBody);
    expect(malformed.status).toBe(500);
    expect(await malformed.json()).toMatchObject({
      type: "error",
      error: { message: expect.stringContaining("invalid reply spec") },
    });
  });

  it("writes log lines when asked", async () => {
    const lines: string[] = [];
    const s = await start({ log: (line) => lines.push(line) });
    s.push({ tools: [{ name: "shell", args: {} }] });
    await responseText(s);
    expect(lines.some((l) => l.includes("#1 POST /v1/responses → tools shell (queue)"))).toBe(true);
  });
});
