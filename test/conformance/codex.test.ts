import { describe, expect, it } from "vitest";
import type { ProviderAdapter } from "../../src/adapters/contract.js";
import { runConformance, type ConformanceReport } from "../../src/conformance/index.js";
import { codexConformanceWorld } from "./codexWorld.js";
import { expectConforms } from "./conforms.js";

/**
 * The conformance suite for the real Codex binary, offline against the model simulator: every field its record
 * claims is verified or not exercisable (explained in src/adapters/codex/GAP.md), none refuted. And the world's
 * evidence is Codex's own: the same binary behind an adapter that claims more than it does is refuted.
 */

const verdictOf = (report: ConformanceReport, field: string) => report.fields.find((f) => f.field === field)!;

/** The real adapter, except that it steers nothing and drops each turn's model and context before Codex sees them. */
function lying(adapter: ProviderAdapter): ProviderAdapter {
  const overrides: Partial<ProviderAdapter> = {
    steerRun: async () => {},
    sendRun: (input) => adapter.sendRun({ ...input, model: null, context: null }),
  };
  return new Proxy(adapter, {
    get(target, property) {
      if (property in overrides) return overrides[property as keyof ProviderAdapter];
      const value = Reflect.get(target, property, target) as unknown;
      return typeof value === "function" ? (value as (...a: unknown[]) => unknown).bind(target) : value;
    },
  });
}

describe("conformance: codex", () => {
  it("every claimed field verified or not exercisable, none refuted", async () => {
    await expectConforms(codexConformanceWorld(), 30_000);
  }, 600_000);

  it("an adapter over the same binary that steers nothing and drops models and context is refuted", async () => {
    const report = await runConformance({
      world: codexConformanceWorld({ name: "codex (lying)", wrap: lying }),
      timeoutMs: 30_000,
    });
    console.log(report.summary);
    expect(verdictOf(report, "turns.supportsActiveSteering")).toMatchObject({
      verdict: "refuted",
      detail: expect.stringContaining("the provider's turn saw []"),
    });
    expect(verdictOf(report, "sessions.supportsModelSwitchInSession")).toMatchObject({
      verdict: "refuted",
      detail: expect.stringContaining("told false"),
    });
    expect(verdictOf(report, "context.canConsumeHandoffSummaries")).toMatchObject({
      verdict: "refuted",
      detail: expect.stringContaining("carried none"),
    });
    expect(report.ok).toBe(false);
    // What it does not lie about still holds.
    expect(verdictOf(report, "turns.supportsInterrupt").verdict).toBe("verified");
    expect(verdictOf(report, "threads.canForkThread").verdict).toBe("verified");
  }, 600_000);
});
