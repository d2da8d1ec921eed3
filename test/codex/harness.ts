import { join } from "node:path";
import type { RuntimeOptions } from "../../src/index.js";
import type { ModelSimulator } from "../../src/simulator/index.js";
import { createCodexAdapter, type CodexAdapter, type CodexAdapterOptions } from "../../src/adapters/codex/adapter.js";
import { mkdir } from "node:fs/promises";
import { codexSimulatorOptions, installedCodexBinary } from "../../src/adapters/codex/transport.js";
import { simulatedWorld, type SimulatedWorld } from "../providers/world.js";

/**
 * The real Codex binary (the pinned @openai/codex) against the model simulator on 127.0.0.1,
 * with a temporary HOME, CODEX_HOME (no config file: the `model` option points Codex at the
 * simulator) and workspace per world. A missing binary throws: the
 * suite fails loudly, it is never skipped.
 */

export function codexBinary(): string {
  const binary = installedCodexBinary();
  if (!binary)
    throw new Error("the pinned @openai/codex binary is not installed: run `npm ci` (the Codex suite never skips)");
  return binary;
}

export type CodexWorld = SimulatedWorld<CodexAdapter>;

export function codexWorld(
  options: {
    /** The adapter's options over the harness's (a function: options that name the simulator). */
    adapter?: Partial<CodexAdapterOptions> | ((sim: { url: string }) => Partial<CodexAdapterOptions>);
    runtime?: Partial<RuntimeOptions>;
    extraProviders?: RuntimeOptions["providers"];
    simulator?: () => Promise<ModelSimulator>;
  } = {},
): Promise<CodexWorld> {
  const codexHome = (root: string) => join(root, "codex-home");
  return simulatedWorld({
    target: "codex",
    ...(options.simulator ? { simulator: options.simulator } : {}),
    runtime: { ...options.runtime, providers: { ...options.runtime?.providers, ...options.extraProviders } },
    // An empty provider home: the simulator's endpoint and settings go on the command line.
    prepare: async ({ root }) => void (await mkdir(codexHome(root), { recursive: true })),
    makeAdapter: ({ root, home }, sim) =>
      createCodexAdapter({
        binary: codexBinary(),
        codexHome: codexHome(root),
        home,
        ...codexSimulatorOptions(sim.url),
        approvalPolicy: "untrusted",
        ...(typeof options.adapter === "function" ? options.adapter(sim) : options.adapter),
      }),
  });
}

export { until } from "../support/runtime.js";

/** Model replies shared by the real-binary and replay scenarios. */
export const shell = (cmd: string) => ({
  tools: [
    {
      name: "exec_command",
      args: { cmd, sandbox_permissions: "require_escalated", justification: "needed for the test" },
    },
  ],
});
export const patch = (file: string, line: string) => ({
  tools: [
    {
      name: "apply_patch",
      custom: true as const,
      input: `*** Begin Patch\n*** Add File: ${file}\n+${line}\n*** End Patch\n`,
    },
  ],
});
/** A reply computed from the request: says whether `needle` reached the model. */
export const sawInNextRequest = (needle: string) => (req: { body: unknown }) => ({
  text: JSON.stringify(req.body).includes(needle) ? `saw ${needle}` : `missing ${needle}`,
});
