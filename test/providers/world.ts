import { mkdir, mkdtemp, rm } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import type { ProviderAdapter } from "../../src/adapters/contract.js";
import { sequentialIds, type RuntimeOptions } from "../../src/index.js";
import type { Runtime } from "../../src/runtime/runtime.js";
import { startModelSimulator, type ModelSimulator } from "../../src/simulator/index.js";
import { openRuntime } from "../support/internals.js";

/**
 * A real provider binary under a runtime, against the model simulator on 127.0.0.1, in a
 * temporary directory of its own: `home` (the provider's HOME), `workspace` (the threads'
 * cwd) and `data` (the runtime's). Each suite's harness says how to make its adapter.
 */

export interface SimulatedWorld<A extends ProviderAdapter> {
  rt: Runtime;
  sim: ModelSimulator;
  /** The adapter of the current runtime (a new one after `reopen`). */
  adapter: A;
  /** The temporary directory everything lives in. */
  root: string;
  home: string;
  workspace: string;
  /**
   * Opens another runtime, with a new adapter (so a new host process), on the same data directory and provider home.
   */
  reopen(): Promise<Runtime>;
  cleanup(): Promise<void>;
}

export interface WorldSpec<A extends ProviderAdapter> {
  /** The provider target's id, and the temporary directory's prefix. */
  target: string;
  /** Prepares the provider home once (e.g. a config file pointing at the simulator). */
  prepare?(dirs: { root: string; home: string }, sim: ModelSimulator): Promise<void>;
  makeAdapter(dirs: { root: string; home: string }, sim: ModelSimulator): A;
  /** Runtime options; its `providers` join the target's. */
  runtime?: Partial<RuntimeOptions>;
  /** Starts the model simulator (default: in this process). */
  simulator?: () => Promise<ModelSimulator>;
}

export async function simulatedWorld<A extends ProviderAdapter>(spec: WorldSpec<A>): Promise<SimulatedWorld<A>> {
  const root = await mkdtemp(join(tmpdir(), `tiller-${spec.target}-`));
  const sim = await (spec.simulator ?? startModelSimulator)();
  const dirs = { root, home: join(root, "home") };
  const workspace = join(root, "workspace");
  await Promise.all([mkdir(dirs.home, { recursive: true }), mkdir(workspace, { recursive: true })]);
  await spec.prepare?.(dirs, sim);
  const open = (adapter: A) =>
    openRuntime({
      dataDir: join(root, "data"),
      ids: sequentialIds(),
      ...spec.runtime,
      providers: { [spec.target]: adapter, ...spec.runtime?.providers },
    });
  const adapter = spec.makeAdapter(dirs, sim);
  const world: SimulatedWorld<A> = {
    rt: await open(adapter),
    sim,
    adapter,
    root,
    home: dirs.home,
    workspace,
    async reopen() {
      await world.rt.close();
      world.adapter = spec.makeAdapter(dirs, sim);
      world.rt = await open(world.adapter);
      return world.rt;
    },
    async cleanup() {
      await world.rt.close();
      await sim.close();
      // The provider may still be writing its session files as it exits.
      await rm(root, { recursive: true, force: true, maxRetries: 10 });
    },
  };
  return world;
}
