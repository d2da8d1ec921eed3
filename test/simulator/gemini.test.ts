import { afterEach, beforeEach, describe, expect, it } from "vitest";
import { startModelSimulator, type ModelSimulator } from "../../src/simulator/index.js";
import { post, readRest, readUntil } from "./client.js";

let sim: ModelSimulator;
beforeEach(async () => {
  sim = await startModelSimulator();
});
afterEach(async () => {
  await sim.close();
});

type Part = { text?: string; thought?: boolean; functionCall?: { name: string; args: unknown; id?: string } };
interface Chunk {
  candidates: Array<{ content: { role: string; parts: Part[] }; finishReason?: string; index: number }>;
  usageMetadata?: Record<string, number>;
  modelVersion?: string;
}

const streamUrl = () => `${sim.url}/v1beta/models/gemini-sim:streamGenerateContent?alt=sse`;
const jsonUrl = (model = "gemini-sim") => `${sim.url}/v1beta/models/${model}:generateContent`;
const request = (extra: Record<string, unknown> = {}) => ({
  contents: [{ role: "user", parts: [{ text: "hi" }] }],
  generationConfig: { temperature: 1, thinkingConfig: { includeThoughts: true } },
  ...extra,
});

/** The Gemini SDK reads only events that start with `data:`, each one whole GenerateContentResponse. */
function parseChunks(raw: string): Chunk[] {
  return raw
    .split("\n\n")
    .filter((block) => block.trim() !== "")
    .map((block) => {
      expect(block).toMatch(/^data: /);
      expect(block).not.toContain("\n");
      return JSON.parse(block.slice("data: ".length)) as Chunk;
    });
}

async function stream(body: unknown = request()): Promise<Chunk[]> {
  const res = await post(streamUrl(), body);
  expect(res.status).toBe(200);
  expect(res.headers.get("content-type")).toBe("text/event-stream");
  return parseChunks(await res.text());
}

const parts = (chunks: Chunk[]): Part[] => chunks.flatMap((c) => c.candidates[0]?.content.parts ?? []);
const text = (list: Part[], thought = false) =>
  list
    .filter((p) => typeof p.text === "string" && (p.thought === true) === thought)
    .map((p) => p.text)
    .join("");

