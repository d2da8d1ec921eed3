/**
 * Turns a ReplySpec into either an HTTP error or a dialect-neutral Turn. Specs may come
 * from untyped callers (JS, a reply function), so the shape is checked here rather than
 * trusted, and a bad spec becomes a visible 500 instead of a stream the client misreads.
 */
import { chunkJson, chunkText, type Turn, type TurnBlock } from "./dialect.js";
import type { ReplySpec } from "./types.js";

export type Plan =
  { kind: "error"; status: number; message: string } | { kind: "turn"; turn: Turn; hang: boolean; summary: string };

export const NO_SCRIPTED_REPLY: ReplySpec = { text: "(simulator: no scripted reply)" };

const isObject = (v: unknown): v is Record<string, unknown> => typeof v === "object" && v !== null;

export function plan(spec: unknown): Plan {
  if (!isObject(spec)) return invalid(spec);
  if (typeof spec.status === "number") {
    const message = typeof spec.error === "string" ? spec.error : `simulated HTTP ${spec.status}`;
    return { kind: "error", status: spec.status, message };
  }
  if (spec.hang === true) {
    // One chunk, so the whole hang text is the first (and only) delta the client sees.
    const text = typeof spec.text === "string" ? spec.text : "…";
    return { kind: "turn", hang: true, turn: { blocks: [{ kind: "text", chunks: [text] }] }, summary: "hang" };
  }
  if (Array.isArray(spec.tools)) {
    const blocks: TurnBlock[] = [];
    if (typeof spec.text === "string" && spec.text !== "") blocks.push({ kind: "text", chunks: chunkText(spec.text) });
    for (const tool of spec.tools as unknown[]) {
      const block = toolBlock(tool);
      if (!block) return invalid(tool);
      blocks.push(block);
    }
    const names = blocks.flatMap((b) => (b.kind === "function" || b.kind === "custom" ? [b.name] : []));
    return { kind: "turn", hang: false, turn: { blocks }, summary: `tools ${names.join(", ")}` };
  }
  if (typeof spec.text === "string") {
    const blocks: TurnBlock[] = [];
    if (typeof spec.reasoning === "string") blocks.push({ kind: "reasoning", chunks: chunkText(spec.reasoning) });
    blocks.push({ kind: "text", chunks: chunkText(spec.text) });
    return { kind: "turn", hang: false, turn: { blocks }, summary: "text" };
  }
  return invalid(spec);
}

function toolBlock(tool: unknown): TurnBlock | null {
  if (!isObject(tool)) return null;
  const { name, id, custom, input, args } = tool;
  if (typeof name !== "string") return null;
  const callId = typeof id === "string" ? id : undefined;
  if (custom === true) {
    if (typeof input !== "string") return null;
    return { kind: "custom", name, callId, input, inputChunks: chunkText(input) };
  }
  // A string is taken as the arguments text verbatim, so tests can send malformed JSON.
  if (typeof args === "string")
    return { kind: "function", name, callId, args: parseOr(args, {}), argChunks: chunkJson(args) };
  const value = args ?? {};
  return { kind: "function", name, callId, args: value, argChunks: chunkJson(JSON.stringify(value)) };
}

function parseOr(text: string, fallback: unknown): unknown {
  try {
    return JSON.parse(text);
  } catch {
    return fallback;
  }
}

function invalid(spec: unknown): Plan {
  let shown: string;
  try {
    shown = JSON.stringify(spec) ?? String(spec);
  } catch {
    shown = String(spec);
  }
  return { kind: "error", status: 500, message: `simulator: invalid reply spec ${shown.slice(0, 200)}` };
}
