import { afterEach, beforeEach, describe, expect, it, vi } from "vitest";
import { ChunkPauses, TurnInterrupted } from "../../src/adapters/scripted/host/turnWaits.js";

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
