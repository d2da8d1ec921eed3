import { readFile, rm } from "node:fs/promises";
import { tmpdir } from "node:os";
import { dirname, join } from "node:path";
import { fileURLToPath } from "node:url";
import { claudeWorld, type ClaudeWorld } from "../claude/harness.js";
import { claudeScenarios } from "./claudeScenarios.js";
import { recordScenarios, type Recorded } from "./record.js";

/**
 * Records Claude Code transcripts for the replay tests: runs each scenario against the binary
 * the pinned Agent SDK ships and the model simulator, with `claude-record` between the SDK and
 * the binary keeping every stream-json line both ways, in
 * test/replay/fixtures/claude/<scenario>.jsonl.
 *
 *   tsx test/replay/record-claude.ts [scenario...]
 */

const shim = join(dirname(fileURLToPath(import.meta.url)), "claude-record");

await recordScenarios("claude", claudeScenarios, process.argv.slice(2), async (name, scenario): Promise<Recorded> => {
  let world: ClaudeWorld | null = null;
  // The shim learns where to write from its environment, set before the world (and its root) exists.
  const to = join(tmpdir(), `tiller-claude-record-${process.pid}-${name}.jsonl`);
  try {
    world = await claudeWorld(scenario.runtime ?? {}, { executable: shim, env: { CLAUDE_RECORD_TO: to } });
    const w = world;
    await scenario.run({ rt: w.rt, push: (...replies) => w.sim.push(...replies), workspace: w.workspace });
    await w.rt.close();
    const text = await readFile(to, "utf8");
    const frames = text
      .split("\n")
      .filter((l) => l.trim() !== "")
      .map((l) => JSON.parse(l) as Recorded["frames"][number]);
    return { frames, root: w.root };
  } finally {
    await world?.cleanup();
    await rm(to, { force: true });
  }
});
