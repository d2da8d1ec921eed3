import type { ProviderEvent } from "../contract.js";

/**
 * A turn's end that failed the adapter's event check, read as far as it can be: a terminal that names its thread still
 * ends that thread's turn, failed at once as a protocol error (the turn is over on the provider's side, whatever the
 * frame says), never dropped and left to the turn watchdog. Anything else (no terminal, or one that names no thread
 * and so cannot be placed) is null: noted and dropped, as any malformed event.
 */
export function malformedTerminal(event: unknown, provider: string, why: string): ProviderEvent | null {
  if (typeof event !== "object" || event === null || Array.isArray(event)) return null;
  const { type, threadRef, turnRef } = event as { type?: unknown; threadRef?: unknown; turnRef?: unknown };
  if (type !== "turn.terminal" || typeof threadRef !== "string" || threadRef === "") return null;
  return {
    type: "turn.terminal",
    threadRef,
    ...(typeof turnRef === "string" && turnRef !== "" ? { turnRef } : {}),
    status: "failed",
    threadDisposition: "reusable",
    failureClass: "protocol_error",
    message: `${provider} sent a turn.terminal that does not match its schema: ${why}`,
    retryable: false,
  };
}
