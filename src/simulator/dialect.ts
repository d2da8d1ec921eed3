/**
 * What a wire dialect has to provide. The server turns every ReplySpec into a Turn (a
 * dialect-neutral list of output blocks) and asks the dialect to render it, so adding a
 * dialect (Chat Completions, say) means one new file and one line in the server's list.
 */
import type { DialectName, ReplySpec } from "./types.js";

export type TurnBlock =
  | { kind: "reasoning"; chunks: string[] }
  | { kind: "text"; chunks: string[] }
  /** `args` is the parsed value (for Messages' `input`), `argChunks` the JSON text in pieces. */
  | { kind: "function"; name: string; callId: string | undefined; args: unknown; argChunks: string[] }
  | { kind: "custom"; name: string; callId: string | undefined; input: string; inputChunks: string[] };

export interface Turn {
  blocks: TurnBlock[];
}

export interface RenderContext {
  /** The model named in the request, echoed back like the real APIs do. */
  model: string;
  /** Ids unique for the simulator's lifetime, e.g. nextId("call") → "call_7". */
  nextId(prefix: string): string;
}

export interface SseEvent {
  /** Left out by dialects whose streams carry bare `data:` lines (Gemini). */
  event?: string;
  data: Record<string, unknown>;
  /** Marks an assistant text delta: a hanging reply stops after the first of these. */
  textDelta?: boolean;
}

export interface Dialect {
  readonly name: DialectName;
  matches(method: string, pathname: string): boolean;
  /** The model when the path names it (Gemini); otherwise the body's `model` is echoed. */
  model?(pathname: string): string | undefined;
  /** Whether the request asked for SSE rather than one JSON document. */
  streams(body: unknown, pathname: string): boolean;
  /** The whole event sequence of a finished turn, in order. */
  stream(turn: Turn, ctx: RenderContext): SseEvent[];
  /** The same turn as a non-streaming JSON response. */
  json(turn: Turn, ctx: RenderContext): unknown;
  /** The body of an HTTP error response. */
  error(status: number, message: string): unknown;
  /** A request the client makes on its own (a model probe): answered without touching the queue. */
  probe?(body: unknown): ReplySpec | null;
}

export function encodeSse(event: SseEvent): string {
  const name = event.event === undefined ? "" : `event: ${event.event}\n`;
  return `${name}data: ${JSON.stringify(event.data)}\n\n`;
}

export function joined(chunks: string[]): string {
  return chunks.join("");
}

/**
 * Splits text into a few deltas so clients exercise their accumulation path. Splits on word
 * boundaries when there are words, else on code points, so no surrogate pair is ever cut.
 */
export function chunkText(text: string, pieces = 3): string[] {
  const words = text.match(/\s*\S+\s*/g);
  const units = words && words.length > 1 && words.join("") === text ? words : Array.from(text);
  if (units.length <= 1) return [text];
  const size = Math.ceil(units.length / pieces);
  const chunks: string[] = [];
  for (let i = 0; i < units.length; i += size) chunks.push(units.slice(i, i + size).join(""));
  return chunks;
}

/** JSON can be cut anywhere for partial-JSON deltas; code points keep each piece valid UTF-8. */
export function chunkJson(json: string, pieces = 3): string[] {
  const points = Array.from(json);
  if (points.length <= pieces) return [json];
  const size = Math.ceil(points.length / pieces);
  const chunks: string[] = [];
  for (let i = 0; i < points.length; i += size) chunks.push(points.slice(i, i + size).join(""));
  return chunks;
}

export function modelOf(body: unknown, fallback: string): string {
  if (body && typeof body === "object" && "model" in body && typeof body.model === "string") return body.model;
  return fallback;
}

export function streamFlag(body: unknown): boolean | undefined {
  if (body && typeof body === "object" && "stream" in body && typeof body.stream === "boolean") return body.stream;
  return undefined;
}
