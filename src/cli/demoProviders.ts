import { mkdir } from "node:fs/promises";
import { join } from "node:path";
import { createClaudeAdapter } from "../adapters/claude/adapter.js";
import { createCodexAdapter } from "../adapters/codex/adapter.js";
import { codexSimulatorOptions } from "../adapters/codex/transport.js";
import type { ProviderAdapter } from "../adapters/contract.js";
import { startModelSimulator, type ModelSimulator, type Reply } from "../simulator/index.js";

/**
 * The demo on a real provider binary: the provider in a temporary home under the demo's data
 * directory, talking to the model simulator on 127.0.0.1 (no account, no network). The
 * simulator's replies script the same story as the scripted demo: a command that needs
 * approval, a long answer that gets interrupted, a one-line summary.
 */

export interface DemoProvider {
  adapter: ProviderAdapter;
  workspace: string;
  close(): Promise<void>;
}

const TESTS_PASS = "3 date tests pass";
const afterTests = (req: { body: unknown }) => ({
  text: JSON.stringify(req.body).includes(TESTS_PASS)
    ? "Fixed: today() now formats the date in UTC, and the date tests pass."
    : "The tests did not run.",
});
const changelog: Reply = {
  hang: true,
  text: "## Changelog\n  - today() formats dates in UTC\n  - the date tests run in every timezone\n  - ",
};
const summary: Reply = { text: "One line: today() is now timezone-proof." };

interface Setup {
  root: string;
  home: string;
  sim: ModelSimulator;
}

/** Per provider: the story's command in that provider's own tool, and its adapter in the temporary home. */
const SETUPS = {
  async codex({ root, home, sim }: Setup): Promise<ProviderAdapter> {
    await mkdir(join(root, "codex-home"), { recursive: true });
    const escalated = {
      cmd: `echo '${TESTS_PASS}'`,
      sandbox_permissions: "require_escalated",
      justification: "Re-run the date tests",
    };
    sim.push({ tools: [{ name: "exec_command", args: escalated }] }, afterTests, changelog, summary);
    return createCodexAdapter({
      codexHome: join(root, "codex-home"),
      home,
      ...codexSimulatorOptions(sim.url),
      approvalPolicy: "untrusted",
    });
  },
  async claude({ home, sim }: Setup): Promise<ProviderAdapter> {
    // Claude asks before a command that writes a file; a plain echo would run unasked.
    const bash = { command: `echo '${TESTS_PASS}' | tee test-results.txt`, description: "Re-run the date tests" };
    sim.push({ tools: [{ name: "Bash", args: bash }] }, afterTests, changelog, summary);
    return createClaudeAdapter({
      home,
      configDir: join(home, ".claude"),
      // The simulator takes any key: it is read from the adapter's env, handed to Claude only.
      model: { baseUrl: sim.url, apiKeyEnv: "SIMULATOR_API_KEY" },
      env: { SIMULATOR_API_KEY: "demo" },
    });
  },
};

export type DemoProviderName = keyof typeof SETUPS;
export const DEMO_PROVIDERS = Object.keys(SETUPS) as DemoProviderName[];

export async function demoProvider(name: DemoProviderName, dataDir: string): Promise<DemoProvider> {
  const sim = await startModelSimulator();
  const root = join(dataDir, name);
  const workspace = join(root, "workspace");
  const home = join(root, "home");
  await Promise.all([mkdir(workspace, { recursive: true }), mkdir(home, { recursive: true })]);
  const adapter = await SETUPS[name]({ root, home, sim });
  return { adapter, workspace, close: () => sim.close() };
}
