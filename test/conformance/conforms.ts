import { expect } from "vitest";
import type { ProviderAdapter } from "../../src/adapters/contract.js";
import {
  assertConformance,
  runConformance,
  type ConformanceReport,
  type ConformanceWorld,
} from "../../src/conformance/index.js";

/** What the real-binary worlds (Codex, Claude) take beside their simulator world. */
export interface RealWorldOptions {
  /** Name in the report (default: the provider's). */
  name?: string;
  /** Wraps each adapter the world makes: to test the suite on the real binary, e.g. with an adapter that lies. */
  wrap?: (adapter: ProviderAdapter) => ProviderAdapter;
}

/**
 * Runs the conformance suite on a world and expects what `npm run test:conformance` promises of every adapter: no
 * path broke, every field it claims verified or not exercisable, none refuted. Prints the summary line and the table.
 */
export async function expectConforms(world: ConformanceWorld, timeoutMs?: number): Promise<ConformanceReport> {
  const started = performance.now();
  const report = await runConformance({
    world,
    ...(timeoutMs ? { timeoutMs } : {}),
    onPath: (path) => {
      if (path.error) console.log(`${world.name} path ${path.events.join(" > ")}: ${path.error}`);
    },
  });
  const seconds = ((performance.now() - started) / 1000).toFixed(0);
  console.log(`${report.summary}\n${report.table}\n${world.name}: ${report.paths.length} paths in ${seconds} s`);
  expect(report.paths.filter((p) => p.error)).toEqual([]);
  expect(report.fields.filter((f) => f.verdict === "refuted")).toEqual([]);
  expect(report.refuted).toBe(0);
  expect(report.ok).toBe(true);
  expect(() => assertConformance(report)).not.toThrow();
  expect(report.verified).toBeGreaterThan(0);
  return report;
}
