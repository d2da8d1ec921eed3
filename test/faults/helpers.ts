import { mkdtemp, rm } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { sequentialIds, type RuntimeOptions, type ScriptStep } from "../../src/index.js";
import { createScriptedHostAdapter, type ScriptedHostOptions } from "../../src/adapters/scripted/adapter.js";
import { isRunning } from "../../src/runtime/hosts/process.js";
import type { Runtime } from "../../src/runtime/runtime.js";
import { openRuntime } from "../support/internals.js";

/** Shared by the fault tests: real host processes, a fresh data directory, every pid killed at the end. */

export const approval: ScriptStep[] = [
  { type: "text", text: "asking" },
  { type: "command", command: "rm -rf build", output: "", approval: true },
  { type: "text", text: " done" },
];
export const gated = (name: string): ScriptStep[] => [
  { type: "text", text: "working" },
  { type: "gate", name },
  { type: "text", text: " finished" },
];

export function hosted(options: ScriptedHostOptions = {}) {
  return createScriptedHostAdapter({ scripts: { "[ask]": approval, "[gate]": gated("g") }, ...options });
}

export async function openFaultRuntime(
  providers: RuntimeOptions["providers"],
  options: Partial<RuntimeOptions> = {},
): Promise<{ rt: Runtime; dataDir: string; cleanup: () => Promise<void> }> {
  const dataDir = options.dataDir ?? (await mkdtemp(join(tmpdir(), "tiller-faults-")));
  const rt = await openRuntime({ ids: sequentialIds(), ...options, dataDir, providers });
  return {
    rt,
    dataDir,
    cleanup: async () => {
      await rt.close();
      await rm(dataDir, { recursive: true, force: true });
    },
  };
}

export { isRunning as alive } from "../../src/runtime/hosts/process.js";

export { until } from "../support/runtime.js";

/** Measured time to a terminal state, printed for the closing note (never asserted). */
export function report(name: string, ms: number): void {
  console.info(`fault timing: ${name}: ${ms.toFixed(0)} ms`);
}

/** Kills a pid if it is still there (the tests' own cleanup of processes they started). */
export function killIfAlive(pid: number | null | undefined): void {
  if (pid && isRunning(pid)) process.kill(pid, "SIGKILL");
}