describe("Gemini dialect", () => {
  it("streams text as GenerateContentResponse chunks, the finish reason and usage last", async () => {
    sim.push({ text: "Hello from the loopback simulator" });
    const chunks = await stream();

    const textChunks = chunks.filter((c) => c.candidates[0]?.content.parts.some((p) => p.text));
    expect(textChunks.length).toBeGreaterThan(1);
    for (const c of chunks) {
      expect(c.candidates).toHaveLength(1);
      expect(c.candidates[0]?.content.role).toBe("model");
      expect(c.modelVersion).toBe("gemini-sim");
    }
    expect(text(parts(chunks))).toBe("Hello from the loopback simulator");
    expect(chunks.slice(0, -1).every((c) => c.candidates[0]?.finishReason === undefined)).toBe(true);
    const last = chunks.at(-1);
    expect(last?.candidates[0]?.finishReason).toBe("STOP");
    expect(last?.usageMetadata).toMatchObject({
      promptTokenCount: expect.any(Number),
      candidatesTokenCount: expect.any(Number),
      totalTokenCount: expect.any(Number),
    });
    expect(sim.requests[0]).toMatchObject({
      dialect: "gemini",
      url: "/v1beta/models/gemini-sim:streamGenerateContent?alt=sse",
    });
  });

  it("streams reasoning as thought parts before the answer", async () => {
    sim.push({ text: "Answer.", reasoning: "**Planning**\n\nLet me think this through" });
    const all = parts(await stream());

    const firstAnswer = all.findIndex((p) => p.text !== undefined && p.thought !== true);
    const thoughts = all.filter((p) => p.thought === true);
    expect(thoughts.length).toBeGreaterThan(0);
    expect(all.findIndex((p) => p.thought === true)).toBeLessThan(firstAnswer);
    expect(text(all, true)).toBe("**Planning**\n\nLet me think this through");
    expect(text(all)).toBe("Answer.");
  });

  it("streams function calls whole, with their args as objects", async () => {
    const shell = { command: "ls -la /tmp", description: "List files" };
    sim.push({
      text: "Checking.",
      tools: [
        { name: "run_shell_command", args: shell },
        { name: "read_file", args: { file_path: "notes.txt" }, id: "call_fixed" },
      ],
    });
    const chunks = await stream();
    const all = parts(chunks);

    expect(text(all)).toBe("Checking.");
    const calls = all.filter((p) => p.functionCall).map((p) => p.functionCall);
    expect(calls).toEqual([
      { name: "run_shell_command", args: shell },
      { name: "read_file", args: { file_path: "notes.txt" }, id: "call_fixed" },
    ]);
    const textAt = all.findIndex((p) => p.text);
    expect(textAt).toBeLessThan(all.findIndex((p) => p.functionCall));
    expect(chunks.at(-1)?.candidates[0]?.finishReason).toBe("STOP");
  });

  it("sends a free-form tool call as a function call with an input argument", async () => {
    sim.push({ tools: [{ name: "apply_patch", custom: true, input: "*** Begin Patch" }] });
    const calls = parts(await stream()).filter((p) => p.functionCall);
    expect(calls.map((p) => p.functionCall)).toEqual([{ name: "apply_patch", args: { input: "*** Begin Patch" } }]);
  });

  it("answers generateContent with one JSON response holding every part", async () => {
    sim.push({ text: "Plain answer.", reasoning: "brief" }, { tools: [{ name: "glob", args: { pattern: "*.ts" } }] });
    const res = await post(jsonUrl("gemini-flash-sim"), request());
    expect(res.headers.get("content-type")).toBe("application/json");
    const body = (await res.json()) as Chunk;
    expect(body).toMatchObject({
      modelVersion: "gemini-flash-sim",
      candidates: [{ content: { role: "model" }, finishReason: "STOP" }],
      usageMetadata: { totalTokenCount: expect.any(Number) },
    });
    expect(body.candidates[0]?.content.parts).toEqual([{ text: "brief", thought: true }, { text: "Plain answer." }]);

    const second = (await (await post(jsonUrl(), request())).json()) as Chunk;
    expect(second.candidates[0]?.content.parts).toMatchObject([
      { functionCall: { name: "glob", args: { pattern: "*.ts" } } },
    ]);
  });

  it("answers HTTP errors in Google's error shape", async () => {
    sim.push({ status: 429, error: "Quota exceeded" }, { status: 400 }, { status: 503 });
    const quota = await post(streamUrl(), request());
    expect(quota.status).toBe(429);
    expect(await quota.json()).toEqual({
      error: { code: 429, message: "Quota exceeded", status: "RESOURCE_EXHAUSTED" },
    });

    const invalid = await post(jsonUrl(), request());
    expect(invalid.status).toBe(400);
    expect(await invalid.json()).toEqual({
      error: { code: 400, message: "simulated HTTP 400", status: "INVALID_ARGUMENT" },
    });

    const unavailable = await post(streamUrl(), request());
    expect(await unavailable.json()).toMatchObject({ error: { code: 503, status: "UNAVAILABLE" } });
  });

  it("holds a hanging stream after its first text until the client aborts", async () => {
    sim.push({ hang: true, text: "Working" });
    const controller = new AbortController();
    const res = await post(streamUrl(), request(), { signal: controller.signal });
    const { reader, text: soFar } = await readUntil(res, "Working");
    expect(soFar).not.toContain("finishReason");
    expect(text(parts(parseChunks(soFar)))).toBe("Working");

    controller.abort();
    await reader.read().catch(() => undefined);
    await sim.waitForAbort(1);
    expect(sim.requests[0]?.aborted).toBe(true);
  });

  it("finishes a hanging stream with STOP on releaseHang", async () => {
    sim.push({ hang: true, text: "Working" });
    const res = await post(streamUrl(), request());
    const { reader, text: soFar } = await readUntil(res, "Working");
    sim.releaseHang();
    const chunks = parseChunks(soFar + (await readRest(reader)));
    expect(chunks.at(-1)?.candidates[0]?.finishReason).toBe("STOP");
    expect(text(parts(chunks))).toBe("Working");
    expect(sim.requests[0]?.aborted).toBe(false);
  });

  describe("structured side requests (responseJsonSchema) answered without the queue", () => {
    // The Gemini CLI's router: a complexity score from 1 to 100; at or above its threshold (90 by default)
    // it keeps the main (pro) model.
    const numericalRouter = {
      type: "OBJECT",
      properties: {
        complexity_reasoning: { type: "STRING" },
        complexity_score: { type: "INTEGER", description: "Complexity score from 1-100." },
      },
      required: ["complexity_reasoning", "complexity_score"],
    };
    const choiceRouter = {
      type: "OBJECT",
      properties: { reasoning: { type: "STRING" }, model_choice: { type: "STRING", enum: ["flash", "pro"] } },
      required: ["reasoning", "model_choice"],
    };
    const nextSpeaker = {
      type: "object",
      properties: { reasoning: { type: "string" }, next_speaker: { type: "string", enum: ["user", "model"] } },
      required: ["reasoning", "next_speaker"],
    };
    const structured = (schema: unknown) =>
      request({ generationConfig: { responseMimeType: "application/json", responseJsonSchema: schema } });
    const answer = async (schema: unknown): Promise<Record<string, unknown>> => {
      const res = await post(jsonUrl("gemini-flash-lite-sim"), structured(schema));
      expect(res.status).toBe(200);
      const body = (await res.json()) as Chunk;
      return JSON.parse(text(body.candidates[0]?.content.parts ?? [])) as Record<string, unknown>;
    };

    it("routes to the main model and leaves the scripted reply for the main request", async () => {
      sim.push({ text: "main reply" });

      const score = await answer(numericalRouter);
      expect(typeof score.complexity_reasoning).toBe("string");
      expect(score.complexity_score).toBeGreaterThanOrEqual(90);
      expect(score.complexity_score).toBeLessThanOrEqual(100);
      expect(await answer(choiceRouter)).toMatchObject({ reasoning: expect.any(String), model_choice: "pro" });
      expect(sim.pending()).toBe(1);

      expect(text(parts(await stream()))).toBe("main reply");
      expect(sim.pending()).toBe(0);
      expect(sim.requests.map((r) => r.dialect)).toEqual(["gemini", "gemini", "gemini"]);
    });

    it("hands the turn back to the user when asked who speaks next", async () => {
      expect(await answer(nextSpeaker)).toMatchObject({ reasoning: expect.any(String), next_speaker: "user" });
    });
  });

  it("records the API key header masked", async () => {
    sim.push({ text: "ok" });
    await post(streamUrl(), request(), { headers: { "x-goog-api-key": "AIza-secret-key" } }).then((r) => r.text());
    expect(sim.requests[0]?.headers["x-goog-api-key"]).toBe("[redacted]");
    expect(JSON.stringify(sim.requests)).not.toContain("AIza-secret-key");
  });

  it("leaves other model methods unrouted", async () => {
    sim.push({ text: "kept" });
    const res = await post(`${sim.url}/v1beta/models/gemini-sim:countTokens`, request());
    expect(res.status).toBe(404);
    expect(sim.pending()).toBe(1);
    expect(sim.requests[0]?.dialect).toBe("unknown");
  });
});
