import { afterEach, beforeEach, describe, expect, it, vi } from "vitest";
import { createActor } from "xstate";
import { hostSupervisorMachine, type SupervisorEmitted } from "../../src/machines/hostSupervisor.js";
import { openSupervisor as open, POLICY, settled } from "./supervisorHarness.js";

/**
 * The host supervisor's decisions that its lifecycle suite (hostSupervisor.test.ts) leaves
 * open, pinned by the contract rather than by the code (issue 14, mutation testing): adoption
 * of a host a previous life of the runtime left running (the log names the generation it was
 * recorded under, so the adopted host keeps it; an adoption that fails is no crash of ours and
 * spends no restart budget), and the restart window (a crash within it delays the next start,
 * whichever earlier crashes have aged out). Host start and adoption are promises the test
 * settles; the clock is faked (TTLs, backoff and the window are clock boundaries).
 */

beforeEach(() => {
  vi.useFakeTimers({ toFake: ["setTimeout", "clearTimeout", "Date"] });
  vi.setSystemTime(1_000_000);
});
afterEach(() => vi.useRealTimers());

describe("host supervisor: adopting a host a previous runtime left running", () => {
  it(
    "takes up the surviving host under the generation it was recorded with, within the startup timeout, " +
      "and starts nothing",
    async () => {
      const h = open();
      h.send({ type: "ADOPT", generation: 7 });
      expect(h.state()).toBe("adopting");
      expect(h.adoptions).toEqual([expect.objectContaining({ generation: 7, timeoutMs: 5_000 })]);
      await h.settle(h.adoptions[0]);
      expect([h.state(), h.starts, h.emitted]).toEqual(["ready", [], [{ type: "ready", generation: 7 }]]);
    },
  );

  it(
    "the adopter and whoever acquires meanwhile each hold a lease; " + "the host idles out after the last release",
    async () => {
      const h = open();
      h.send({ type: "ADOPT", generation: 7 });
      h.send({ type: "ACQUIRE" });
      await h.settle(h.adoptions[0]);
      h.clear();
      h.send({ type: "RELEASE", generation: 7 });
      expect(h.state()).toBe("ready");
      h.send({ type: "RELEASE", generation: 7 });
      expect(h.state()).toBe("idleCountdown");
      await vi.advanceTimersByTimeAsync(POLICY.idleTtlMs);
      expect(h.emitted).toEqual([{ type: "stopProcess", generation: 7, reason: "idle" }]);
    },
  );

  it(
    "an adopted host that dies is lost under its recorded generation; " + "its replacement is the next one",
    async () => {
      const h = open();
      h.send({ type: "ADOPT", generation: 7 });
      await h.settle(h.adoptions[0]);
      h.clear();
      h.send({ type: "EXITED", generation: 7, reason: "host process exited (SIGKILL)" });
      expect(h.emitted).toEqual([{ type: "lost", generation: 7, reason: "host process exited (SIGKILL)" }]);
      h.send({ type: "ACQUIRE" });
      await vi.advanceTimersByTimeAsync(POLICY.backoffMs[0]!);
      expect(h.generations()).toEqual([8]);
    },
  );

  it(
    "an adoption that fails starts a fresh host at once, under the next generation, " +
      "without stopping anything (the registry reaps the old process) and without spending the restart budget",
    async () => {
      const h = open({ restartBudget: 0 });
      h.send({ type: "ADOPT", generation: 7 });
      await h.settle(h.adoptions[0], "connection refused");
      expect([h.state(), h.generations(), h.emitted]).toEqual(["starting", [8], []]);
      await h.settle(h.starts[0]);
      expect([h.state(), h.emitted]).toEqual(["ready", [{ type: "ready", generation: 8 }]]);
    },
  );

  it(
    "after a failed adoption, the first crash of the fresh host " + "waits the first backoff, not a later one",
    async () => {
      const h = open();
      h.send({ type: "ADOPT", generation: 7 });
      await h.settle(h.adoptions[0], "connection refused");
      await h.settle(h.starts[0]);
      h.send({ type: "EXITED", generation: 8, reason: "crash" });
      h.send({ type: "ACQUIRE" });
      await vi.advanceTimersByTimeAsync(POLICY.backoffMs[0]!);
      expect(h.generations()).toEqual([8, 9]);
    },
  );
});

