/**
 * The Claude scenarios of the closing note measured twice on this machine: driving Claude
 * Code with the Agent SDK alone (one query with streaming input: first turn, a warm turn, an
 * interrupt) and through Tiller (host process, runtime, log), both against the model simulator.
 * Run: `npx tsx bench/claudeBare.ts`. Prints medians of 5; never part of the tests. `bench/startup.ts` imports
 * `claudeBare` and `claudeThroughTiller`.
 */
import { mkdir, mkdtemp, rm } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { query, type SDKMessage } from "@anthropic-ai/claude-agent-sdk";
import { userInbox } from "../src/adapters/claude/host/inbox.js";
import { startSimulatorInWorker } from "./simulatorWorker.js";
import { claudeWorld } from "../test/claude/harness.js";
import { pathToFileURL } from "node:url";
import { compare, median, TEXT_TURNS, throughTiller, timeTextTurns, type Timings } from "./compare.js";

/** Claude Code driven by the Agent SDK alone: `start` from `query()` to the first turn's result. */
export async function claudeBare(): Promise<Timings> {
  const sim = await startSimulatorInWorker();
  const root = await mkdtemp(join(tmpdir(), "claude-bare-"));
  const home = join(root, "home");
  await mkdir(home);
  const env = {
    PATH: process.env.PATH!,
    HOME: home,
    CLAUDE_CONFIG_DIR: join(home, ".claude"),
    ANTHROPIC_BASE_URL: sim.url,
    ANTHROPIC_API_KEY: "x",
    DISABLE_TELEMETRY: "1",
    CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC: "1",
  };
  const inbox = userInbox();
  const say = inbox.push;
  const waiters: Array<(m: SDKMessage) => void> = [];
  const next = (match: (m: SDKMessage) => boolean) =>
    new Promise<void>((resolve) => waiters.push((m) => match(m) && resolve()));
  const t0 = performance.now();
  const q = query({
    prompt: inbox.input,
    options: {
      cwd: root,
      env,
      includePartialMessages: true,
      canUseTool: async (_tool, updatedInput) => ({ behavior: "allow", updatedInput }),
    },
  });
  const reading = (async () => {
    for await (const m of q) for (const w of [...waiters]) w(m);
  })().catch(() => undefined);
  const result = () => next((m) => m.type === "result");
  sim.push({ text: "warm" }, ...Array.from({ length: TEXT_TURNS }, () => ({ text: "hi" })), {
    hang: true,
    text: "long",
  });
  let done = result();
  say("warm up");
  await done;
  const start = performance.now() - t0;
  const texts = await timeTextTurns(async () => {
    done = result();
    say("say hi");
    await done;
  });
  const streaming = next((m) => m.type === "stream_event" && m.event.type === "content_block_delta");
  done = result();
  say("long");
  await streaming;
  const t2 = performance.now();
  await q.interrupt();
  await done;
  const interrupt = performance.now() - t2;
  q.close();
  // Claude Code's exit is left out of the next measurement (bounded: the SDK may not end the stream).
  await Promise.race([reading, new Promise((resolve) => setTimeout(resolve, 2_000).unref())]);
  await sim.close();
  // Claude may still be writing its session files as it exits.
  await rm(root, { recursive: true, force: true, maxRetries: 10 });
  return { start, text: median(texts), texts, interrupt };
}

/** The same through Tiller; `prewarm`: the runtime opened with `prewarm: ["claude"]`, its host ready before timing. */
export const claudeThroughTiller = async ({ prewarm = false }: { prewarm?: boolean } = {}): Promise<Timings> =>
  throughTiller(await claudeWorld(prewarm ? { prewarm: ["claude"] } : {}, {}, startSimulatorInWorker), "claude", {
    prewarmed: prewarm,
  });

if (import.meta.url === pathToFileURL(process.argv[1] ?? "").href)
  await compare([
    ["bare SDK", claudeBare],
    ["through Tiller", () => claudeThroughTiller()],
    ["Tiller, prewarm", () => claudeThroughTiller({ prewarm: true })],
  ]);
