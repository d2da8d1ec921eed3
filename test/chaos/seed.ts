import type fc from "fast-check";

/**
 * The seed and scale of a chaos property run: a random seed, printed in the test title, unless
 * TILLER_CHAOS_SEED replays one (with TILLER_CHAOS_PATH, the failing path fast-check reported);
 * TILLER_CHAOS_RUNS scales the number of generated cases.
 */
export const seed = process.env.TILLER_CHAOS_SEED
  ? Number(process.env.TILLER_CHAOS_SEED)
  : Math.floor(Math.random() * 2 ** 31);
const path = process.env.TILLER_CHAOS_PATH;
const scale = Number(process.env.TILLER_CHAOS_RUNS ?? 1);

/** `numRuns` scaled by TILLER_CHAOS_RUNS (at least 1). */
export const scaled = (numRuns: number): number => Math.max(1, Math.round(numRuns * scale));

/** fast-check parameters: the run's seed (and replay path), `numRuns` scaled. */
export const params = (numRuns: number): fc.Parameters<unknown> => ({
  seed,
  ...(path ? { path } : {}),
  numRuns: scaled(numRuns),
});
