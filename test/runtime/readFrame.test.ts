import fc from "fast-check";
import { describe, expect, it, vi } from "vitest";
import { ProviderEventSchema } from "../../src/adapters/contract.js";
import { readFrame } from "../../src/runtime/ingest/frames.js";

/**
 * Streamed deltas and items skip the schema (a hand check by its rules): for any delta- or item-like frame, the check
 * must accept exactly what the schema accepts, and read exactly what the schema reads. The expectation is the schema,
 * never the check.
 */
const maybe = <T>(arb: fc.Arbitrary<T>) => fc.option(arb, { nil: undefined });
const field = fc.oneof(
  fc.string(),
  fc.constant(""),
  fc.constantFrom("assistant_message", "reasoning", "tool_call", "subagent", "text", "output", "item.delta"),
  fc.integer(),
  fc.constant(null),
  fc.constant(undefined),
  fc.array(fc.string(), { maxLength: 2 }),
);
const deltaLike = fc.record(
  {
    type: fc.oneof(fc.constant("item.delta"), field),
    threadRef: maybe(field),
    turnRef: maybe(field),
    itemRef: maybe(field),
    kind: fc.oneof(fc.constantFrom("assistant_message", "reasoning", "command_execution", "file_change"), field),
    stream: fc.oneof(fc.constantFrom("text", "output"), field),
    delta: fc.oneof(fc.string(), field),
    extra: field,
  },
  { requiredKeys: [] },
);

const ref = fc.oneof(fc.string({ minLength: 1, maxLength: 4 }), fc.constant(undefined));
const validItem = fc.oneof(
  fc.record(
    {
      type: fc.constant("item.started"),
      threadRef: ref,
      turnRef: ref,
      itemRef: ref,
      parentItemRef: fc.oneof(ref, fc.constant(null)),
      kind: fc.constantFrom("assistant_message", "reasoning", "tool_call", "subagent"),
    },
    { requiredKeys: ["type", "kind"] },
  ),
  fc.record(
    {
      type: fc.constant("item.completed"),
      threadRef: ref,
      turnRef: ref,
      itemRef: ref,
      kind: fc.constantFrom("assistant_message", "reasoning", "tool_call", "subagent"),
      status: fc.constantFrom("completed", "failed", "cancelled", "declined"),
      text: fc.option(fc.string(), { nil: undefined }),
      output: fc.option(fc.string(), { nil: undefined }),
      exitCode: fc.option(fc.oneof(fc.integer(), fc.constant(null)), { nil: undefined }),
    },
    { requiredKeys: ["type", "kind", "status"] },
  ),
);
/** A valid item's start or end, then maybe one field set to anything (a wrong value, a key it must not have...). */
const itemLike = fc
  .tuple(
    validItem,
    fc.option(
      fc.tuple(
        fc.constantFrom(
          "type",
          "threadRef",
          "itemRef",
          "parentItemRef",
          "kind",
          "status",
          "text",
          "exitCode",
          "detail",
          "delta",
          "extra",
        ),
        fc.oneof(
          field,
          fc.constantFrom(
            null,
            Number.NaN,
            Infinity,
            2 ** 53,
            1.5,
            { command: "ls" },
            "item.started",
            "item.completed",
          ),
        ),
      ),
      { nil: undefined },
    ),
  )
  .map(([item, change]) => (change ? { ...item, [change[0]]: change[1] } : item));

/** readFrame against the schema on `numRuns` generated frames: the same verdict, the same event read. */
function agreesWithSchema(events: fc.Arbitrary<unknown>, numRuns: number): { accepted: number; refused: number } {
  const counts = { accepted: 0, refused: 0 };
  fc.assert(
    fc.property(events, (event) => {
      const expected = ProviderEventSchema.safeParse(event);
      const read = readFrame({ sessionId: "ses_1", event });
      expect(read.ok).toBe(expected.success);
      if (read.ok && expected.success) expect(read.event).toStrictEqual(expected.data);
      counts[read.ok ? "accepted" : "refused"]++;
    }),
    { numRuns },
  );
  return counts;
}

describe("readFrame: streamed items", () => {
  it("accepts exactly what the provider event schema accepts of an item's start and end, and reads the same", () => {
    const { accepted, refused } = agreesWithSchema(itemLike, 10_000);
    // Both sides are exercised.
    expect(accepted).toBeGreaterThan(1_000);
    expect(refused).toBeGreaterThan(1_000);
  });

  it("reads a plain item's start, delta and end without the schema", () => {
    const parse = vi.spyOn(ProviderEventSchema, "safeParse");
    try {
      for (const event of [
        { type: "item.started", itemRef: "i", parentItemRef: null, kind: "reasoning" },
        { type: "item.delta", itemRef: "i", kind: "reasoning", stream: "text", delta: "a" },
        { type: "item.completed", itemRef: "i", kind: "command_execution", status: "failed", exitCode: 2, output: "x" },
      ])
        expect(readFrame({ sessionId: "ses_1", event })).toEqual({ ok: true, sessionId: "ses_1", event });
      expect(parse).not.toHaveBeenCalled();
      // One with a detail is the schema's.
      readFrame({ sessionId: "ses_1", event: { type: "item.started", kind: "command_execution", detail: null } });
      expect(parse).toHaveBeenCalledTimes(1);
    } finally {
      parse.mockRestore();
    }
  });
});

describe("readFrame: streamed deltas", () => {
  it("accepts exactly what the provider event schema accepts, and reads the same event", () => {
    agreesWithSchema(deltaLike, 5_000);
  });

  it("reads each field once: a getter cannot pass the check and then hand over something else", () => {
    let reads = 0;
    const event = {
      type: "item.delta",
      kind: "assistant_message",
      stream: "text",
      get delta() {
        reads++;
        return reads === 1 ? "checked" : { not: "a string" };
      },
    };
    const read = readFrame({ sessionId: "ses_1", event });
    expect(read.ok && read.event.type === "item.delta" && read.event.delta).toBe("checked");
    expect(reads).toBe(1);
  });

  it("is a copy: changing the frame afterwards changes nothing read", () => {
    const event = { type: "item.delta", kind: "reasoning", stream: "text", delta: "a", turnRef: "t" };
    const read = readFrame({ sessionId: "ses_1", event });
    event.delta = "changed";
    expect(read.ok && read.event).toEqual({
      type: "item.delta",
      kind: "reasoning",
      stream: "text",
      delta: "a",
      turnRef: "t",
    });
  });
});
