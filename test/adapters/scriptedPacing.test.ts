import { afterEach, beforeEach, describe, expect, it, vi } from "vitest";
import { createScriptedAdapter } from "../../src/adapters/scripted/host/provider.js";
import { ChunkPauses, StreamClock, TurnInterrupted } from "../../src/adapters/scripted/host/turnWaits.js";
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

  const pace = (chunkDelayMs: number) => ({ chunkDelayMs, chunksPerWake: 1, clock: new StreamClock() });

  /** Streams `count` chunks and says when each was emitted; `onChunk` runs as chunk i is emitted. */
  function timedStream(pauses: ChunkPauses, count: number, period: number, onChunk?: (i: number) => void) {
    const times: number[] = [];
    const done = pauses.stream(count, pace(period), (i) => {
      times.push(performance.now());
      onChunk?.(i);
    });
    return { times, done };
  }

  it("emits a chunk a period after the one before when on time", async () => {
    const start = performance.now();
    const { times, done } = timedStream(new ChunkPauses(new AbortController().signal), 3, 100);
    await vi.advanceTimersByTimeAsync(300);
    await done;
    expect(times).toEqual([start, start + 100, start + 200]);
  });

  it("after a stall, takes the next slot of its own cadence, not one period from now", async () => {
    const start = performance.now();
    // The process stalls for 250 ms right after the first chunk (the clock moves, no wake is due yet).
    const stall = (i: number) => i === 0 && vi.advanceTimersByTime(250);
    const { times, done } = timedStream(new ChunkPauses(new AbortController().signal), 3, 100, stall);
    await vi.advanceTimersByTimeAsync(400);
    await done;
    // Slots start + 100 and start + 200 were missed: the next is start + 300, 50 ms on, not 100 ms from the stall.
    expect(times).toEqual([start, start + 300, start + 400]);
  });

  it("an interrupt ends the stream in progress at once", async () => {
    const abort = new AbortController();
    const pauses = new ChunkPauses(abort.signal);
    expect(() => pauses.checkInterrupted()).not.toThrow();
    const { times, done } = timedStream(pauses, 3, 60_000);
    abort.abort();
    await expect(done).rejects.toBeInstanceOf(TurnInterrupted);
    expect(times).toHaveLength(1);
    await vi.advanceTimersByTimeAsync(120_000); // the wake that was due finds the stream ended: nothing more
    expect(times).toHaveLength(1);
    expect(() => pauses.checkInterrupted()).toThrow(TurnInterrupted);
  });

  it("keeps every stream's wakes on one timer, due ones in the order asked", async () => {
    const clock = new StreamClock();
    const woke: number[] = [];
    const start = performance.now();
    for (let i = 0; i < 100; i++) clock.at(start + 100 - (i % 10), () => woke.push(i));
    expect(vi.getTimerCount()).toBe(1);
    await vi.advanceTimersByTimeAsync(100);
    expect(woke).toHaveLength(100);
    // By due time first (i % 10 = 9 is due earliest), then in the order asked.
    const expected = Array.from({ length: 100 }, (_, i) => i).sort((a, b) => (b % 10) - (a % 10) || a - b);
    expect(woke).toEqual(expected);
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
