import type { DomainEvent, DomainEventOf } from "./events.js";

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

/** A delta longer than this stands alone: with the log's bound on pieces per record, a line stays under a MiB. */
export const JOINED_DELTA_MAX_CHARS = 1024;

/**
 * The log's coalescing rule: a delta that follows, in the same commit group, a delta of the same node and stream
 * joins it (texts concatenated, in order). Nothing else merges, so the order of everything else is untouched.
 */
export const coalesceDeltas = {
  joins(last: DomainEvent, next: DomainEvent): boolean {
    return (
      last.type === "node.delta" &&
      next.type === "node.delta" &&
      last.nodeId === next.nodeId &&
      last.stream === next.stream &&
      last.runId === next.runId &&
      next.delta.length <= JOINED_DELTA_MAX_CHARS
    );
  },
  merge(pieces: readonly DomainEvent[]): DomainEvent {
    const first = pieces[0] as DomainEventOf<"node.delta">;
    let delta = "";
    for (const piece of pieces) delta += (piece as DomainEventOf<"node.delta">).delta;
    return { ...first, delta };
  },
};

/** The thread an event belongs to, for per-thread subscriptions. */
export function threadOf(event: DomainEvent): string | null {
  return "threadId" in event ? event.threadId : null;
}
