import type { ProviderAdapterEvent, ProviderEvent } from "../contract.js";
import { EventParamsSchema } from "./protocol/host.js";

/**
 * The scripted host's frames → the contract's events. Its provider speaks the contract's own vocabulary (it is the
 * in-process provider, run in a host), so an `event` notification carries a `ProviderEvent` as it is; the runtime
 * validates it like any adapter's. What is mapped here: the envelope, and the sequence number that drops a replay.
 */

export type HostEvent = { ok: true; seq: number; frame: ProviderAdapterEvent } | { ok: false; why: string };

/** An `event` notification's params, read. */
export function hostEvent(params: unknown): HostEvent {
  const parsed = EventParamsSchema.safeParse(params);
  if (!parsed.success) return { ok: false, why: parsed.error.issues[0]?.message ?? "invalid" };
  const { seq, sessionId, event } = parsed.data;
  return { ok: true, seq, frame: { sessionId, event: event as ProviderEvent } };
}
