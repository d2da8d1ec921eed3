import fc from "fast-check";
import { describe, expect, it } from "vitest";
import { BatchLines, jsonOf } from "../../src/runtime/store/lines.js";

/**
 * The log's lines are written straight into a reused buffer: each must be exactly the JSON line of its record, and
 * where each ends must be its byte end, whatever the text (multi-byte too) and whatever a larger batch
 * left in the buffer before.
 */
describe("batch lines", () => {
  const record = fc.record({
    seq: fc.integer({ min: 1, max: Number.MAX_SAFE_INTEGER }),
    at: fc.date({ noInvalidDate: true }).map((d) => d.toISOString()),
    event: fc.record({ type: fc.string(), text: fc.string({ unit: "binary" }), n: fc.double() }),
  });

  it("writes each record's JSON line, in order, ends at each line's byte end", () => {
    const lines = new BatchLines();
    fc.assert(
      fc.property(fc.array(fc.array(record, { maxLength: 40 }), { minLength: 1, maxLength: 4 }), (batches) => {
        for (const batch of batches) {
          const { data, ends } = lines.write(batch.map(({ seq, at, event }) => ({ seq, at, json: jsonOf(event) })));
          const expected = batch.map(({ seq, at, event }) => `${JSON.stringify({ seq, at, event })}\n`);
          expect(data.toString("utf8")).toBe(expected.join(""));
          let end = 0;
          expect(ends).toEqual(expected.map((line) => (end += Buffer.byteLength(line))));
        }
      }),
    );
  });

  it("refuses what has no JSON", () => {
    expect(() => jsonOf(undefined)).toThrow(TypeError);
    expect(() => jsonOf(() => 1)).toThrow(TypeError);
  });
});
