import { afterEach, beforeEach, describe, expect, it, vi } from "vitest";
import { TurnWatchdog } from "../../src/runtime/watchdog.js";
import { ControlledProvider } from "../chaos/controlledProvider.js";
import { capabilitiesOf, STRONG_CHOICE } from "../chaos/generators.js";
import { tempDir } from "../support/files.js";
import { openRuntime } from "../support/internals.js";
import { nextEvent } from "../support/runtime.js";

/**
 * The watchdog counts a turn's silence from the last thing it said, not from when it was watched: a turn that keeps
 * speaking more often than the silence limit is never reported, one that goes quiet is, once the full limit has passed
 * since it last spoke; so with a runtime's turns, streamed or silent. On vitest's fake clock (timers and the
 * watchdog's clock): no real time passes.
 */

const SILENCE_MS = 1_000;
afterEach(() => vi.useRealTimers());

function watchdog() {
  const silent: string[] = [];
  const dog = new TurnWatchdog(
    SILENCE_MS,
    (attemptId) => silent.push(attemptId),
    () => Date.now(),
  );
  return { dog, silent };
}

describe("the turn watchdog on a fake clock", () => {
  beforeEach(() => vi.useFakeTimers({ toFake: ["setTimeout", "clearTimeout", "Date"] }));

  it("never reports a turn that speaks more often than the limit; reports it a full limit after it stops", () => {
    const { dog, silent } = watchdog();
    dog.watch("speaking");
    for (let i = 0; i < 20; i++) {
      vi.advanceTimersByTime(SILENCE_MS * 0.6);
      dog.touch("speaking");
    }
    // 12 limits since it was watched, never one since it last spoke.
    expect(silent).toEqual([]);
    vi.advanceTimersByTime(SILENCE_MS - 1);
    expect(silent).toEqual([]);
    vi.advanceTimersByTime(1);
    expect(silent).toEqual(["speaking"]);
    dog.close();
  });

  it("reports a silent turn once the limit passed, beside one that keeps speaking", () => {
    const { dog, silent } = watchdog();
    dog.watch("quiet");
    dog.watch("speaking");
    vi.advanceTimersByTime(SILENCE_MS / 2);
    dog.touch("speaking");
    vi.advanceTimersByTime(SILENCE_MS / 2 - 1);
    expect(silent).toEqual([]);
    vi.advanceTimersByTime(1);
    expect(silent).toEqual(["quiet"]);
    for (let i = 0; i < 5; i++) {
      dog.touch("speaking");
      vi.advanceTimersByTime(SILENCE_MS - 1);
    }
    expect(silent).toEqual(["quiet"]);
    dog.close();
  });
});

describe("a runtime's turns on a fake clock", () => {
  it("a turn that keeps streaming is never failed for silence; once it stops, it fails as turn_silent", async () => {
    const { dir, cleanup } = await tempDir("tiller-watchdog-clock-");
    // No isTurnAlive: the provider cannot vouch for a silent turn, which fails at once.
    const provider = new ControlledProvider(
      capabilitiesOf(STRONG_CHOICE),
      { threadRef: "pthread-1", turnRef: () => "turn-1" },
      true,
    );
    const rt = await openRuntime({
      dataDir: dir,
      providers: { c: provider },
      groupCommitMs: 0,
      sessionIdleMs: null,
      turnSilenceMs: SILENCE_MS,
    });
    try {
      const { threadId } = await rt.createThread({ providerTarget: "c" });
      // From the send on (the watchdog arms there), its timers and its clock (performance.now) are the fake ones; the
      // log, with no group window, waits on no timer.
      vi.useFakeTimers({ toFake: ["setTimeout", "clearTimeout", "performance"] });
      const { runId } = await rt.sendMessage({ threadId, text: "keep talking" });
      await nextEvent(rt, "run.state", (e) => e.runId === runId && e.status === "running");
      const sessionId = provider.sessions[0]!;
      const frame = (event: Record<string, unknown>) => ({
        sessionId,
        event: { threadRef: "pthread-1", turnRef: "turn-1", ...event },
      });
      const item = { itemRef: "item-1", kind: "assistant_message" };
      await provider.deliver(frame({ type: "turn.started" }));
      await provider.deliver(frame({ type: "item.started", ...item }));
      for (let i = 0; i < 12; i++) {
        vi.advanceTimersByTime(SILENCE_MS * 0.6);
        await provider.deliver(frame({ type: "item.delta", ...item, stream: "text", delta: `${i} ` }));
      }
      await rt.readThread(threadId);
      expect(rt.views.runs.get(runId)!.status).toBe("running");
      vi.advanceTimersByTime(SILENCE_MS);
      const run = await rt.waitForRun(runId);
      expect([run.status, run.failure?.failureClass]).toEqual(["failed", "turn_silent"]);
    } finally {
      vi.useRealTimers();
      await rt.close();
      await cleanup();
    }
  });
});
