import fc from "fast-check";
import { describe, expect, it } from "vitest";
import { readRpc, RpcMessageSchema } from "../../src/adapters/kit/jsonRpc.js";

/**
 * Every host frame is read by hand (`readRpc`), not by the schema: for any parsed JSON, the read must accept exactly
 * what `RpcMessageSchema` accepts and give exactly what it gives. The expectation is the schema, never the reader.
 */
const id = fc.oneof(
  fc.integer(),
  fc.constantFrom(0, -1, 2 ** 53, 2 ** 60, 1.5, Number.MAX_SAFE_INTEGER),
  fc.constant(null),
  fc.string(),
);
const anyJson = fc.jsonValue({ maxDepth: 2 });
const rpcLike = fc.record(
  {
    jsonrpc: fc.oneof(fc.constant("2.0"), fc.constant("1.0"), anyJson),
    id: fc.oneof(id, anyJson),
    method: fc.oneof(fc.string(), anyJson),
    params: anyJson,
    result: anyJson,
    error: fc.oneof(
      fc.record(
        { code: fc.oneof(id, anyJson), message: fc.oneof(fc.string(), anyJson), data: anyJson, extra: anyJson },
        { requiredKeys: [] },
      ),
      anyJson,
    ),
    extra: anyJson,
  },
  { requiredKeys: [] },
);

describe("readRpc", () => {
  it("accepts exactly what RpcMessageSchema accepts, and reads the same message", () => {
    fc.assert(
      fc.property(fc.oneof(rpcLike, anyJson), (raw) => {
        const expected = RpcMessageSchema.safeParse(raw);
        const read = readRpc(raw);
        expect(read !== null).toBe(expected.success);
        if (read && expected.success) expect(read).toStrictEqual(expected.data);
      }),
      { numRuns: 20_000 },
    );
  });
});
