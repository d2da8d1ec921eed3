import { describe, expect, it } from "vitest";
import { assertConformance, runConformance } from "../../src/conformance/index.js";
import { claudeConformanceWorld } from "./claudeWorld.js";

/**
 * The conformance suite for Claude Code (the binary the pinned Agent SDK ships), offline against the model
 * simulator: every field its record claims is verified or not exercisable (explained in src/adapters/claude/GAP.md),
 * none refuted.
 */
describe("conformance: claude", () => {
  it("every claimed field verified or not exercisable, none refuted", async () => {
    const started = performance.now();
    const report = await runConformance({
      world: claudeConformanceWorld(),
      timeoutMs: 30_000,
      onPath: (path) => {
        if (path.error) console.log(`claude path ${path.events.join(" > ")}: ${path.error}`);
      },
    });
    const seconds = ((performance.now() - started) / 1000).toFixed(0);
    console.log(`${report.summary}\n${report.table}\nclaude conformance: ${report.paths.length} paths in ${seconds} s`);
    expect(report.paths.filter((p) => p.error)).toEqual([]);
    expect(report.fields.filter((f) => f.verdict === "refuted")).toEqual([]);
    expect(report.refuted).toBe(0);
    expect(() => assertConformance(report)).not.toThrow();
    expect(report.verified).toBeGreaterThan(0);
  }, 600_000);
});
