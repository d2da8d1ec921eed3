import { mkdir, mkdtemp, rm } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { createRuntime, sequentialIds, type RuntimeOptions } from "../../src/index.js";
import { createCodexAdapter, type CodexAdapter, type CodexAdapterOptions } from "../../src/adapters/codex/adapter.js";
import { installedCodexBinary, writeSimulatorCodexHome } from "../../src/adapters/codex/config.js";
import { startModelSimulator, type ModelSimulator } from "../../src/simulator/index.js";
import type { Runtime } from "../../src/runtime/runtime.js";

/**
 * The real Codex binary (the pinned @openai/codex) against the model simulator on 127.0.0.1,
 * with a temporary HOME, CODEX_HOME and workspace per world. A missing binary throws: the
 * suite fails loudly, it is never skipped.
 */

export function codexBinary(): string {
  const binary = installedCodexBinary();
  if (!binary) throw new Error("the pinned @openai/codex binary is not installed: run `npm ci` (the Codex suite never skips)");
  return binary;
}

export interface CodexWorld {
  rt: Runtime;
  sim: ModelSimulator;
  adapter: CodexAdapter;
  root: string;
  workspace: string;
  dataDir: string;
  /** Opens another runtime (a new host process) on the same data directory and provider home. */
  reopen(options?: Partial<RuntimeOptions>): Promise<Runtime>;
  cleanup(): Promise<void>;
}

export async function codexWorld(options: { adapter?: Partial<CodexAdapterOptions>; runtime?: Partial<RuntimeOptions>; extraProviders?: RuntimeOptions["providers"] } = {}): Promise<CodexWorld> {
  const root = await mkdtemp(join(tmpdir(), "tiller-codex-"));
  const sim = await startModelSimulator();
  const codexHome = join(root, "codex-home");
  const home = join(root, "home");
  const workspace = join(root, "workspace");
  await Promise.all([mkdir(home, { recursive: true }), mkdir(workspace, { recursive: true })]);
  await writeSimulatorCodexHome(codexHome, sim.url);
  const dataDir = join(root, "data");
  const makeAdapter = () => createCodexAdapter({ binary: codexBinary(), codexHome, home, env: { SIMULATOR_API_KEY: "dummy" }, approvalPolicy: "untrusted", ...options.adapter });
  const adapter = makeAdapter();
  let rt = await createRuntime({ dataDir, providers: { codex: adapter, ...options.extraProviders }, ids: sequentialIds(), ...options.runtime });
  const world: CodexWorld = {
    rt,
    sim,
    adapter,
    root,
    workspace,
    dataDir,
    async reopen(more = {}) {
      await rt.close();
      rt = await createRuntime({ dataDir, providers: { codex: makeAdapter() }, ids: sequentialIds(), ...options.runtime, ...more });
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

/** Model replies shared by the real-binary and replay scenarios. */
export const shell = (cmd: string) => ({ tools: [{ name: "exec_command", args: { cmd, sandbox_permissions: "require_escalated", justification: "needed for the test" } }] });
export const patch = (file: string, line: string) => ({ tools: [{ name: "apply_patch", custom: true as const, input: `*** Begin Patch\n*** Add File: ${file}\n+${line}\n*** End Patch\n` }] });
/** A reply computed from the request: says whether `needle` reached the model. */
export const sawInNextRequest = (needle: string) => (req: { body: unknown }) => ({ text: JSON.stringify(req.body).includes(needle) ? `saw ${needle}` : `missing ${needle}` });
