import { mkdir } from "node:fs/promises";
import { join } from "node:path";
import { createCodexAdapter } from "../adapters/codex/adapter.js";
import { writeSimulatorCodexHome } from "../adapters/codex/config.js";
import type { ProviderAdapter } from "../adapters/contract.js";
import { startModelSimulator } from "../simulator/index.js";

/**
 * The demo on the real Codex binary: `codex app-server` in a temporary provider home under
 * the demo's data directory, talking to the model simulator on 127.0.0.1 (no account, no
 * network). The simulator's replies script the same story as the scripted demo.
 */
export async function codexDemoProvider(dataDir: string): Promise<{ adapter: ProviderAdapter; workspace: string; close: () => Promise<void> }> {
  const sim = await startModelSimulator();
  const root = join(dataDir, "codex");
  const workspace = join(root, "workspace");
  await Promise.all([mkdir(workspace, { recursive: true }), mkdir(join(root, "home"), { recursive: true })]);
  await writeSimulatorCodexHome(join(root, "codex-home"), sim.url);
  sim.push(
    { tools: [{ name: "exec_command", args: { cmd: "echo '3 date tests pass'", sandbox_permissions: "require_escalated", justification: "Re-run the date tests" } }] },
    (req) => ({ text: JSON.stringify(req.body).includes("3 date tests pass") ? "Fixed: today() now formats the date in UTC, and the date tests pass." : "The tests did not run." }),
    { hang: true, text: "## Changelog\n  - today() formats dates in UTC\n  - the date tests run in every timezone\n  - " },
    { text: "One line: today() is now timezone-proof." },
  );
  const adapter = createCodexAdapter({
    codexHome: join(root, "codex-home"),
    home: join(root, "home"),
    env: { SIMULATOR_API_KEY: "demo" },
    approvalPolicy: "untrusted",
  });
  return { adapter, workspace, close: () => sim.close() };
}
