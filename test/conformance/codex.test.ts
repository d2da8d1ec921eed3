import { describe, expect, it } from "vitest";
import type { ProviderAdapter } from "../../src/adapters/contract.js";
import { assertConformance, runConformance, type ConformanceReport } from "../../src/conformance/index.js";
import { codexConformanceWorld } from "./codexWorld.js";

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
    const started = performance.now();
    const report = await runConformance({
      world: codexConformanceWorld(),
      timeoutMs: 30_000,
      onPath: (path) => {
        if (path.error) console.log(`codex path ${path.events.join(" > ")}: ${path.error}`);
      },
    });
    const seconds = ((performance.now() - started) / 1000).toFixed(0);
    console.log(`${report.summary}\n${report.table}\ncodex conformance: ${report.paths.length} paths in ${seconds} s`);
    expect(report.paths.filter((p) => p.error)).toEqual([]);
    expect(report.fields.filter((f) => f.verdict === "refuted")).toEqual([]);
    expect(report.refuted).toBe(0);
    expect(() => assertConformance(report)).not.toThrow();
    expect(report.verified).toBeGreaterThan(0);
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
