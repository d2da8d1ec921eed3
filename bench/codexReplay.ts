import { mkdir, mkdtemp, readFile, rm } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { createCodexAdapter } from "../src/adapters/codex/index.js";
import { createRuntime } from "../src/index.js";
import { CODEX_FIXTURE, readRecording, turnContent, turnLines, turnTemplate } from "./codexStream.js";

/**
 * A recorded real Codex transcript replayed at full speed through the real Codex adapter (its
 * stdio transport, its mapper) and the runtime, against the raw limit of the same frame lines.
 * The provider process is bench/codex-stream (codexStreamHost.ts). Turn 0 warms up (it also
 * starts the host, which the clock must not see); the measured turns follow, one after another.
 */

export interface CodexReplayResult {
  frames: number;
  seconds: number;
  /** Of all the measured frames, in passes between the turns. */
  rawFramesPerS: number;
  /** Each measured turn's frames/s / the raw frames/s of its own lines, parsed right after it. */
  turnRatios: number[];
  /** Mean bytes of a measured frame line (without its newline). */
  frameBytes: number;
}

/**
 * Whole turns before the measured ones: they start the host and warm up the code (the first turns of a process run at
 * up to half the speed of the later ones, before the JIT has optimized them; after three, the first measured turns
 * still ran up to a third slower), as the raw side's warm-up pass does.
 */
const WARMUP_TURNS = 6;

/**
 * Each measured turn is timed alone, from its send to its run's end, and followed (the runtime idle)
 * by a raw pass over its own frame lines: a pair sees about the same load of a shared machine.
 * `raw: false` leaves out the raw passes (for a profile of the replay alone); the raw figures are then NaN.
 */
export async function measureCodexReplay(
  turns: number,
  copies: number,
  repeats: number,
  raw = true,
): Promise<CodexReplayResult> {
  const root = await mkdtemp(join(tmpdir(), "tiller-bench-codex-"));
  try {
    const dirs = { workspace: join(root, "workspace"), home: join(root, "home"), codexHome: join(root, "codex-home") };
    await Promise.all(Object.values(dirs).map((d) => mkdir(d, { recursive: true })));
    const template = turnTemplate(readRecording(CODEX_FIXTURE, root));
    const measured = Array.from({ length: turns }, (_, i) => turnLines(template, WARMUP_TURNS + i, copies, 0, repeats));

    const adapter = createCodexAdapter({
      binary: new URL("./codex-stream", import.meta.url).pathname,
      codexHome: dirs.codexHome,
      home: dirs.home,
      env: {
        BENCH_CODEX_FIXTURE: CODEX_FIXTURE,
        BENCH_CODEX_ROOT: root,
        BENCH_CODEX_COPIES: String(copies),
        BENCH_CODEX_TURNS: String(WARMUP_TURNS + turns),
        BENCH_CODEX_REPEATS: String(repeats),
      },
      approvalPolicy: "untrusted",
    });
    const dataDir = join(root, "data");
    const runtime = await createRuntime({ dataDir, providers: { codex: adapter } });
    const perTurn: Array<{ seconds: number; rawSeconds: number }> = [];
    try {
      const { threadId } = await runtime.createThread({ providerTarget: "codex", cwd: dirs.workspace, title: "bench" });
      const send = async (text: string) => {
        const run = await runtime.waitForRun((await runtime.sendMessage({ threadId, text })).runId);
        if (run.status !== "completed") throw new Error(`codex replay: a run ended ${run.status}`);
      };
      for (let i = 0; i < WARMUP_TURNS; i++) await send(`warm-up ${i}`);
      if (raw) measureRawCodex(measured[0]!, 0.1); // warms up the raw side too
      for (let i = 0; i < turns; i++) {
        const start = process.hrtime.bigint();
        await send(`turn ${i + 1}`);
        const seconds = Number(process.hrtime.bigint() - start) / 1e9;
        const rawPerS = raw ? measureRawCodex(measured[i]!, 0.3).framesPerS : NaN;
        perTurn.push({ seconds, rawSeconds: measured[i]!.length / rawPerS });
      }
    } finally {
      await runtime.close();
    }
    const streamed = (WARMUP_TURNS + turns) * turnContent(template, copies, repeats).length;
    await checkLog(join(dataDir, "events.jsonl"), { items: (WARMUP_TURNS + turns) * copies, chars: streamed });

    const lines = measured.flat();
    const sum = (xs: number[]) => xs.reduce((a, b) => a + b, 0);
    const bytes = sum(lines.map((line) => Buffer.byteLength(line)));
    return {
      frames: lines.length,
      seconds: sum(perTurn.map((t) => t.seconds)),
      rawFramesPerS: lines.length / sum(perTurn.map((t) => t.rawSeconds)),
      turnRatios: perTurn.map((t) => t.rawSeconds / t.seconds),
      frameBytes: bytes / lines.length,
    };
  } finally {
    await rm(root, { recursive: true, force: true });
  }
}

/**
 * The log must hold what was streamed: one assistant message per streamed item (each under its own
 * id), and deltas that add up to the text the provider sent.
 */
async function checkLog(file: string, expected: { items: number; chars: number }): Promise<void> {
  let chars = 0;
  const items = new Set<string>();
  for (const line of (await readFile(file, "utf8")).split("\n")) {
    if (!line.includes('"node.delta"') && !line.includes('"node.started"')) continue;
    const event = (JSON.parse(line) as { event: { type: string; delta?: string; kind?: string; nodeId?: string } })
      .event;
    if (event.type === "node.delta") chars += event.delta?.length ?? 0;
    if (event.type === "node.started" && event.kind === "assistant_message") items.add(event.nodeId ?? "");
  }
  if (chars !== expected.chars || items.size !== expected.items)
    throw new Error(
      `codex replay: the log holds ${items.size} assistant messages and ${chars} characters of deltas, ` +
        `the provider streamed ${expected.items} and ${expected.chars}`,
    );
}

/** JSON.parse and a dispatch switch on the method of every frame line: frames per second (the checksum is consumed). */
export function measureRawCodex(lines: readonly string[], minSeconds = 0.5): { framesPerS: number; checksum: number } {
  const pass = () => {
    let deltas = 0,
      items = 0,
      turns = 0,
      other = 0;
    for (const line of lines) {
      const frame = JSON.parse(line) as { method?: string; params?: { delta?: string } };
      switch (frame.method) {
        case "item/agentMessage/delta":
          deltas += frame.params?.delta?.length ?? 0;
          break;
        case "item/started":
        case "item/completed":
          items++;
          break;
        case "turn/started":
        case "turn/completed":
          turns++;
          break;
        default:
          other++;
      }
    }
    return deltas + items * 3 + turns * 5 + other * 7;
  };
  let checksum = pass(); // warm-up
  let passes = 0;
  const start = process.hrtime.bigint();
  let seconds = 0;
  while (passes < 5 || seconds < minSeconds) {
    checksum ^= pass();
    passes++;
    seconds = Number(process.hrtime.bigint() - start) / 1e9;
  }
  return { framesPerS: (lines.length * passes) / seconds, checksum };
}
