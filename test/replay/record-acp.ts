import { acpWorld, type AcpWorld } from "../acp/harness.js";
import { acpCases, acpScenarios } from "./acpScenarios.js";
import { recordScenarios, type Recorded } from "./record.js";

/**
 * Records ACP transcripts for the replay tests: runs each scenario against the real agent (Gemini CLI,
 * claude-agent-acp, codex-acp) and the model simulator (one agent process per scenario), keeping every frame to and
 * from the agent (the adapter's `tap`), in test/replay/fixtures/acp/<agent>/<scenario>.jsonl.
 *
 *   tsx test/replay/record-acp.ts [agent] [scenario...]
 *
 * No agent named: every agent, each with the named scenarios it has (all when none is named). The runtime's liveness
 * probe (`$/tiller/ping`) and its answer are left out: they come when a timer says, and the replay host answers them
 * itself. Paths are made portable: the world's temporary root is `<root>` (record.ts), and the recorder's working
 * directory, which the agent process inherits (Gemini names it in its permission requests), is `<cwd>`.
 */

const PROBE = "$/tiller/ping";
/** The working directory as it appears in a JSON string. */
const cwd = JSON.stringify(process.cwd()).slice(1, -1);
const portable = (frame: unknown, root: string): unknown =>
  // A root under the working directory would lose its own placeholder (and `/` is every path's): they stay.
  process.cwd() === "/" || root.startsWith(process.cwd())
    ? frame
    : (JSON.parse(JSON.stringify(frame).replaceAll(cwd, "<cwd>")) as unknown);

const args = process.argv.slice(2);
const named = acpCases.find((c) => c.name === args[0]);
const cases = named ? [named] : acpCases;
const wanted = named ? args.slice(1) : args;
// A name that is neither an agent nor any agent's scenario is a typo: said, never skipped in silence.
const unknown = named ? [] : wanted.filter((name) => !acpCases.some((c) => name in acpScenarios(c)));
let failed = unknown.length > 0;
if (failed)
  console.error(`unknown agent or scenario: ${unknown.join(", ")} (agents: ${acpCases.map((c) => c.name).join(", ")})`);

for (const c of cases) {
  const scenarios = acpScenarios(c);
  // Every agent, named scenarios: each agent records those it has.
  const mine = named ? wanted : wanted.filter((name) => name in scenarios);
  if (!named && wanted.length > 0 && mine.length === 0) continue;
  await recordScenarios(`acp/${c.name}`, scenarios, mine, async (name, scenario): Promise<Recorded> => {
    const frames: Recorded["frames"] = [];
    const probes = new Set<string>();
    const tap = (d: "in" | "out", line: string) => {
      let f: { id?: unknown; method?: unknown };
      try {
        f = JSON.parse(line) as typeof f;
      } catch {
        if (line.trim() !== "") console.warn(`${name}: skipped a non-JSON ${d} line: ${line.slice(0, 200)}`);
        return;
      }
      const id = JSON.stringify(f.id ?? null);
      if (d === "out" && f.method === PROBE) return void probes.add(id);
      if (d === "in" && f.method === undefined && probes.delete(id)) return;
      frames.push({ d, f });
    };
    let world: AcpWorld | null = null;
    try {
      world = await acpWorld(c.agent, { adapter: { tap }, ...(scenario.runtime ? { runtime: scenario.runtime } : {}) });
      const w = world;
      await scenario.run({ rt: w.rt, push: (...replies) => w.sim.push(...replies), workspace: w.workspace });
      // Closing is part of the transcript: whatever the runtime says on the way out replays too.
      await w.rt.close();
      // A scenario takes exactly the replies it scripts: one left over means the agent did not ask what was meant.
      if (w.sim.pending() > 0) throw new Error(`${name}: ${w.sim.pending()} scripted model replies were never taken`);
      return { frames: frames.map(({ d, f }) => ({ d, f: portable(f, w.root) })), root: w.root };
    } finally {
      await world?.cleanup();
    }
  });
  failed ||= process.exitCode === 1;
}
process.exitCode = failed ? 1 : 0;
