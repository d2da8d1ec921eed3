import { mkdir, writeFile } from "node:fs/promises";
import { dirname, join } from "node:path";
import { fileURLToPath } from "node:url";
import type { Scenario } from "./scenarios.js";

/** What recording one scenario yields: its frames in order, and the temporary root to hide. */
export interface Recorded {
  frames: Array<{ d: "in" | "out"; f: unknown }>;
  root: string;
}

export const fixturesDir = (provider: string) => join(dirname(fileURLToPath(import.meta.url)), "fixtures", provider);

/**
 * Records each wanted scenario (all when none is named) with `recordOne` and writes its
 * transcript to test/replay/fixtures/<provider>/<scenario>.jsonl, the temporary root replaced
 * by `<root>`. Sets a failing exit code when any scenario failed.
 */
export async function recordScenarios(
  provider: string,
  scenarios: Record<string, Scenario>,
  wanted: string[],
  recordOne: (name: string, scenario: Scenario) => Promise<Recorded>,
): Promise<void> {
  const names = wanted.length > 0 ? wanted : Object.keys(scenarios);
  let failed = 0;
  for (const name of names) {
    const t0 = performance.now();
    try {
      const scenario = scenarios[name];
      if (!scenario) throw new Error(`unknown scenario ${name} (known: ${Object.keys(scenarios).join(", ")})`);
      const { frames, root } = await recordOne(name, scenario);
      const jsonl = frames.map((frame) => JSON.stringify(frame).replaceAll(root, "<root>")).join("\n") + "\n";
      if (jsonl.includes(root)) throw new Error(`${name}: the temporary root survived the replacement`);
      await mkdir(fixturesDir(provider), { recursive: true });
      await writeFile(join(fixturesDir(provider), `${name}.jsonl`), jsonl);
      console.info(
        `recorded ${provider} ${name}: ${frames.length} frames in ${(performance.now() - t0).toFixed(0)} ms`,
      );
    } catch (error) {
      failed++;
      console.error(`FAILED ${name}:`, error);
    }
  }
  process.exitCode = failed > 0 ? 1 : 0;
}
