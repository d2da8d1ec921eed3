import type { Runtime } from "../src/runtime/runtime.js";
import type { ModelSimulator } from "../src/simulator/index.js";
import { until } from "../test/support/runtime.js";

/** One provider scenario timed bare and through Tiller: the figures the closing notes quote. */
export interface Timings {
  start: number;
  /** The median of `texts`. */
  text: number;
  /** Each warm text turn of the run (TEXT_TURNS of them, one after another on the same thread). */
  texts: number[];
  interrupt: number;
  /** Bare Codex only: from the end of the app-server's handshake to the first turn's end (thread/start included). */
  firstTurnOnReadyHost?: number;
}

export const median = (xs: number[]) => [...xs].sort((a, b) => a - b)[Math.floor(xs.length / 2)]!;

/**
 * Warm text turns timed in each run. The provider's own turn varies by a good part of itself from one turn to the next
 * (Codex's, against the simulator: 50-80 ms): a few turns a run, and the median of them all, let the few milliseconds
 * Tiller adds show through that spread.
 */
export const TEXT_TURNS = 5;

/** Times `turn` TEXT_TURNS times in a row. */
export async function timeTextTurns(turn: () => Promise<unknown>): Promise<number[]> {
  const texts: number[] = [];
  for (let i = 0; i < TEXT_TURNS; i++) {
    const t = performance.now();
    await turn();
    texts.push(performance.now() - t);
  }
  return texts;
}

/** Runs each way `times` times (sequentially) and prints the medians. */
export async function compare(
  ways: ReadonlyArray<readonly [string, () => Promise<Timings>]>,
  times = 5,
): Promise<void> {
  for (const [name, fn] of ways) {
    const runs: Timings[] = [];
    for (let i = 0; i < times; i++) runs.push(await fn());
    const m = (k: "start" | "text" | "interrupt") => median(runs.map((r) => r[k])).toFixed(0);
    console.log(
      `${name.padEnd(16)} host start + first turn ${m("start")} ms, ` +
        `warm text turn ${m("text")} ms, interrupt -> terminal ${m("interrupt")} ms`,
    );
  }
}

/**
 * The same scenario through Tiller: a runtime with one real provider target against the simulator. `start` is timed
 * from the first `sendMessage` to its run's end: it includes the host's start (spawn, handshake, the provider's
 * session), unless the runtime was opened with `prewarm` for the target (the world's runtime options), in which case
 * the prewarmed host is waited for first, as an embedding whose user types a message a moment after open would.
 */
export async function throughTiller(
  world: {
    rt: Runtime;
    sim: ModelSimulator;
    workspace: string;
    adapter: { prewarm?(): Promise<void> };
    cleanup(): Promise<void>;
  },
  target: string,
  { prewarmed = false }: { prewarmed?: boolean } = {},
): Promise<Timings> {
  const { rt, sim } = world;
  try {
    // A second prewarm joins the runtime's own: it resolves once the host is ready.
    if (prewarmed) await world.adapter.prewarm!();
    const { threadId } = await rt.createThread({ providerTarget: target, cwd: world.workspace });
    sim.push({ text: "warm" }, ...Array.from({ length: TEXT_TURNS }, () => ({ text: "hi" })), {
      hang: true,
      text: "long",
    });
    const t0 = performance.now();
    await rt.waitForRun((await rt.sendMessage({ threadId, text: "warm up" })).runId);
    const start = performance.now() - t0; // (host start +) first turn
    const texts = await timeTextTurns(async () =>
      rt.waitForRun((await rt.sendMessage({ threadId, text: "say hi" })).runId),
    );
    const { runId } = await rt.sendMessage({ threadId, text: "long" });
    await until("streaming", () => rt.views.runs.get(runId)!.items.some((i) => i.kind === "assistant_message"));
    const t2 = performance.now();
    await rt.interrupt({ runId });
    await rt.waitForRun(runId);
    return { start, text: median(texts), texts, interrupt: performance.now() - t2 };
  } finally {
    await world.cleanup();
  }
}
