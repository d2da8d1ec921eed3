import type { ProviderAdapterEvent } from "../contract.js";

/**
 * Streamed text reaches an adapter in bursts: one read of a provider's pipe holds hundreds of frames, most of them
 * deltas of the item being written. Deltas the runtime has not taken yet merge in the adapter's queue, so the runtime
 * normalizes, folds and logs one delta per burst instead of one per frame. What subscribers get is unchanged: the log
 * coalesces the deltas of one commit group into one record anyway, and nothing waits for a merge (only what is
 * already queued behind a busy consumer merges).
 */

/** A merged delta stops growing at this many characters (the next one starts a new delta): log lines stay bounded. */
export const MERGED_DELTA_MAX_CHARS = 64 * 1024;

/** A frame a merge made: its own to grow (a frame an adapter queued is never changed in place). */
class MergedDelta implements ProviderAdapterEvent {
  constructor(
    readonly sessionId: string,
    readonly event: Extract<ProviderAdapterEvent["event"], { type: "item.delta" }>,
  ) {}
}

/**
 * `next` folded into `last` when both are deltas of the same session, thread, turn, item, kind and stream (every field
 * but the text alike) and their texts together stay within MERGED_DELTA_MAX_CHARS; else undefined.
 */
export function mergeDeltas(last: ProviderAdapterEvent, next: ProviderAdapterEvent): ProviderAdapterEvent | undefined {
  const a = last.event;
  const b = next.event;
  if (a.type !== "item.delta" || b.type !== "item.delta" || last.sessionId !== next.sessionId) return undefined;
  // A frame that is not what its type says stays as it is, for the runtime to refuse (never joined into a valid one).
  if (typeof a.delta !== "string" || typeof b.delta !== "string") return undefined;
  if (a.delta.length + b.delta.length > MERGED_DELTA_MAX_CHARS || !sameButDelta(a, b)) return undefined;
  if (last instanceof MergedDelta) {
    a.delta += b.delta;
    return last;
  }
  return new MergedDelta(last.sessionId, { ...a, delta: a.delta + b.delta });
}

/** The same keys, each with the same value, but `delta`. */
function sameButDelta(a: object, b: object): boolean {
  let keys = 0;
  for (const key in b) {
    keys++;
    if (key !== "delta" && (!Object.hasOwn(a, key) || a[key as keyof typeof a] !== b[key as keyof typeof b])) {
      return false;
    }
  }
  for (const _ in a) keys--;
  return keys === 0;
}
