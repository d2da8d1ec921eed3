import fc from "fast-check";
import { describe, expect, it } from "vitest";
import type { ProviderAdapterEvent } from "../../src/adapters/contract.js";
import { MERGED_DELTA_MAX_CHARS, mergeDeltas } from "../../src/adapters/kit/deltaMerge.js";
import { EventQueue } from "../../src/adapters/kit/eventQueue.js";

/**
 * A burst of deltas queued behind a busy runtime reaches it as one delta per item (the text in order), while nothing
 * that is not queued yet waits for a merge, and nothing that differs in anything but its text merges.
 */
const delta = (text: string, over: Record<string, unknown> = {}, sessionId = "ses_a"): ProviderAdapterEvent =>
  ({
    sessionId,
    event: {
      type: "item.delta",
      threadRef: "th",
      turnRef: "tu",
      itemRef: "it",
      kind: "assistant_message",
      stream: "text",
      delta: text,
      ...over,
    },
  }) as ProviderAdapterEvent;

describe("merging queued deltas", () => {
  it("folds a delta of the same session, thread, turn, item, kind and stream into the one before", () => {
    const first = delta("ab");
    const merged = mergeDeltas(first, delta("cd"))!;
    expect(merged).toEqual(delta("abcd"));
    expect(first).toEqual(delta("ab")); // what the adapter queued is never changed
    expect(mergeDeltas(merged, delta("ef"))).toEqual(delta("abcdef"));
  });

  it("merges nothing that differs in anything but its text", () => {
    const last = delta("ab");
    for (const other of [
      delta("cd", {}, "ses_b"),
      delta("cd", { itemRef: "it2" }),
      delta("cd", { turnRef: "tu2" }),
      delta("cd", { threadRef: undefined }),
      delta("cd", { kind: "reasoning" }),
      delta("cd", { stream: "output" }),
      delta("cd", { extra: 1 }),
      delta(3 as unknown as string), // not a delta's text: left for the runtime to refuse
      { sessionId: "ses_a", event: { type: "item.completed", kind: "assistant_message", status: "completed" } },
    ] as ProviderAdapterEvent[])
      expect(mergeDeltas(last, other)).toBeUndefined();
    expect(mergeDeltas(delta(3 as unknown as string), delta("ab"))).toBeUndefined();
    // Another key of each, read alike from the other (absent reads as undefined; Object.prototype's as its own).
    expect(mergeDeltas(delta("ab", { foo: undefined }), delta("cd", { bar: undefined }))).toBeUndefined();
    const inherited = { toString: Object.prototype.toString };
    expect(mergeDeltas(delta("ab", { extra: 1 }), delta("cd", inherited))).toBeUndefined();
    const started = { sessionId: "ses_a", event: { type: "item.started", kind: "assistant_message" } };
    expect(mergeDeltas(started as ProviderAdapterEvent, last)).toBeUndefined();
  });

  it("stops a merged delta at the cap: the next one starts anew", () => {
    const big = delta("x".repeat(MERGED_DELTA_MAX_CHARS - 1));
    expect(mergeDeltas(big, delta("y"))!.event).toMatchObject({ delta: `${"x".repeat(MERGED_DELTA_MAX_CHARS - 1)}y` });
    expect(mergeDeltas(big, delta("yz"))).toBeUndefined();
  });

  it("property: taken at any time, each item's text and the order of the rest are as pushed", async () => {
    const frame = fc.oneof(
      fc
        .record({ item: fc.constantFrom("it", "it2"), text: fc.string({ maxLength: 5 }) })
        .map(({ item, text }) => delta(text, { itemRef: item })),
      fc.constant({ sessionId: "ses_a", event: { type: "warning", message: "w" } } as ProviderAdapterEvent),
    );
    await fc.assert(
      fc.asyncProperty(fc.array(fc.tuple(frame, fc.boolean()), { maxLength: 60 }), async (pushes) => {
        const queue = new EventQueue<ProviderAdapterEvent>({ merge: mergeDeltas });
        const iterator = queue[Symbol.asyncIterator]();
        const taken: ProviderAdapterEvent[] = [];
        for (const [pushed, take] of pushes) {
          queue.push(pushed);
          if (take) taken.push((await iterator.next()).value as ProviderAdapterEvent);
        }
        queue.close();
        for (let next = await iterator.next(); !next.done; next = await iterator.next()) taken.push(next.value);
        // Merging only joins neighbours alike: splitting what came out back per frame kind gives what went in.
        const shape = (frames: ProviderAdapterEvent[]) => {
          const out: string[] = [];
          for (const { event } of frames) {
            const key = event.type === "item.delta" ? `delta ${event.itemRef}` : event.type;
            const text = event.type === "item.delta" ? event.delta : "";
            if (event.type === "item.delta" && out.at(-1)?.startsWith(`${key}:`)) out[out.length - 1] += text;
            else out.push(`${key}:${text}`);
          }
          return out;
        };
        expect(shape(taken)).toEqual(shape(pushes.map(([pushed]) => pushed)));
        expect(taken.length).toBeLessThanOrEqual(pushes.length);
      }),
      { numRuns: 200 },
    );
  });

  it("hands a waiting consumer each delta as it comes: only what is queued merges", async () => {
    const queue = new EventQueue<ProviderAdapterEvent>({ merge: mergeDeltas });
    const iterator = queue[Symbol.asyncIterator]();
    const waiting = iterator.next();
    queue.push(delta("a"));
    queue.push(delta("b"));
    queue.push(delta("c"));
    expect(((await waiting).value as ProviderAdapterEvent).event).toMatchObject({ delta: "a" });
    expect(((await iterator.next()).value as ProviderAdapterEvent).event).toMatchObject({ delta: "bc" });
  });
});
