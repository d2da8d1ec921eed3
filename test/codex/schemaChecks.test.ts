import { readFileSync } from "node:fs";
import fc from "fast-check";
import { describe, expect, it } from "vitest";
import { CODEX_DEFINITIONS, CODEX_VALIDATED_PARAMS } from "../../src/adapters/codex/protocol/schemas.js";
import { definitionChecks, itemChecks } from "../../src/adapters/codex/transport.js";

const check = (definition: string) => definitionChecks(definition).zod();
const handCheck = (definition: string) => definitionChecks(definition).hand();
const itemCheckPair = (type: string) => {
  const checks = itemChecks.get(type);
  return checks ? { zod: checks.zod(), hand: checks.hand() } : null;
};

/**
 * Frames that pass by the thousand (streamed deltas, the items around them) skip zod: a hand check of the same schema
 * reads them (kit/schemaChecks.ts). For any params, valid or mutated, it must accept only what the schema's zod check
 * accepts, and give exactly what that check gives; anything it leaves goes to zod. The expectation is the zod check
 * (derived from the binary's own JSON schema), never the hand check.
 */

type Schema = { [keyword: string]: unknown };

/** Values the schema describes, each one now and then swapped for any JSON (or left undefined, or cut out). */
function valueOf(schema: unknown, depth: number): fc.Arbitrary<unknown> {
  const wild = fc.oneof(fc.jsonValue({ maxDepth: 1 }), fc.constant(undefined), fc.constant(-0));
  return fc.oneof({ weight: 12, arbitrary: described(schema as Schema, depth) }, { weight: 1, arbitrary: wild });
}

function described(schema: Schema, depth: number): fc.Arbitrary<unknown> {
  if (depth <= 0) return fc.constantFrom(null, "", 0, [], {});
  if (typeof schema.$ref === "string") return valueOf(CODEX_DEFINITIONS[schema.$ref.split("/").pop()!], depth - 1);
  if (Array.isArray(schema.enum)) return fc.constantFrom(...(schema.enum as unknown[]));
  const branches = (schema.anyOf ?? schema.oneOf ?? schema.allOf) as unknown[] | undefined;
  if (branches) return fc.oneof(...branches.map((branch) => valueOf(branch, depth)));
  if (Array.isArray(schema.type)) return fc.oneof(...schema.type.map((type) => described({ ...schema, type }, depth)));
  switch (schema.type) {
    case "string":
      return fc.string({ maxLength: 8 });
    case "boolean":
      return fc.boolean();
    case "null":
      return fc.constant(null);
    case "integer":
    case "number": {
      const minimum = typeof schema.minimum === "number" ? schema.minimum : -1e6;
      const edges = [minimum, minimum - 1, 2 ** 53 - 1, 2 ** 53, 1.5, -0, Number.NaN];
      return fc.oneof(fc.integer({ min: minimum, max: 1e13 }), fc.constantFrom(...edges));
    }
    case "array":
      return fc.array(valueOf(schema.items, depth - 1), { maxLength: 3 });
    case "object": {
      const properties = (schema.properties ?? {}) as Record<string, unknown>;
      const required = (schema.required ?? []) as string[];
      const fields = Object.fromEntries(Object.entries(properties).map(([k, p]) => [k, valueOf(p, depth - 1)]));
      const extra = fc.dictionary(fc.constantFrom("startedAtMs", "extra", "__proto__"), fc.jsonValue({ maxDepth: 1 }));
      return fc
        .tuple(
          fc.record(fields, { requiredKeys: required.filter((k) => k in fields) }),
          fc.oneof({ weight: 4, arbitrary: fc.constant({}) }, { weight: 1, arbitrary: extra }),
          fc.boolean(),
        )
        .map(([known, more, extraFirst]) => ownKeys(...(extraFirst ? [more, known] : [known, more])));
    }
    default:
      return fc.jsonValue({ maxDepth: 2 });
  }
}

/** A plain object of the entries of `parts`, each an own key (`__proto__` too, as JSON.parse makes it). */
function ownKeys(...parts: object[]): Record<string, unknown> {
  const value = {};
  for (const part of parts)
    for (const [key, v] of Object.entries(part))
      Object.defineProperty(value, key, { value: v, enumerable: true, writable: true, configurable: true });
  return value;
}

/** Holds `hand` to `zod` on arbitrary values; counts how many it read by hand (so the property is not vacuous). */
function holdToSchema(values: fc.Arbitrary<unknown>, hand: (v: unknown) => unknown, zod: ReturnType<typeof check>) {
  let readByHand = 0;
  fc.assert(
    fc.property(values, (value) => {
      const read = hand(value);
      if (read === undefined) return; // left to zod
      readByHand++;
      const expected = zod.safeParse(value);
      expect(expected.success).toBe(true);
      expect(read).toStrictEqual(expected.data);
    }),
    { numRuns: 3_000 },
  );
  return readByHand;
}

