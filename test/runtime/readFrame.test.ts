import fc from "fast-check";
import { describe, expect, it } from "vitest";
import { ProviderEventSchema } from "../../src/adapters/contract.js";
import { readFrame } from "../../src/runtime/ingest/frames.js";

/**
 * Streamed deltas skip the schema (a hand check by its rules): for any delta-like frame, the check must accept exactly
 * what the schema accepts, and read exactly what the schema reads. The expectation is the schema, never the check.
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

describe("readFrame: streamed deltas", () => {
  it("accepts exactly what the provider event schema accepts, and reads the same event", () => {
    fc.assert(
      fc.property(deltaLike, (event) => {
        const expected = ProviderEventSchema.safeParse(event);
        const read = readFrame({ sessionId: "ses_1", event });
        expect(read.ok).toBe(expected.success);
        if (read.ok && expected.success) expect(read.event).toStrictEqual(expected.data);
      }),
      { numRuns: 5_000 },
    );
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
