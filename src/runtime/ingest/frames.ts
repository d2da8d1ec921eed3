import { ProviderEventSchema, type ProviderEvent } from "../../adapters/contract.js";
import { ItemStatusSchema, ItemStreamSchema, ProviderItemKindSchema } from "../../domain/items.js";

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
    const plain = typeof named === "string" ? readPlain(named, event) : undefined;
    if (plain && typeof sessionId === "string") return { ok: true, sessionId, event: plain };
    const parsed = ProviderEventSchema.safeParse(event);
    if (!parsed.success) return { ok: false, type, why: parsed.error.issues[0]?.message ?? "invalid" };
    if (typeof sessionId !== "string") return { ok: false, type, why: "no session id" };
    return { ok: true, sessionId, event: parsed.data };
  } catch (error) {
    return { ok: false, type, why: `reading it threw: ${safeString(error)}` };
  }
}

type Check = (value: unknown) => boolean;
const ITEM_KINDS: ReadonlySet<unknown> = new Set(ProviderItemKindSchema.options);
const STREAMS: ReadonlySet<unknown> = new Set(ItemStreamSchema.options);
const ITEM_STATUSES: ReadonlySet<unknown> = new Set(ItemStatusSchema.options);
const optionalRef: Check = (value) => value === undefined || (typeof value === "string" && value.length > 0);
const optionalString: Check = (value) => value === undefined || typeof value === "string";
const where = { threadRef: optionalRef, turnRef: optionalRef, itemRef: optionalRef };

/** A kind of event checked by hand: its fields in the schema's order, with each one's check and bit. */
interface Plain {
  keys: string[];
  checks: Check[];
  /** Each key's bit (`type` included, with no check of its own: it named the kind). */
  bits: ReadonlyMap<string, number>;
}
const plain = (fields: Record<string, Check>): Plain => {
  const keys = Object.keys(fields);
  return {
    keys,
    checks: Object.values(fields),
    bits: new Map([["type", 0], ...keys.map((key, i) => [key, 1 << i] as const)]),
  };
};

/**
 * The events of every streamed item, the bulk of all frames, checked by hand by the schema's own rules: a strict
 * object, refs non-empty strings, a known kind, stream and status, texts strings, an exit code a safe integer or null.
 * An item's start with a detail, and every other event, is the schema's.
 */
const PLAIN: ReadonlyMap<unknown, Plain> = new Map([
  [
    "item.started",
    plain({ ...where, parentItemRef: (v) => v === null || optionalRef(v), kind: (v) => ITEM_KINDS.has(v) }),
  ],
  [
    "item.delta",
    plain({
      ...where,
      kind: (v) => ITEM_KINDS.has(v),
      stream: (v) => STREAMS.has(v),
      delta: (v) => typeof v === "string",
    }),
  ],
  [
    "item.completed",
    plain({
      ...where,
      kind: (v) => ITEM_KINDS.has(v),
      status: (v) => ITEM_STATUSES.has(v),
      text: optionalString,
      output: optionalString,
      exitCode: (v) => v === undefined || v === null || Number.isSafeInteger(v),
    }),
  ],
]);

/**
 * An event of a kind in PLAIN, checked by hand and copied field by field, each read once (a key present with an
 * undefined value stays a key, as the schema keeps it). Anything else, or anything off, is left to the schema, which
 * also says why it fails.
 */
function readPlain(type: string, event: unknown): ProviderEvent | undefined {
  const spec = PLAIN.get(type);
  if (!spec || typeof event !== "object" || event === null || Array.isArray(event)) return undefined;
  let present = 0;
  for (const key in event) {
    const bit = spec.bits.get(key);
    if (bit === undefined) return undefined;
    present |= bit;
  }
  const read: Record<string, unknown> = { type };
  for (let i = 0; i < spec.keys.length; i++) {
    const key = spec.keys[i]!;
    const has = (present & (1 << i)) !== 0;
    const value = has ? (event as Record<string, unknown>)[key] : undefined;
    if (!spec.checks[i]!(value)) return undefined;
    if (has) read[key] = value;
  }
  return read as ProviderEvent;
}

/** `String(value)` for a value whose own conversion may throw. */
export function safeString(value: unknown): string {
  try {
    return String(value);
  } catch {
    return "(an unprintable error)";
  }
}
