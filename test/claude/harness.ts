import { join } from "node:path";
import { createClaudeAdapter, type ClaudeAdapter, type ClaudeAdapterOptions } from "../../src/adapters/claude/adapter.js";
import type { RuntimeOptions } from "../../src/index.js";
import { simulatedWorld, type SimulatedWorld } from "../providers/world.js";

/**
 * Claude Code (the binary the pinned Agent SDK ships) against the model simulator's Messages
 * dialect on 127.0.0.1, with a temporary HOME, Claude config directory and workspace, and the
 * telemetry and non-essential-traffic opt-outs.
 */
export type ClaudeWorld = SimulatedWorld<ClaudeAdapter>;

/** `adapter`: extra adapter options (an `executable` such as the transcript recorder, its `env`). */
export function claudeWorld(runtime: Partial<RuntimeOptions> = {}, adapter: Partial<ClaudeAdapterOptions> = {}): Promise<ClaudeWorld> {
  return simulatedWorld({
    target: "claude",
    runtime,
    makeAdapter: ({ home }, sim) =>
      createClaudeAdapter({ ...adapter, home, configDir: join(home, ".claude"), env: { ANTHROPIC_BASE_URL: sim.url, ANTHROPIC_API_KEY: "dummy-key", ...adapter.env } }),
  });
}

export { until } from "../helpers/runtime.js";
