/**
 * Google Gemini API (POST /v1beta/models/<model>:generateContent and :streamGenerateContent),
 * the dialect Gemini CLI speaks. A stream is SSE of bare `data:` lines (the SDK only reads an
 * event that starts with `data:`), each a whole GenerateContentResponse; a function call arrives
 * whole, never as argument deltas.
 */
import { joined, type Dialect, type RenderContext, type SseEvent, type Turn, type TurnBlock } from "./dialect.js";

// Opaque to clients like the real one: Gemini 3 puts it on the first function call, the CLI echoes it back.
const SIGNATURE = "c2ltdWxhdG9yLXNpZ25hdHVyZQ==";

const USAGE = { promptTokenCount: 100, candidatesTokenCount: 10, totalTokenCount: 110 };

const PATH = /^\/v1(?:alpha|beta)?\/models\/([^/:]+):(generateContent|streamGenerateContent)$/;

type Part = Record<string, unknown>;

/**
 * A block's parts: text one per delta when streamed, else whole. A thought summary is one part,
 * as the API sends it: the CLI reads each thought part as a whole `**Subject**` summary and trims
 * it, so word-sized pieces would lose their spaces. A function call is always whole.
 */
function partsOf(block: TurnBlock, streamed: boolean): Part[] {
  switch (block.kind) {
    case "text":
      return (streamed ? block.chunks : [joined(block.chunks)]).map((text) => ({ text }));
    case "reasoning":
      return [{ text: joined(block.chunks), thought: true }];
    case "function":
    case "custom": {
      // Gemini has no free-form tools: a custom call travels as a function call whose args are {input}.
      const args = block.kind === "custom" ? { input: block.input } : (block.args ?? {});
      return [{ functionCall: { name: block.name, args, ...(block.callId ? { id: block.callId } : {}) } }];
    }
  }
}

/** Every part of the turn, the first function call carrying the thought signature. */
function turnParts(turn: Turn, streamed: boolean): Part[] {
  const parts = turn.blocks.flatMap((block) => partsOf(block, streamed));
  const first = parts.findIndex((p) => "functionCall" in p);
  return parts.map((p, i) => (i === first ? { ...p, thoughtSignature: SIGNATURE } : p));
}

/** One GenerateContentResponse; the last of a stream carries the finish reason and the usage. */
function response(ctx: RenderContext, id: string, parts: Part[], finished: boolean): Record<string, unknown> {
  const candidate = { content: { role: "model", parts }, index: 0, ...(finished ? { finishReason: "STOP" } : {}) };
  return {
    candidates: [candidate],
    ...(finished ? { usageMetadata: USAGE } : {}),
    modelVersion: ctx.model,
    responseId: id,
  };
}

/**
 * Gemini CLI asks the model things on its own with a response schema: its router once per prompt
 * (a `complexity_score` in 0.61.0, a `model_choice` in the older classifier), and, when enabled,
 * a next-speaker check and loop detection. Each gets a value its schema accepts: the fields below
 * the answer that keeps the CLI on its main model and ends the turn normally, any other field the
 * plainest value of its type.
 */
const STRUCTURED_ANSWERS: Record<string, unknown> = {
  complexity_score: 100,
  model_choice: "pro",
  next_speaker: "user",
  unproductive_state_confidence: 0,
};

function valueFor(schema: unknown, field?: string): unknown {
  if (field !== undefined && field in STRUCTURED_ANSWERS) return STRUCTURED_ANSWERS[field];
  const s = (schema ?? {}) as { type?: unknown; enum?: unknown[]; properties?: Record<string, unknown> };
  if (Array.isArray(s.enum) && s.enum.length > 0) return s.enum[0];
  // The CLI writes types both ways: JSON Schema's "object" and the SDK's Type.OBJECT.
  switch (String(s.type).toLowerCase()) {
    case "object":
      return Object.fromEntries(Object.entries(s.properties ?? {}).map(([k, v]) => [k, valueFor(v, k)]));
    case "array":
      return [];
    case "string":
      return "";
    case "number":
    case "integer":
      return 0;
    case "boolean":
      return false;
    default:
      return null;
  }
}

export const geminiDialect: Dialect = {
  name: "gemini",

  matches: (method, pathname) => method === "POST" && PATH.test(pathname),

  model: (pathname) => PATH.exec(pathname)?.[1],

  // The method in the path decides; the CLI always adds alt=sse, the only stream form served.
  streams: (_body, pathname) => pathname.endsWith(":streamGenerateContent"),

  probe: (body) => {
    const config = (body as { generationConfig?: { responseJsonSchema?: unknown; responseSchema?: unknown } } | null)
      ?.generationConfig;
    const schema = config?.responseJsonSchema ?? config?.responseSchema;
    return schema === undefined ? null : { text: JSON.stringify(valueFor(schema)) };
  },

  stream(turn: Turn, ctx: RenderContext): SseEvent[] {
    const id = ctx.nextId("resp");
    const events: SseEvent[] = turnParts(turn, true).map((part) => ({
      data: response(ctx, id, [part], false),
      ...(typeof part.text === "string" && part.thought !== true ? { textDelta: true } : {}),
    }));
    // A last chunk with no parts closes the stream, so a hanging reply holds it back.
    events.push({ data: response(ctx, id, [], true) });
    return events;
  },

  json(turn: Turn, ctx: RenderContext): unknown {
    return response(ctx, ctx.nextId("resp"), turnParts(turn, false), true);
  },

  error(status: number, message: string): unknown {
    return { error: { code: status, message, status: rpcStatus(status) } };
  },
};

/** The google.rpc.Code name the API pairs with an HTTP status. */
function rpcStatus(status: number): string {
  switch (status) {
    case 401:
      return "UNAUTHENTICATED";
    case 403:
      return "PERMISSION_DENIED";
    case 404:
      return "NOT_FOUND";
    case 409:
      return "ABORTED";
    case 429:
      return "RESOURCE_EXHAUSTED";
    case 499:
      return "CANCELLED";
    case 501:
      return "UNIMPLEMENTED";
    case 503:
      return "UNAVAILABLE";
    case 504:
      return "DEADLINE_EXCEEDED";
    default:
      return status >= 500 ? "INTERNAL" : "INVALID_ARGUMENT";
  }
}