describe("host supervisor: the restart window", () => {
  it("a recent crash delays the next start even when an older one has aged out of the window", async () => {
    const h = open({ restartBudget: 10 });
    h.send({ type: "ACQUIRE" });
    await h.settle(h.starts[0]);
    h.send({ type: "EXITED", generation: 1, reason: "first crash" });
    h.send({ type: "ACQUIRE" });
    await vi.advanceTimersByTimeAsync(POLICY.backoffMs[0]!);
    await h.settle(h.starts[1]);
    await vi.advanceTimersByTimeAsync(POLICY.restartWindowMs / 2);
    h.send({ type: "EXITED", generation: 2, reason: "second crash" });
    // The first crash ages out of the window; the second is still in it.
    await vi.advanceTimersByTimeAsync(POLICY.restartWindowMs / 2);
    h.send({ type: "ACQUIRE" });
    expect([h.state(), h.generations()]).toEqual(["backoff", [1, 2]]);
    await vi.advanceTimersByTimeAsync(POLICY.backoffMs[0]!);
    expect(h.generations()).toEqual([1, 2, 3]);
  });

  it("once every crash has aged out of the window, the next acquire starts at once", async () => {
    const h = open();
    h.send({ type: "ACQUIRE" });
    await h.settle(h.starts[0]);
    h.send({ type: "EXITED", generation: 1, reason: "crash" });
    await vi.advanceTimersByTimeAsync(POLICY.restartWindowMs + 1);
    h.send({ type: "ACQUIRE" });
    expect([h.state(), h.generations()]).toEqual(["starting", [1, 2]]);
  });

  /*
   * The window's edge, as hostSupervisor.test.ts fixes it ("once the failures age out of the window", exactly
   * restartWindowMs after the last one): a crash exactly restartWindowMs old has left it. The delay before a start,
   * the backoff and the budget read the same window.
   */
  it("a crash exactly one window old no longer delays the next start", async () => {
    const h = open();
    h.send({ type: "ACQUIRE" });
    await h.settle(h.starts[0]);
    h.send({ type: "EXITED", generation: 1, reason: "crash" });
    await vi.advanceTimersByTimeAsync(POLICY.restartWindowMs);
    h.send({ type: "ACQUIRE" });
    expect([h.state(), h.generations()]).toEqual(["starting", [1, 2]]);
  });

  it("a crash exactly one window old no longer counts against the budget", async () => {
    const h = open({ restartBudget: 0 });
    h.send({ type: "ACQUIRE" });
    await h.settle(h.starts[0], "handshake failed");
    expect(h.state()).toBe("unavailable");
    await vi.advanceTimersByTimeAsync(POLICY.restartWindowMs);
    h.send({ type: "ACQUIRE" });
    expect([h.state(), h.generations()]).toEqual(["starting", [1, 2]]);
  });

  it("a crash exactly one window old no longer lengthens the backoff", async () => {
    const h = open({ restartBudget: 5 });
    h.send({ type: "ACQUIRE" });
    await h.settle(h.starts[0]);
    h.send({ type: "EXITED", generation: 1, reason: "first crash" });
    h.send({ type: "ACQUIRE" });
    await vi.advanceTimersByTimeAsync(POLICY.backoffMs[0]!);
    await h.settle(h.starts[1]);
    await vi.advanceTimersByTimeAsync(1_000 - POLICY.backoffMs[0]!);
    h.send({ type: "EXITED", generation: 2, reason: "second crash" });
    // The first crash is now exactly one window old, the second 1 s old: one recent crash, the first backoff.
    await vi.advanceTimersByTimeAsync(POLICY.restartWindowMs - 1_000);
    h.send({ type: "ACQUIRE" });
    expect(h.state()).toBe("backoff");
    await vi.advanceTimersByTimeAsync(POLICY.backoffMs[0]!);
    expect(h.generations()).toEqual([1, 2, 3]);
  });

  it("a failed start's reason is the error the start rejected with, as the unavailable reason says", async () => {
    const h = open({ restartBudget: 0 });
    h.send({ type: "ACQUIRE" });
    await h.settle(h.starts[0], "handshake timed out");
    expect(h.emitted.at(-1)).toEqual({
      type: "unavailable",
      reason: expect.stringMatching(/^alpha: host restart budget spent .*last error: .*handshake timed out/),
    });
  });

  it("the unavailable reason names the budget and the window that were spent", async () => {
    const h = open({ restartBudget: 0, restartWindowMs: 45_000 });
    h.send({ type: "ACQUIRE" });
    await h.settle(h.starts[0], "handshake timed out");
    expect(h.emitted.at(-1)).toMatchObject({ reason: expect.stringMatching(/\b0 restarts\b.*\b45000 ms\b/) });
  });
});

describe("host supervisor: not wired to a registry", () => {
  it.each([
    ["start", { type: "ACQUIRE" } as const],
    ["adopt", { type: "ADOPT", generation: 7 } as const],
  ])("never reports a host it was not given the means to %s", async (_, event) => {
    const emitted: SupervisorEmitted[] = [];
    const actor = createActor(hostSupervisorMachine, {
      input: { hostKey: "alpha:0123", target: "alpha", policy: { ...POLICY, restartBudget: 0 } },
    });
    actor.on("*", (e) => emitted.push(e));
    actor.start();
    actor.send(event);
    await settled();
    await settled();
    expect(emitted.filter((e) => e.type === "ready")).toEqual([]);
    expect(actor.getSnapshot().value).toBe("unavailable");
  });
});
