import type { ProviderAdapterEvent } from "../src/index.js";
import { createScriptedAdapter } from "../src/index.js";
import { turnText, workloadScript, type Workload } from "./workload.js";

/**
 * The raw limit: the exact frames the scripted adapter emits for the workload, as JSON
 * lines, parsed and dispatched with a trivial switch. Nothing else.
 */

/** Runs the workload on a separate adapter instance and records what `streamEvents()` yields. */
export async function captureFrames(w: Workload): Promise<string[]> {
  const adapter = createScriptedAdapter({ script: workloadScript(w), chunkDelayMs: 0 });
  const stream = adapter.streamEvents()[Symbol.asyncIterator]();
  const lines: string[] = [];
  const next = async (): Promise<ProviderAdapterEvent> => {
    const item = await stream.next();
    if (item.done) throw new Error("scripted adapter stream ended early");
    lines.push(JSON.stringify(item.value));
    return item.value;
  };
  const sessionId = "ses_bench";
  await adapter.startSession({ sessionId, cwd: process.cwd(), model: null });
  const thread = { ...(await adapter.ensureProviderThread({ sessionId, cwd: process.cwd() })), cwd: process.cwd() };
  await next(); // session.state ready
  for (let i = 0; i < w.turns; i++) {
    await adapter.sendRun({ sessionId, thread, text: turnText(i), context: null, model: null });
    while ((await next()).event.type !== "turn.terminal");
  }
  await adapter.close();
  return lines;
}

export interface RawResult {
  events: number;
  seconds: number;
  /** Consumed so the work cannot be optimised away. */
  checksum: number;
}

function parseAndDispatch(lines: readonly string[]): number {
  let deltas = 0,
    items = 0,
    turns = 0,
    other = 0,
    bytes = 0;
  for (const line of lines) {
    const frame = JSON.parse(line) as ProviderAdapterEvent;
    switch (frame.event.type) {
      case "item.delta":
        deltas++;
        bytes += frame.event.delta.length;
        break;
      case "item.started":
      case "item.completed":
        items++;
        break;
      case "turn.started":
      case "turn.terminal":
        turns++;
        break;
      default:
        other++;
    }
  }
  return deltas + items * 3 + turns * 5 + other * 7 + bytes;
}

/** One warm-up pass, then passes until at least `minSeconds` (and `minPasses`) have run. */
export function measureRaw(lines: readonly string[], minSeconds = 0.5, minPasses = 5): RawResult {
  let checksum = parseAndDispatch(lines);
  let passes = 0;
  const start = process.hrtime.bigint();
  let seconds = 0;
  while (passes < minPasses || seconds < minSeconds) {
    checksum ^= parseAndDispatch(lines);
    passes++;
    seconds = Number(process.hrtime.bigint() - start) / 1e9;
  }
  return { events: lines.length * passes, seconds, checksum };
}
