import { describe, expect, it } from "vitest";
import { DomainEventSchema } from "../../src/domain/events.js";
import { DEGRADATIONS } from "../../src/machines/policies.js";
import { blockStates } from "../../scripts/docs.js";
import { staleEventNotes } from "../../scripts/docsEvents.js";

/**
 * The generated blocks of the README and docs/ (events from the zod schemas, degradations from
 * DEGRADATIONS, the capability tables from the records, the README's example from its file)
 * are exactly what their generators write now. When one fails: `npm run docs`, then review
 * the diff.
 */

describe("generated docs", async () => {
  const states = await blockStates();

  it.each(states.map((s) => [`${s.block.file}: ${s.block.name}`, s] as const))(
    "%s is up to date (npm run docs)",
    (_, state) => {
      expect(state.current).toBe(state.expected);
    },
  );

  it("describes every event type, and only those", () => {
    const events = states.find((s) => s.block.name === "events")!.expected;
    for (const option of DomainEventSchema.options) expect(events).toContain(`### ${option.shape.type.value}\n`);
    expect(staleEventNotes()).toEqual([]);
  });

  it("lists every degradation", () => {
    const table = states.find((s) => s.block.name === "degradations")!.expected;
    for (const policy of Object.keys(DEGRADATIONS)) expect(table).toContain(`| \`${policy}\` |`);
  });
});
