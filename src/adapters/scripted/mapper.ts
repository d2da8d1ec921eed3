import { ProviderEventSchema, type ProviderAdapterEvent, type ProviderEvent } from "../contract.js";
import { malformedTerminal } from "../kit/malformedTerminal.js";
import { EventParamsSchema } from "./protocol/host.js";

/**
 * The scripted host's frames → the contract's events. Its provider speaks the contract's own vocabulary (it is the
 * in-process provider, run in a host), so an `event` notification carries a `ProviderEvent` as it is; the runtime
 * validates it like any adapter's. What is mapped here: the envelope, the sequence number that drops a replay, and a
 * turn's end of the wrong shape (in a frame of the wrong shape, or itself of the wrong shape): when it names its
 * thread, a failed terminal (`protocol_error`) for that thread, so the run ends at once, not at the turn watchdog.
 */

export type HostEvent =
  | { ok: true; seq: number; frame: ProviderAdapterEvent }
  /** `ended`: the failed terminal a malformed turn's end stands for, when it can be placed. */
  | { ok: false; why: string; ended?: ProviderAdapterEvent };

const why = (issues: ReadonlyArray<{ path: PropertyKey[]; message: string }>): string => {
  const issue = issues[0];
  if (!issue) return "invalid";
  const at = issue.path.map(String).join(".");
  return at ? `${at}: ${issue.message}` : issue.message;
};

/** An `event` notification's params, read. */
export function hostEvent(params: unknown): HostEvent {
  const parsed = EventParamsSchema.safeParse(params);
  if (!parsed.success) {
    const reason = why(parsed.error.issues);
    const { sessionId, event } = (typeof params === "object" && params !== null ? params : {}) as {
      sessionId?: unknown;
      event?: unknown;
    };
    const ended = typeof sessionId === "string" ? malformedTerminal(event, "the scripted host", reason) : null;
    return { ok: false, why: reason, ...(ended ? { ended: { sessionId: sessionId as string, event: ended } } : {}) };
  }
  const { seq, sessionId, event } = parsed.data;
  // Only a turn's end is checked here (the runtime checks every event, and drops one of the wrong shape): dropped, a
  // terminal would leave its run to the watchdog.
  if ((event as { type?: unknown } | null)?.type === "turn.terminal") {
    const terminal = ProviderEventSchema.safeParse(event);
    if (!terminal.success) {
      const ended = malformedTerminal(event, "the scripted host", why(terminal.error.issues));
      if (ended) return { ok: true, seq, frame: { sessionId, event: ended } };
    }
  }
  return { ok: true, seq, frame: { sessionId, event: event as ProviderEvent } };
}
