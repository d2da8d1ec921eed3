import { mkdir, mkdtemp, rm } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { createRuntime, sequentialIds, type RuntimeOptions } from "../../src/index.js";
import { createClaudeAdapter, type ClaudeAdapter, type ClaudeAdapterOptions } from "../../src/adapters/claude/adapter.js";
import { startModelSimulator, type ModelSimulator } from "../../src/simulator/index.js";
import type { Runtime } from "../../src/runtime/runtime.js";

/**
 * Claude Code (the binary the pinned Agent SDK ships) against the model simulator's Messages
 * dialect on 127.0.0.1, with a temporary HOME, Claude config directory and workspace, and the
 * telemetry and non-essential-traffic opt-outs.
 */
export interface ClaudeWorld {
  rt: Runtime;
  sim: ModelSimulator;
  adapter: ClaudeAdapter;
  workspace: string;
  /** The temporary directory everything lives in. */
  root: string;
  reopen(): Promise<Runtime>;
  cleanup(): Promise<void>;
}

/** `adapter`: extra adapter options (an `executable` such as the transcript recorder, its `env`). */
export async function claudeWorld(runtime: Partial<RuntimeOptions> = {}, adapter: Partial<ClaudeAdapterOptions> = {}): Promise<ClaudeWorld> {
  const root = await mkdtemp(join(tmpdir(), "tiller-claude-"));
  const sim = await startModelSimulator();
  const home = join(root, "home");
  const workspace = join(root, "workspace");
  await Promise.all([mkdir(home, { recursive: true }), mkdir(workspace, { recursive: true })]);
  const make = () =>
    createClaudeAdapter({ ...adapter, home, configDir: join(home, ".claude"), env: { ANTHROPIC_BASE_URL: sim.url, ANTHROPIC_API_KEY: "dummy-key", ...adapter.env } });
  const dataDir = join(root, "data");
  const first = make();
  let rt = await createRuntime({ dataDir, ids: sequentialIds(), ...runtime, providers: { claude: first, ...runtime.providers } });
  const world: ClaudeWorld = {
    rt,
    sim,
    adapter: first,
    workspace,
    root,
    async reopen() {
      await rt.close();
      world.adapter = make();
      rt = await createRuntime({ dataDir, ids: sequentialIds(), ...runtime, providers: { claude: world.adapter, ...runtime.providers } });
      world.rt = rt;
      return rt;
    },
    async cleanup() {
      await rt.close();
      await sim.close();
      await rm(root, { recursive: true, force: true });
    },
  };
  return world;
}

export { until } from "../helpers/runtime.js";
