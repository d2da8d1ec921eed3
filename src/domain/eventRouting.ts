import type { DomainEvent } from "./events.js";

/** How the log and its subscribers treat an event: which ones commit at once, and which thread each one is in. */

/** Events whose loss would leave something stuck: committed without waiting for the group window. */
export function isUrgentEvent(event: DomainEvent): boolean {
  return (
    event.type === "run.terminal" ||
    event.type === "request.opened" ||
    event.type === "request.resolved" ||
    event.type === "command.receipt"
  );
}

/** The thread an event belongs to, for per-thread subscriptions. */
export function threadOf(event: DomainEvent): string | null {
  return "threadId" in event ? event.threadId : null;
}
