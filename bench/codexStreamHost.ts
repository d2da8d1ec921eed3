import { createInterface } from "node:readline";
import { answersOf, readRecording, turnLines, turnTemplate, type Frame } from "./codexStream.js";

/**
 * A bench-only `codex app-server`: answers the handshake and every other request from the
 * recorded transcript (as test/replay/codexReplayHost.ts does, without checking the client),
 * and answers each turn/start with a long streamed turn of real recorded frames
 * (codexStream.ts), written at full speed. Started through bench/codex-stream as the Codex
 * adapter's `binary`. Environment: BENCH_CODEX_FIXTURE, BENCH_CODEX_ROOT, BENCH_CODEX_TURNS (how many turns to make
 * ahead), BENCH_CODEX_REPEATS (how many times each message streams its recorded deltas over), BENCH_CODEX_COPIES
 * (agent message items per turn, a list: turn i takes entry i, the last entry after that).
 */

const fixture = process.env.BENCH_CODEX_FIXTURE;
const root = process.env.BENCH_CODEX_ROOT;
const copies = (process.env.BENCH_CODEX_COPIES ?? "").split(",").map(Number);
const repeats = Number(process.env.BENCH_CODEX_REPEATS ?? "1");
if (!fixture || !root || [...copies, repeats].some((n) => !Number.isInteger(n) || n < 1)) {
  process.stderr.write("codex-stream: BENCH_CODEX_FIXTURE, BENCH_CODEX_ROOT and BENCH_CODEX_COPIES are required\n");
  process.exit(1);
}

const recording = readRecording(fixture, root);
const blocks = answersOf(recording);
const template = turnTemplate(recording);
let turns = 0;

/** Lines go out in pieces of this many: a pipe write is synchronous on Linux, so the reader sets the pace. */
const PIECE = 256;
const pieces = (lines: readonly string[]): string[] => {
  const out: string[] = [];
  for (let i = 0; i < lines.length; i += PIECE) out.push(lines.slice(i, i + PIECE).join("\n") + "\n");
  return out;
};

function writeLines(lines: readonly string[]): void {
  for (const piece of pieces(lines)) process.stdout.write(piece);
}

/**
 * A turn's frames after its response. A provider's turn streams what its model sends, it does not make ten thousand
 * lines of text when asked: the turns the bench asks for (BENCH_CODEX_TURNS) are all made at start-up, before the
 * handshake's answer, so that this host's own work never shares the two cores with the runtime's reading of a turn
 * (a turn past those is made when asked).
 */
const prepare = (turn: number) => {
  const lines = turnLines(template, turn, copies[Math.min(turn, copies.length - 1)]!, null, repeats);
  return { response: lines[0]!, rest: pieces(lines.slice(1)) };
};
const made: Array<ReturnType<typeof prepare> | undefined> = Array.from(
  { length: Number(process.env.BENCH_CODEX_TURNS ?? "0") },
  (_, turn) => prepare(turn),
);

function answer(frame: Frame): void {
  if (frame.method === "turn/start") {
    const { response, rest } = made[turns] ?? prepare(turns);
    made[turns] = undefined; // written once: not kept
    process.stdout.write(`${JSON.stringify({ ...(JSON.parse(response) as Frame), id: frame.id })}\n`);
    for (const piece of rest) process.stdout.write(piece);
    turns++;
    return;
  }
  const block = blocks.find((b) => b.out.method === frame.method);
  if (!block) {
    if (frame.id !== undefined) writeLines([JSON.stringify({ id: frame.id, error: { code: -32601, message: "" } })]);
    return;
  }
  const recordedId = block.out.id;
  writeLines(
    block.answers.map((f) =>
      JSON.stringify(recordedId !== undefined && f.id === recordedId && !("method" in f) ? { ...f, id: frame.id } : f),
    ),
  );
}

createInterface({ input: process.stdin })
  .on("line", (line) => {
    if (line.trim() === "") return;
    const frame = JSON.parse(line) as Frame;
    answer(frame);
  })
  .on("close", () => process.exit(0));
