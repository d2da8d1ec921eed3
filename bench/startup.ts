/**
 * Start-up through Tiller against the bare provider, real binaries against the model simulator (127.0.0.1), each way
 * run several times in one process, interleaved (bare, through Tiller with prewarm, through Tiller cold; then again),
 * so a busy moment of the machine weighs on every way alike. Medians. Never part of the tests.
 * Run alone: `npx tsx bench/startup.ts [runs]`.
 *
 * What each way times (`bench/compare.ts`):
 * - bare Claude: from `query()` (the Agent SDK already imported) to the first turn's result: Claude Code's start and
 *   its first turn. Bare Codex: from the spawn of `codex app-server` to `turn/completed` of the first turn.
 * - through Tiller, prewarm: the runtime opened with `prewarm: [target]` and its host ready (a real embedding opens
 *   the runtime before its user's first message), then from `sendMessage` to the run's end: the provider session,
 *   the thread, the turn (Claude Code's own start included, as in bare), through the runtime and its log.
 * - through Tiller, cold: no prewarm: the same, the host's start (spawn, handshake) included.
 */
import { pathToFileURL } from "node:url";
import { claudeBare, claudeThroughTiller } from "./claudeBare.js";
import { codexBare, codexThroughTiller, codexTurnPairs } from "./codexBare.js";
import { median, type Timings } from "./compare.js";

const round = (n: number) => Number(n.toPrecision(4));
/** Warm Codex turns taken in turn, each way (codex_turn_ratio). */
const TURN_PAIRS = 30;

export async function measureStartRatios(runs = 5): Promise<Record<string, number>> {
  const claude = { bare: [] as Timings[], warm: [] as Timings[], cold: [] as Timings[] };
  const codex = { bare: [] as Timings[], warm: [] as Timings[], cold: [] as Timings[] };
  for (let i = 0; i < runs; i++) {
    claude.bare.push(await claudeBare());
    claude.warm.push(await claudeThroughTiller({ prewarm: true }));
    claude.cold.push(await claudeThroughTiller());
    codex.bare.push(await codexBare());
    codex.warm.push(await codexThroughTiller({ prewarm: true }));
    codex.cold.push(await codexThroughTiller());
  }
  // Warm turns side by side, both sessions open at once, turns taken in turn (bench/codexBare.ts).
  const pairs = await codexTurnPairs(TURN_PAIRS);
  const m = (xs: Timings[], key: Exclude<keyof Timings, "texts">) => median(xs.map((x) => x[key] ?? Number.NaN));
  const ms = (xs: Timings[], key: Exclude<keyof Timings, "texts">) => Math.round(m(xs, key));
  const texts = (xs: Timings[]) => median(xs.flatMap((x) => x.texts));
  return {
    // Through Tiller with prewarm (host ready before the first sendMessage) / bare Agent SDK, start + first turn.
    claude_start_ratio: round(m(claude.warm, "start") / m(claude.bare, "start")),
    // The same without prewarm: the host's start (node, the host's modules, the SDK) on the first turn.
    claude_start_ratio_cold: round(m(claude.cold, "start") / m(claude.bare, "start")),
    // Through Tiller with prewarm (app-server started and initialized before the first sendMessage) / bare protocol
    // from spawn: below 1 where the spawn and handshake prewarm hides outweigh the runtime's own cost.
    codex_start_ratio: round(m(codex.warm, "start") / m(codex.bare, "start")),
    // Without prewarm: spawn + handshake + first turn through Tiller / the same on the bare protocol.
    codex_start_ratio_cold: round(m(codex.cold, "start") / m(codex.bare, "start")),
    // Like for like with a ready app-server on both sides: the first turn through Tiller with prewarm (session,
    // thread/start, turn) / bare from the end of the handshake (thread/start, turn): what the runtime adds to it.
    codex_first_turn_on_ready_host_ratio: round(m(codex.warm, "start") / m(codex.bare, "firstTurnOnReadyHost")),
    // A warm text turn (the second of the thread) through Tiller (every Tiller run, prewarmed or not) / bare.
    // A warm text turn through Tiller (prewarmed) / bare, the two taken in turn with both sessions open.
    codex_turn_ratio: round(median(pairs.tiller) / median(pairs.bare)),
    // The same from the runs above (each its own process, a minute apart at most): drift of the machine included.
    codex_turn_ratio_runs: round(texts([...codex.warm, ...codex.cold]) / texts(codex.bare)),
    // Every warm text turn of every run, each way: TEXT_TURNS a run (bench/compare.ts).
    claude_turn_ratio: round(texts([...claude.warm, ...claude.cold]) / texts(claude.bare)),
    startup_runs: runs,
    claude_bare_start_ms: ms(claude.bare, "start"),
    claude_tiller_prewarm_start_ms: ms(claude.warm, "start"),
    claude_tiller_cold_start_ms: ms(claude.cold, "start"),
    claude_bare_turn_ms: Math.round(texts(claude.bare)),
    claude_tiller_turn_ms: Math.round(texts([...claude.warm, ...claude.cold])),
    codex_bare_start_ms: ms(codex.bare, "start"),
    codex_tiller_prewarm_start_ms: ms(codex.warm, "start"),
    codex_tiller_cold_start_ms: ms(codex.cold, "start"),
    codex_bare_first_turn_on_ready_host_ms: ms(codex.bare, "firstTurnOnReadyHost"),
    codex_bare_turn_ms: Math.round(texts(codex.bare)),
    codex_tiller_turn_ms: Math.round(texts([...codex.warm, ...codex.cold])),
    codex_turn_pairs: TURN_PAIRS,
    codex_bare_turn_paired_ms: round(median(pairs.bare)),
    codex_tiller_turn_paired_ms: round(median(pairs.tiller)),
  };
}

if (import.meta.url === pathToFileURL(process.argv[1] ?? "").href) {
  const results = await measureStartRatios(Number(process.argv[2] ?? 5));
  for (const [key, value] of Object.entries(results)) console.log(`${key.padEnd(32)} ${value}`);
}
