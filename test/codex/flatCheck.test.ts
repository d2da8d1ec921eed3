import fc from "fast-check";
import { describe, expect, it } from "vitest";
import { CODEX_VALIDATED_PARAMS } from "../../src/adapters/codex/protocol/schemas.js";
import { check, flatCheck } from "../../src/adapters/codex/transport.js";

/**
 * Streamed deltas skip zod: their definitions are flat, and a hand check reads them. For any params, it must accept
 * only what the schema accepts, and give exactly what the schema gives (anything it leaves goes to the schema). The
 * expectation is the schema (derived from the binary's own JSON schema), never the hand check.
 */
const flat = Object.entries(CODEX_VALIDATED_PARAMS).flatMap(([method, definition]) => {
  const hand = flatCheck(definition);
  return hand ? [{ method, definition, hand }] : [];
});
const value = fc.oneof(fc.string(), fc.boolean(), fc.constant(null), fc.integer(), fc.jsonValue({ maxDepth: 1 }));
const paramsLike = fc.dictionary(
  fc.constantFrom("delta", "itemId", "threadId", "turnId", "message", "summaryIndex", "extra"),
  value,
);

describe("codex flat checks", () => {
  it("cover the streamed deltas", () => {
    expect(flat.map((f) => f.method)).toEqual(
      expect.arrayContaining(["item/agentMessage/delta", "item/commandExecution/outputDelta"]),
    );
  });

  for (const { method, definition, hand } of flat) {
    it(`${method}: accepts only what the schema accepts, and reads what it reads`, () => {
      const schema = check(definition);
      fc.assert(
        fc.property(fc.oneof(paramsLike, fc.jsonValue({ maxDepth: 2 })), (params) => {
          const read = hand(params);
          const expected = schema.safeParse(params);
          if (read === undefined) return; // left to the schema
          expect(expected.success).toBe(true);
          expect(read).toStrictEqual(expected.data);
        }),
        { numRuns: 5_000 },
      );
    });
  }

  it("leaves nothing valid to the schema: every well-formed delta is read by hand", () => {
    const hand = flatCheck(CODEX_VALIDATED_PARAMS["item/agentMessage/delta"])!;
    fc.assert(
      fc.property(
        fc.record({ delta: fc.string(), itemId: fc.string(), threadId: fc.string(), turnId: fc.string() }),
        (params) => {
          expect(hand(params)).toStrictEqual({ ...params });
        },
      ),
    );
  });
});
