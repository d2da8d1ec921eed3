import { join } from "node:path";
import { createScriptedAdapter } from "../adapters/scripted/host/provider.js";
import { keyedScript, type ScriptStep } from "../adapters/scripted/host/script.js";
import type { DomainEvent } from "../domain/events.js";
import { createRuntime, type TillerRuntime } from "../index.js";
import type { LogRecord } from "../runtime/store/eventLog.js";
import { demoProvider, type DemoProviderName } from "./demoProviders.js";
import { TranscriptPrinter, describe } from "./transcript.js";

/**
 * `tiller demo`: one session through streamed text, an approval, a todo plan (scripted
 * provider, and the ACP agents that share one), an interrupt and a queued follow-up, printed
 * as a transcript; on the scripted provider, or on a real provider binary (Codex, Claude Code)
 * or ACP agent (Gemini CLI, claude-agent-acp, codex-acp) against the model simulator.
 */

export interface DemoOptions {
  dataDir: string;
  /** Approve without asking. */
  yes: boolean;
  /** Ask in the terminal; when false (and not `yes`) the demo approves by itself and says so. */
  ask: ((question: string) => Promise<boolean>) | null;
  write: (text: string) => void;
  color: boolean;
  chunkDelayMs?: number;
  /** `scripted` (default), or a real provider (demoProviders.ts) against the model simulator. */
  provider?: "scripted" | DemoProviderName;
}

const fix: ScriptStep[] = [
  { type: "reasoning", text: "The date test fails only in UTC+ timezones, so the bug is local-vs-UTC." },
  {
    type: "todo",
    items: [
      { text: "Reproduce the failing test", status: "in_progress" },
      { text: "Use UTC in today()", status: "pending" },
      { text: "Re-run the tests", status: "pending" },
    ],
  },
  {
    type: "tool",
    name: "read_file",
    input: { path: "src/date.ts" },
    output: "export const today = () => new Date().toDateString();",
  },
  {
    type: "file_change",
    path: "src/date.ts",
    diff: "-new Date().toDateString()\n+new Date().toISOString().slice(0, 10)",
  },
  { type: "command", command: "npm test -- date", output: "✓ date.test.ts (3 tests)", approval: true },
  {
    type: "todo",
    items: [
      { text: "Reproduce the failing test", status: "completed" },
      { text: "Use UTC in today()", status: "completed" },
      { text: "Re-run the tests", status: "completed" },
    ],
  },
  { type: "text", text: "Fixed: today() now formats the date in UTC, and the date tests pass." },
];

const changelog: ScriptStep[] = [
  {
    type: "text",
    text: "## Changelog\n  - today() formats dates in UTC\n  - the date tests run in every timezone\n  - ",
    chunkSize: 6,
  },
  { type: "hang" },
];

const summary: ScriptStep[] = [{ type: "text", text: "One line: today() is now timezone-proof." }];

export async function runDemo(options: DemoOptions): Promise<{ eventLog: string; events: number; runs: string[] }> {
  const real =
    options.provider && options.provider !== "scripted" ? await demoProvider(options.provider, options.dataDir) : null;
  const adapter =
    real?.adapter ??
    createScriptedAdapter({
      chunkDelayMs: options.chunkDelayMs ?? 12,
      capabilities: { turns: { supportsActiveSteering: false } },
      script: keyedScript({ "failing date test": fix, changelog, summarize: summary }),
    });
  const target = options.provider ?? "scripted";
  const rt = await createRuntime({ dataDir: options.dataDir, providers: { [target]: adapter } });
  const printer = new TranscriptPrinter(options.write, options.color);
  let events = 0;
  const approvals: Promise<unknown>[] = [];
  rt.subscribe({ afterSeq: rt.head }, (record) => {
    events += 1;
    printer.print(asTodo(record));
    const event = record.event;
    if (event.type === "request.opened") approvals.push(decide(rt, event.requestId, describe(event.payload), options));
  });
  try {
    const { threadId } = await rt.createThread({
      providerTarget: target,
      title: "Demo: fix a date bug",
      ...(real ? { cwd: real.workspace } : {}),
    });
    const first = await rt.sendMessage({ threadId, text: "Fix the failing date test" });
    await rt.waitForRun(first.runId);

    const second = await rt.sendMessage({ threadId, text: "Write a long changelog for this fix" });
    // The simulator streams a hang's first chunk only; the scripted provider keeps streaming.
    await untilStreaming(rt, threadId, second.runId, real ? 1 : 8);
    const third = await rt.sendMessage({ threadId, text: "Then summarize it in one line", mode: "queue" });
    await rt.interrupt({ runId: second.runId });
    await rt.waitForRun(third.runId);
    await Promise.all(approvals);
    printer.end();
    const thread = await rt.readThread(threadId);
    options.write(`\nRuns: ${thread.runs.map((r) => `#${r.ordinal} ${r.status}`).join(", ")}\n`);
    return { eventLog: join(rt.dataDir, "events.jsonl"), events, runs: thread.runs.map((r) => r.status) };
  } finally {
    await rt.close();
    await real?.close();
  }
}

/** A provider's plan, printed as the scripted provider's todo list is (the transcript shows no plan updates). */
function asTodo(record: LogRecord<DomainEvent>): LogRecord<DomainEvent> {
  const event = record.event;
  if (event.type !== "plan.updated") return record;
  const items = event.steps.map(({ step, status }) => ({ text: step, status }));
  const { runId, threadId, nodeId } = event;
  return { ...record, event: { type: "todo.updated", threadId, runId, nodeId, items } };
}

async function decide(rt: TillerRuntime, requestId: string, what: string, options: DemoOptions): Promise<void> {
  let approve = true;
  if (options.yes) options.write(`    (--yes: approving ${what})\n`);
  else if (options.ask) approve = await options.ask(`  Approve ${what}? [Y/n] `);
  else options.write(`    (not interactive: approving ${what}; pass --yes to say so explicitly)\n`);
  await rt.respond({ requestId, response: { kind: "decision", decision: approve ? "accept" : "decline" } });
}

/**
 * Waits until the run has streamed some text, so the interrupt lands mid-stream. Counted from the
 * thread's first event: deltas that came before this call count too (a real provider may have
 * streamed its only chunk already).
 */
function untilStreaming(rt: TillerRuntime, threadId: string, runId: string, deltasWanted: number): Promise<void> {
  return new Promise((resolve) => {
    let deltas = 0;
    const stop = rt.subscribe({ threadId, afterSeq: 0 }, (r) => {
      if (r.event.type === "node.delta" && r.event.runId === runId && ++deltas === deltasWanted) {
        stop();
        resolve();
      }
    });
  });
}
