import { codexWorld, type CodexWorld } from "../codex/harness.js";
import { recordScenarios, type Recorded } from "./record.js";
import { scenarios } from "./scenarios.js";

/**
 * Records Codex transcripts for the replay tests: runs each scenario against the real pinned
 * binary and the model simulator (one app-server process per scenario) and keeps every frame
 * to and from the app-server, in test/replay/fixtures/codex/<scenario>.jsonl.
 *
 *   tsx test/replay/record-codex.ts [scenario...]
 */

await recordScenarios("codex", scenarios, process.argv.slice(2), async (name, scenario): Promise<Recorded> => {
  const frames: Recorded["frames"] = [];
  const tap = (d: "in" | "out", line: string) => {
    try {
      frames.push({ d, f: JSON.parse(line) as unknown });
    } catch {
      console.warn(`${name}: skipped a non-JSON ${d} line: ${line.slice(0, 200)}`);
    }
  };
  let world: CodexWorld | null = null;
  try {
    world = await codexWorld({ adapter: { tap }, ...(scenario.runtime ? { runtime: scenario.runtime } : {}) });
    const w = world;
    await scenario.run({ rt: w.rt, push: (...replies) => w.sim.push(...replies), workspace: w.workspace });
    // Closing is part of the transcript: whatever the runtime says on the way out replays too.
    await w.rt.close();
    return { frames, root: w.root };
  } finally {
    await world?.cleanup();
  }
});