const fixture = new URL("../replay/fixtures/codex/text-turn.jsonl", import.meta.url);
const frames = readFileSync(fixture, "utf8")
  .split("\n")
  .filter(Boolean)
  .map((line) => (JSON.parse(line) as { f: { method?: string; params?: unknown } }).f)
  .filter((frame) => frame.method !== undefined);

describe("codex hand checks", () => {
  for (const [method, definition] of Object.entries(CODEX_VALIDATED_PARAMS)) {
    it(`${method}: accepts only what the schema accepts, and reads what it reads`, () => {
      const values = fc.oneof(valueOf({ $ref: `#/definitions/${definition}` }, 6), fc.jsonValue({ maxDepth: 2 }));
      const read = holdToSchema(values, handCheck(definition), check(definition));
      if (method.startsWith("item/") && /started|completed|[dD]elta/.test(method)) expect(read).toBeGreaterThan(100);
    });
  }

  for (const type of ["agentMessage", "userMessage", "reasoning", "plan", "commandExecution", "fileChange"]) {
    it(`a ${type} item: accepts only what the item's schema accepts, and reads what it reads`, () => {
      const { zod, hand } = itemCheckPair(type)!;
      const variant = (CODEX_DEFINITIONS.ThreadItem as { oneOf: Schema[] }).oneOf.find(
        (v) => ((v.properties as Schema).type as { enum: string[] }).enum[0] === type,
      );
      const read = holdToSchema(valueOf(variant, 6), hand, zod);
      if (["agentMessage", "userMessage", "reasoning"].includes(type)) expect(read).toBeGreaterThan(100);
    });
  }

  it("a recorded turn's start and end, their turn's fields mutated: read by hand only as the schema reads them", () => {
    const turns = frames.filter((f) => /^turn\/(started|completed)$/.test(f.method!));
    const field = fc.constantFrom(
      "id",
      "items",
      "itemsView",
      "status",
      "error",
      "startedAt",
      "completedAt",
      "durationMs",
      "rootTurnId",
    );
    const value = fc.oneof(
      fc.constantFrom("completed", "inProgress", "notLoaded", "summary", "full", "other", null, 7, 1.5, -0, 2 ** 53),
      fc.record({ message: fc.string({ maxLength: 4 }) }),
      fc.array(fc.record({ type: fc.constantFrom("agentMessage", "x"), id: fc.string({ maxLength: 3 }) })),
      fc.jsonValue({ maxDepth: 2 }),
    );
    let readByHand = 0;
    fc.assert(
      fc.property(
        fc.constantFrom(...turns),
        fc.array(fc.tuple(field, value, fc.boolean()), { maxLength: 3 }),
        ({ method, params }, edits) => {
          const mutated = structuredClone(params) as { turn: Record<string, unknown> };
          for (const [key, v, drop] of edits) {
            if (drop) delete mutated.turn[key];
            else mutated.turn[key] = v;
          }
          const definition = CODEX_VALIDATED_PARAMS[method as keyof typeof CODEX_VALIDATED_PARAMS];
          const read = handCheck(definition)(mutated);
          if (read === undefined) return; // left to zod
          readByHand++;
          const expected = check(definition).safeParse(mutated);
          expect(expected.success).toBe(true);
          expect(read).toStrictEqual(expected.data);
        },
      ),
      { numRuns: 2_000 },
    );
    expect(readByHand).toBeGreaterThan(300);
  });

  it("reads every recorded delta, agentMessage and userMessage item frame, and turn start and end by hand", () => {
    const hot = frames.filter((f) => f.method?.startsWith("item/") || /^turn\/(started|completed)$/.test(f.method!));
    expect(hot.length).toBeGreaterThan(8);
    expect(hot.filter((f) => f.method!.startsWith("turn/"))).toHaveLength(4);
    for (const { method, params } of hot) {
      const definition = CODEX_VALIDATED_PARAMS[method as keyof typeof CODEX_VALIDATED_PARAMS];
      const read = handCheck(definition)(params) as { item?: { type: string } };
      expect(read, method).toStrictEqual(check(definition).parse(params));
      if (!read.item) continue;
      const { zod, hand } = itemCheckPair(read.item.type)!;
      expect(hand(read.item), `${method} ${read.item.type}`).toStrictEqual(zod.parse(read.item));
    }
  });

  it("leaves nothing valid to the schema: every well-formed delta is read by hand", () => {
    const hand = handCheck(CODEX_VALIDATED_PARAMS["item/agentMessage/delta"]);
    fc.assert(
      fc.property(
        fc.record({ delta: fc.string(), itemId: fc.string(), threadId: fc.string(), turnId: fc.string() }),
        (record) => {
          const params = { ...record }; // a plain object, as JSON.parse makes it
          expect(hand(params)).toStrictEqual(params);
        },
      ),
    );
  });
});
