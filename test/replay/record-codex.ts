import { mkdir, writeFile } from "node:fs/promises";
import { dirname, join } from "node:path";
import { fileURLToPath } from "node:url";
import { codexWorld, type CodexWorld } from "../codex/harness.js";
import { scenarioNames, scenarios } from "./scenarios.js";

/**
 * Records Codex transcripts for the replay tests: runs each scenario against the real pinned
 * binary and the model simulator (one app-server process per scenario) and writes every frame
 * to and from the app-server as JSONL `{"d":"in"|"out","f":<frame>}` into
 * test/replay/fixtures/codex/<scenario>.jsonl, with the temporary root replaced by `<root>`.
 *
 *   tsx test/replay/record-codex.ts [scenario...]
 */

const fixturesDir = join(dirname(fileURLToPath(import.meta.url)), "fixtures", "codex");

async function record(name: string): Promise<number> {
  const scenario = scenarios[name];
  if (!scenario) throw new Error(`unknown scenario ${name} (known: ${scenarioNames.join(", ")})`);
  const frames: Array<{ d: "in" | "out"; f: unknown }> = [];
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
    const root = w.root;
    const jsonl = frames.map((frame) => JSON.stringify(frame).replaceAll(root, "<root>")).join("\n") + "\n";
    if (jsonl.includes(root)) throw new Error(`${name}: the temporary root survived the replacement`);
    await mkdir(fixturesDir, { recursive: true });
    await writeFile(join(fixturesDir, `${name}.jsonl`), jsonl);
    return frames.length;
  } finally {
    await world?.cleanup();
  }
}

const wanted = process.argv.slice(2);
const names = wanted.length > 0 ? wanted : scenarioNames;
let failed = 0;
for (const name of names) {
  const t0 = performance.now();
  try {
    const count = await record(name);
    console.info(`recorded ${name}: ${count} frames in ${(performance.now() - t0).toFixed(0)} ms`);
  } catch (error) {
    failed++;
    console.error(`FAILED ${name}:`, error);
  }
}
process.exitCode = failed > 0 ? 1 : 0;
