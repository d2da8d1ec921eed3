/**
 * The Claude scenarios of the closing note measured twice on this machine: driving Claude
 * Code with the Agent SDK alone (one query with streaming input: first turn, a warm turn, an
 * interrupt) and through Tiller (host process, runtime, log), both against the model simulator.
 * Run: `npx tsx bench/claudeBare.ts`. Prints medians of 5; never part of the tests.
 */
import { mkdir, mkdtemp, rm } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { query, type SDKMessage, type SDKUserMessage } from "@anthropic-ai/claude-agent-sdk";
import { startModelSimulator } from "../src/simulator/index.js";
import { claudeWorld, until } from "../test/claude/harness.js";
import { compare, type Timings } from "./compare.js";

async function bare(): Promise<Timings> {
  const sim = await startModelSimulator();
  const root = await mkdtemp(join(tmpdir(), "claude-bare-"));
  const home = join(root, "home");
  await mkdir(home);
  const env = { PATH: process.env.PATH!, HOME: home, CLAUDE_CONFIG_DIR: join(home, ".claude"), ANTHROPIC_BASE_URL: sim.url, ANTHROPIC_API_KEY: "x", DISABLE_TELEMETRY: "1", CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC: "1" };
  const inbox: SDKUserMessage[] = [];
  let wake: (() => void) | null = null;
  async function* input(): AsyncGenerator<SDKUserMessage> {
    for (;;) {
      while (inbox.length > 0) yield inbox.shift()!;
      await new Promise<void>((resolve) => (wake = resolve));
    }
  }
  const say = (text: string) => {
    inbox.push({ type: "user", session_id: "", message: { role: "user", content: [{ type: "text", text }] }, parent_tool_use_id: null } as SDKUserMessage);
    wake?.();
  };
  const waiters: Array<(m: SDKMessage) => void> = [];
  const next = (match: (m: SDKMessage) => boolean) => new Promise<void>((resolve) => waiters.push((m) => match(m) && resolve()));
  const t0 = performance.now();
  const q = query({ prompt: input(), options: { cwd: root, env, includePartialMessages: true, canUseTool: async (_tool, updatedInput) => ({ behavior: "allow", updatedInput }) } });
  void (async () => {
    for await (const m of q) for (const w of [...waiters]) w(m);
  })().catch(() => undefined);
  const result = () => next((m) => m.type === "result");
  sim.push({ text: "warm" }, { text: "hi" }, { hang: true, text: "long" });
  let done = result();
  say("warm up");
  await done;
  const start = performance.now() - t0;
  const t1 = performance.now();
  done = result();
  say("say hi");
  await done;
  const text = performance.now() - t1;
  const streaming = next((m) => m.type === "stream_event" && m.event.type === "content_block_delta");
  done = result();
  say("long");
  await streaming;
  const t2 = performance.now();
  await q.interrupt();
  await done;
  const interrupt = performance.now() - t2;
  q.close();
  await sim.close();
  // Claude may still be writing its session files as it exits.
  await rm(root, { recursive: true, force: true, maxRetries: 10 });
  return { start, text, interrupt };
}

async function tiller(): Promise<Timings> {
  const w = await claudeWorld();
  try {
    const { threadId } = await w.rt.createThread({ providerTarget: "claude", cwd: w.workspace });
    w.sim.push({ text: "warm" }, { text: "hi" }, { hang: true, text: "long" });
    const t0 = performance.now();
    await w.rt.waitForRun((await w.rt.sendMessage({ threadId, text: "warm up" })).runId);
    const start = performance.now() - t0; // host start + first turn (Tiller starts the host lazily)
    const t1 = performance.now();
    await w.rt.waitForRun((await w.rt.sendMessage({ threadId, text: "say hi" })).runId);
    const text = performance.now() - t1;
    const { runId } = await w.rt.sendMessage({ threadId, text: "long" });
    await until("streaming", () => w.rt.views.runs.get(runId)!.items.some((i) => i.kind === "assistant_message"));
    const t2 = performance.now();
    await w.rt.interrupt({ runId });
    await w.rt.waitForRun(runId);
    return { start, text, interrupt: performance.now() - t2 };
  } finally {
    await w.cleanup();
  }
}

await compare([
  ["bare SDK", bare],
  ["through Tiller", tiller],
]);
