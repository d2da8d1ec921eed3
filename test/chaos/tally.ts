import { appendFileSync } from "node:fs";

/**
 * What a chaos test exercised: properties checked, generated runs, processes killed, and the
 * violations it found (a test that finds one also fails). `npm run test:chaos` sums the tallies
 * of one run into its last line; outside that command (plain `vitest run`) they go nowhere.
 */
export interface ChaosTally {
  properties?: number;
  runs?: number;
  kills?: number;
  violations?: number;
}

export function tallyChaos(name: string, tally: ChaosTally): void {
  const file = process.env.TILLER_CHAOS_TALLY;
  if (file) appendFileSync(file, JSON.stringify({ name, ...tally }) + "\n");
}
