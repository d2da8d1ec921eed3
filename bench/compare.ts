/** One provider scenario timed bare and through Tiller: the figures the closing notes quote. */
export interface Timings {
  start: number;
  text: number;
  interrupt: number;
}

const median = (xs: number[]) => [...xs].sort((a, b) => a - b)[Math.floor(xs.length / 2)]!;

/** Runs each way `times` times (sequentially) and prints the medians. */
export async function compare(ways: ReadonlyArray<readonly [string, () => Promise<Timings>]>, times = 5): Promise<void> {
  for (const [name, fn] of ways) {
    const runs: Timings[] = [];
    for (let i = 0; i < times; i++) runs.push(await fn());
    const m = (k: keyof Timings) => median(runs.map((r) => r[k])).toFixed(0);
    console.log(`${name.padEnd(16)} host start + first turn ${m("start")} ms, warm text turn ${m("text")} ms, interrupt -> terminal ${m("interrupt")} ms`);
  }
}
