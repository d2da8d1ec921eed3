import { mkdir, mkdtemp, rm } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import type { ProviderAdapter } from "../../src/adapters/contract.js";
import { contextHeader } from "../../src/adapters/kit/context.js";
import type { TurnBehaviour, WorldRun } from "../../src/conformance/index.js";
import {
  startModelSimulator,
  type ModelSimulator,
  type ReplySpec,
  type SimulatorRequest,
} from "../../src/simulator/index.js";

/** What the real-binary conformance worlds (Codex, Claude) share: a path's temporary homes and model simulator. */

export interface RealWorldOptions {
  /** Name in the report (default: the provider's). */
  name?: string;
  /** Wraps each adapter the world makes: to test the suite on the real binary, e.g. with an adapter that lies. */
  wrap?: (adapter: ProviderAdapter) => ProviderAdapter;
}

/** How the adapter's context header starts, whatever the context's kind. */
export const CONTEXT = contextHeader("handoff").split("(")[0]!;

/** One path of a simulator world: its temporary directories, the behaviours set for its turns, the gates released. */
export interface SimulatorPath<D extends string> {
  /** The directories asked for, made under the path's temporary root. */
  dirs: Record<D, string>;
  /** The turns' behaviours, by the user text of the turn each is for. */
  behaviours: Map<string, TurnBehaviour>;
  released: Set<string>;
  /**
   * Starts the path's model simulator on 127.0.0.1, answering every request with `replyFor`; `shared` is the part of
   * the run every simulator world does alike (`next`, `release`, and a `close` that stops the simulator and removes
   * the temporary root).
   */
  start(
    replyFor: (request: SimulatorRequest) => ReplySpec,
  ): Promise<{ sim: ModelSimulator; shared: Pick<WorldRun, "next" | "release" | "close"> }>;
}

export async function openSimulatorPath<D extends string>(
  provider: string,
  names: readonly D[],
): Promise<SimulatorPath<D>> {
  const root = await mkdtemp(join(tmpdir(), `tiller-conformance-${provider}-`));
  const dirs = Object.fromEntries(names.map((name) => [name, join(root, name)])) as Record<D, string>;
  await Promise.all(Object.values<string>(dirs).map((d) => mkdir(d, { recursive: true })));
  const behaviours = new Map<string, TurnBehaviour>();
  const released = new Set<string>();
  return {
    dirs,
    behaviours,
    released,
    async start(replyFor) {
      const sim = await startModelSimulator({ sideReply: replyFor });
      const shared: Pick<WorldRun, "next" | "release" | "close"> = {
        next: (behaviour, { userText }) => void behaviours.set(userText, behaviour),
        release: (gate) => {
          released.add(gate);
          sim.releaseHang();
        },
        async close() {
          await sim.close();
          await rm(root, { recursive: true, force: true, maxRetries: 10 });
        },
      };
      return { sim, shared };
    },
  };
}
