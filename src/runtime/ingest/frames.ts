import { ProviderEventSchema, type ProviderEvent } from "../../adapters/contract.js";

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
    const parsed = ProviderEventSchema.safeParse(event);
    if (!parsed.success) return { ok: false, type, why: parsed.error.issues[0]?.message ?? "invalid" };
    if (typeof sessionId !== "string") return { ok: false, type, why: "no session id" };
    return { ok: true, sessionId, event: parsed.data };
  } catch (error) {
    return { ok: false, type, why: `reading it threw: ${safeString(error)}` };
  }
}

/** `String(value)` for a value whose own conversion may throw. */
export function safeString(value: unknown): string {
  try {
    return String(value);
  } catch {
    return "(an unprintable error)";
  }
}
