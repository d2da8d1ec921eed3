import { afterEach, beforeEach, describe, expect, it, vi } from "vitest";
import { createScriptedAdapter } from "../../src/adapters/scripted/host/provider.js";
import { ChunkPauses, TurnInterrupted } from "../../src/adapters/scripted/host/turnWaits.js";
import { InvalidInputError } from "../../src/domain/errors.js";
import { loopTurns } from "../support/loopTurns.js";

/**
 * The scripted provider paces a stream's chunks on its own clock (the clock is a test double here): a stall of the
 * process it streams to makes it miss slots, never shifts the later ones, so streams never fall into step with each
 * other because they were all delayed by the same stall.
 */
describe("scripted chunk pacing", () => {
  beforeEach(() => vi.useFakeTimers({ toFake: ["setTimeout", "clearTimeout", "setImmediate", "performance"] }));
  afterEach(() => vi.useRealTimers());

  it("waits one period after the slot when on time", async () => {
    const pauses = new ChunkPauses(new AbortController().signal);
    const start = performance.now();
    const next = pauses.next(start, 100);
    await vi.advanceTimersByTimeAsync(100);
    expect(await next).toBe(start + 100);
  });

  it("after a stall, takes the next slot of its own cadence, not one period from now", async () => {
    const pauses = new ChunkPauses(new AbortController().signal);
    const start = performance.now();
    // The process stalled for 250 ms after the chunk of slot `start` (the clock moved, no pause was pending).
    vi.advanceTimersByTime(250);
    const next = pauses.next(start, 100);
    await vi.advanceTimersByTimeAsync(100);
    // Slots start + 100 and start + 200 were missed: the next is start + 300, 50 ms on, not 100 ms from now.
    expect(await next).toBe(start + 300);
    expect(performance.now()).toBe(start + 350);
  });

  it("an interrupt ends the pause in progress at once", async () => {
    const abort = new AbortController();
    const pauses = new ChunkPauses(abort.signal);
    expect(() => pauses.checkInterrupted()).not.toThrow();
    const pending = pauses.next(performance.now(), 60_000);
    abort.abort();
    await expect(pending).rejects.toBeInstanceOf(TurnInterrupted);
    await expect(pauses.wait(5)).rejects.toBeInstanceOf(TurnInterrupted);
    expect(() => pauses.checkInterrupted()).toThrow(TurnInterrupted);
  });
});

/**
 * How many chunks a streaming turn emits each time it wakes: the deltas of one wake reach the consumer in the same
 * macrotask. A macrotask counter (an immediate that re-arms itself, once per event-loop turn) tells the wakes apart.
 */
async function deltasPerWake(options: { chunksPerWake?: number }, chunks: number): Promise<number[]> {
  const adapter = createScriptedAdapter({
    ...options,
    script: () => [{ type: "text", text: "x".repeat(chunks * 3), chunkSize: 3 }],
  });
  const loop = loopTurns();
  try {
    const sessionId = "ses_pace";
    await adapter.startSession({ sessionId, cwd: process.cwd(), model: null });
    const thread = { ...(await adapter.ensureProviderThread({ sessionId, cwd: process.cwd() })), cwd: process.cwd() };
    await adapter.sendRun({ sessionId, thread, text: "go", context: null, model: null });
    const wakes = new Map<number, number>();
    for await (const { event } of adapter.streamEvents()) {
      if (event.type === "item.delta") wakes.set(loop.turn, (wakes.get(loop.turn) ?? 0) + 1);
      if (event.type === "turn.terminal") break;
    }
    return [...wakes.values()];
  } finally {
    loop.stop();
    await adapter.close();
  }
}

describe("scripted chunks per wake", () => {
  it("streams one chunk per wake by default", async () => {
    expect(await deltasPerWake({}, 5)).toEqual([1, 1, 1, 1, 1]);
  });

  it("streams chunksPerWake chunks each time it wakes, the rest in the last wake", async () => {
    expect(await deltasPerWake({ chunksPerWake: 4 }, 10)).toEqual([4, 4, 2]);
  });

  it("refuses a pace that is not one", () => {
    for (const chunksPerWake of [0, -1, 1.5, Number.NaN])
      expect(() => createScriptedAdapter({ chunksPerWake })).toThrow(InvalidInputError);
    expect(() => createScriptedAdapter({ chunkDelayMs: -1 })).toThrow(InvalidInputError);
  });
});
