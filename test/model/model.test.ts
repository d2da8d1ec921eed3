import { describe, expect, it } from "vitest";
import { POLICY_NAMES } from "../../src/index.js";
import { models } from "./models/index.js";
import { combinations, pathsOf, runPath } from "./suite.js";

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

describe("degradation coverage", () => {
  it("every degradation in the registry is modelled by some policy model", () => {
    // The full run (with the table) is `npm run test:model`; here: each registry entry appears in some model's
    // expectations.
    const source = models
      .map((m) => JSON.stringify(m.machine.config, (_k, v) => (typeof v === "function" ? v.toString() : v)))
      .join("\n");
    const missing = POLICY_NAMES.filter((name) => !source.includes(`"${name}"`) && !source.includes(name));
    expect(missing).toEqual([]);
  });
});
