import { ProviderEventSchema, type ProviderEvent } from "../../adapters/contract.js";
import { ItemStreamSchema, ProviderItemKindSchema } from "../../domain/items.js";

/**
 * Validates one frame of an adapter's stream. Everything about it is untrusted: reading a field
 * may throw (a getter, a proxy trap) and so may validating it; any of that makes this frame
 * invalid, never the stream.
 */
export function readFrame(
  frame: unknown,
): { ok: true; sessionId: string; event: ProviderEvent } | { ok: false; type: string; why: string } {
  let type = "unknown";
  try {
    const { sessionId, event } = frame as { sessionId?: unknown; event?: unknown };
    const named = (event as { type?: unknown } | null | undefined)?.type;
    if (typeof named === "string") type = named.slice(0, 80);
    const delta = named === "item.delta" ? readDelta(event) : undefined;
    if (delta && typeof sessionId === "string") return { ok: true, sessionId, event: delta };
    const parsed = ProviderEventSchema.safeParse(event);
    if (!parsed.success) return { ok: false, type, why: parsed.error.issues[0]?.message ?? "invalid" };
    if (typeof sessionId !== "string") return { ok: false, type, why: "no session id" };
    return { ok: true, sessionId, event: parsed.data };
  } catch (error) {
    return { ok: false, type, why: `reading it threw: ${safeString(error)}` };
  }
}

type DeltaEvent = Extract<ProviderEvent, { type: "item.delta" }>;
const [THREAD_REF, TURN_REF, ITEM_REF] = [1, 2, 4];
const DELTA_FIELDS: ReadonlyMap<string, number> = new Map([
  ...["type", "kind", "stream", "delta"].map((key) => [key, 0] as const),
  ["threadRef", THREAD_REF],
  ["turnRef", TURN_REF],
  ["itemRef", ITEM_REF],
]);
const ITEM_KINDS: ReadonlySet<unknown> = new Set(ProviderItemKindSchema.options);
const STREAMS: ReadonlySet<unknown> = new Set(ItemStreamSchema.options);
const optionalRef = (value: unknown) => value === undefined || (typeof value === "string" && value.length > 0);

/**
 * A streamed delta, the bulk of all frames, checked by hand by the schema's own rules (a strict object, refs
 * non-empty strings, a known kind and stream, a string delta) and copied field by field, each read once. Anything
 * else, or anything off, is left to the schema, which also says why it fails.
 */
function readDelta(event: unknown): DeltaEvent | undefined {
  if (typeof event !== "object" || event === null || Array.isArray(event)) return undefined;
  let present = 0; // which refs are keys, even when undefined: the schema keeps them as keys
  for (const key in event) {
    const bit = DELTA_FIELDS.get(key);
    if (bit === undefined) return undefined;
    present |= bit;
  }
  const { threadRef, turnRef, itemRef, kind, stream, delta } = event as Record<string, unknown>;
  if (!optionalRef(threadRef) || !optionalRef(turnRef) || !optionalRef(itemRef)) return undefined;
  if (!ITEM_KINDS.has(kind) || !STREAMS.has(stream) || typeof delta !== "string") return undefined;
  const read = { type: "item.delta", kind, stream, delta } as DeltaEvent;
  if (present & THREAD_REF) read.threadRef = threadRef as string;
  if (present & TURN_REF) read.turnRef = turnRef as string;
  if (present & ITEM_REF) read.itemRef = itemRef as string;
  return read;
}

/** `String(value)` for a value whose own conversion may throw. */
export function safeString(value: unknown): string {
  try {
    return String(value);
  } catch {
    return "(an unprintable error)";
  }
}
