import { describe, expect, it } from "vitest";
import { defineCapabilities, POLICY_NAMES } from "../../src/index.js";
import { models } from "./models/index.js";
import { record, SEED_FIELDS } from "./seed.js";
import { combinations, expectedDegradations, fieldGovernance, pathsOf, runPath } from "./suite.js";

/**
 * Every policy model, every combination of the flags it reads, every generated path,
 * replayed against the real runtime (one test per path). `npm run test:model` runs the same
 * suite outside vitest and prints the coverage table.
 */
for (const model of models) {
  describe(`policy model: ${model.name}`, () => {
    for (const flags of combinations(model.reads)) {
      for (const path of pathsOf(model, flags)) {
        const events = path.steps.map((s) => s.event.type).filter((t) => !t.startsWith("xstate."));
        it(`${JSON.stringify(flags)}: ${events.join(" → ")}`, async () => {
          const result = await runPath(model, flags, path.steps as never);
          expect(result.error).toBeNull();
        });
      }
    }
  });
}

/** Fields no model path shows governing behaviour yet. */
const NOT_YET_SHOWN: string[] = [];

describe("coverage", () => {
  // The same figures `npm run test:model` prints; here they fail `npm test` when they drop.
  it("every degradation in the registry is expected by some generated path (and so observed, above)", () => {
    const expected = expectedDegradations(models);
    expect(POLICY_NAMES.filter((name) => !expected.has(name))).toEqual([]);
  });

  it("every capability field of the seed changes some model path when it flips (but those still to do)", () => {
    const notShown = fieldGovernance(models)
      .filter((f) => !f.shownBy)
      .map((f) => f.field);
    // Issue 14 works this list down to empty: a field leaves it when a model path shows it
    // governing behaviour. A field that stops being shown fails here; so does one newly shown
    // but still listed (strike it).
    expect(notShown).toEqual(NOT_YET_SHOWN);
  });

  it("no transient state carries expectations (a path never stops there, so they would never be checked)", () => {
    const unchecked = models.flatMap((m) =>
      Object.entries(m.machine.config.states ?? {})
        .filter(
          ([, state]) =>
            (state as { always?: unknown }).always && (state as { meta?: { expect?: unknown } }).meta?.expect,
        )
        .map(([name]) => `${m.name}: ${name}`),
    );
    expect(unchecked).toEqual([]);
  });

  it("the model's base record is the record the model world's providers start from", () => {
    const full = defineCapabilities();
    const flat = Object.fromEntries(
      Object.entries(full).flatMap(([group, fields]) =>
        typeof fields === "object" ? Object.entries(fields).map(([f, v]) => [`${group}.${f}`, v]) : [],
      ),
    );
    expect(Object.fromEntries(SEED_FIELDS.map((f) => [f, record({}).get(f)]))).toEqual(flat);
  });
});
