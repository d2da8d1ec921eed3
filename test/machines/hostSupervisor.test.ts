import { afterEach, beforeEach, describe, expect, it, vi } from "vitest";
import type { SupervisorPolicy } from "../../src/machines/hostSupervisor.js";
import { openSupervisor as open, POLICY } from "./supervisorHarness.js";

/**
 * The host supervisor alone: one host process per target, with its start (spawn + handshake)
 * as promises the test settles and the clock faked (the idle TTL and the restart backoff are
 * clock boundaries). Expectations come from the runtime-integration seed (sessions on one
 * target share its host; startup, reuse, idle release, crash and explicit stop are defined;
 * restart after loss) and the supervisor's contract: a restart budget within a window, then
 * `unavailable`; every process has a generation, and news of an older one never touches its
 * replacement.
 */

/** A supervisor whose first host is up, with one lease. The emitted log starts empty. */
async function ready(policy: Partial<SupervisorPolicy> = {}) {
  const h = open(policy);
  h.send({ type: "ACQUIRE" });
  await h.up();
  h.clear();
  return h;
}

beforeEach(() => {
  vi.useFakeTimers({ toFake: ["setTimeout", "clearTimeout", "Date"] });
  vi.setSystemTime(1_000_000);
});
afterEach(() => vi.useRealTimers());

describe("host supervisor: start and reuse", () => {
  it(
    "the first acquire starts generation 1 within the startup timeout; " + "once it is up, ready is announced",
    async () => {
      const h = open();
      expect([h.state(), h.starts]).toEqual(["idle", []]);
      h.send({ type: "ACQUIRE" });
      expect(h.state()).toBe("starting");
      expect(h.starts).toEqual([expect.objectContaining({ generation: 1, timeoutMs: 5_000 })]);
      expect(h.emitted).toEqual([]);
      await h.up();
      expect(h.state()).toBe("ready");
      expect(h.emitted).toEqual([{ type: "ready", generation: 1 }]);
    },
  );

  it("acquires while it starts wait for that same start: one process, and each of them holds a lease", async () => {
    const h = open();
    h.send({ type: "ACQUIRE" });
    h.send({ type: "ACQUIRE" });
    h.send({ type: "ACQUIRE" });
    await h.up();
    expect(h.generations()).toEqual([1]);
    expect(h.emitted).toEqual([{ type: "ready", generation: 1 }]);
    // Three leases: the host idles out only after the third release.
    h.send({ type: "RELEASE", generation: 1 });
    h.send({ type: "RELEASE", generation: 1 });
    expect(h.state()).toBe("ready");
    h.send({ type: "RELEASE", generation: 1 });
    expect(h.state()).toBe("idleCountdown");
  });

  it("sessions on the target share its running host: a later acquire starts nothing", async () => {
    const h = await ready();
    h.send({ type: "ACQUIRE" });
    expect([h.state(), h.generations(), h.emitted]).toEqual(["ready", [1], []]);
  });
});

describe("host supervisor: idle release", () => {
  it(
    "with no lease left it stops the process after the idle TTL, " +
      "not before; the next acquire starts a new generation",
    async () => {
      const h = await ready();
      h.send({ type: "ACQUIRE" });
      h.send({ type: "RELEASE", generation: 1 });
      expect(h.state()).toBe("ready");
      h.send({ type: "RELEASE", generation: 1 });
      expect(h.state()).toBe("idleCountdown");
      await vi.advanceTimersByTimeAsync(POLICY.idleTtlMs - 1);
      expect(h.emitted).toEqual([]);
      await vi.advanceTimersByTimeAsync(1);
      expect(h.emitted).toEqual([{ type: "stopProcess", generation: 1, reason: "idle" }]);
      expect(h.state()).toBe("idle");
      h.send({ type: "ACQUIRE" });
      expect(h.generations()).toEqual([1, 2]);
    },
  );

  it(
    "an acquire before the TTL runs out keeps the same process, " + "and the TTL starts over at the next release",
    async () => {
      const h = await ready();
      h.send({ type: "RELEASE", generation: 1 });
      await vi.advanceTimersByTimeAsync(POLICY.idleTtlMs - 1);
      h.send({ type: "ACQUIRE" });
      expect([h.state(), h.generations()]).toEqual(["ready", [1]]);
      await vi.advanceTimersByTimeAsync(POLICY.idleTtlMs * 2);
      expect(h.emitted).toEqual([]);
      h.send({ type: "RELEASE", generation: 1 });
      await vi.advanceTimersByTimeAsync(POLICY.idleTtlMs - 1);
      expect(h.emitted).toEqual([]);
      await vi.advanceTimersByTimeAsync(1);
      expect(h.emitted).toEqual([{ type: "stopProcess", generation: 1, reason: "idle" }]);
    },
  );

  it(
    "an idle host that exits on its own is simply gone: " + "no loss to announce, and the next acquire starts at once",
    async () => {
      const h = await ready();
      h.send({ type: "RELEASE", generation: 1 });
      h.send({ type: "EXITED", generation: 1, reason: "code 0" });
      expect([h.state(), h.emitted]).toEqual(["idle", []]);
      h.send({ type: "ACQUIRE" });
      expect([h.state(), h.generations()]).toEqual(["starting", [1, 2]]);
    },
  );

  it("an idle host that becomes unreachable is stopped", async () => {
    const h = await ready();
    h.send({ type: "RELEASE", generation: 1 });
    h.send({ type: "LOST", generation: 1, reason: "reconnects exhausted" });
    expect(h.state()).toBe("idle");
    expect(h.emitted).toEqual([{ type: "stopProcess", generation: 1, reason: "unreachable" }]);
  });
});

describe("host supervisor: crashes and generations", () => {
  it(
    "a crash of the host in use is announced lost; " +
      "the next acquire restarts it after a backoff, as a new generation",
    async () => {
      const h = await ready();
      h.send({ type: "EXITED", generation: 1, reason: "host process exited (SIGKILL)" });
      expect(h.emitted).toEqual([{ type: "lost", generation: 1, reason: "host process exited (SIGKILL)" }]);
      expect(h.state()).toBe("idle");
      h.send({ type: "ACQUIRE" });
      expect(h.state()).toBe("backoff");
      await vi.advanceTimersByTimeAsync(POLICY.backoffMs[0]! - 1);
      expect(h.generations()).toEqual([1]);
      await vi.advanceTimersByTimeAsync(1);
      expect(h.generations()).toEqual([1, 2]);
      await h.up();
      expect(h.emitted.at(-1)).toEqual({ type: "ready", generation: 2 });
    },
  );

  it("a host alive but unreachable is lost, and its process stopped", async () => {
    const h = await ready();
    h.send({ type: "LOST", generation: 1, reason: "host unresponsive" });
    expect(h.emitted).toEqual([
      { type: "lost", generation: 1, reason: "host unresponsive" },
      { type: "stopProcess", generation: 1, reason: "unreachable" },
    ]);
  });

  it("news of an older generation (exit, loss, release) never touches its replacement", async () => {
    const h = await ready();
    h.send({ type: "EXITED", generation: 1, reason: "crash" });
    h.send({ type: "ACQUIRE" });
    await vi.advanceTimersByTimeAsync(POLICY.backoffMs[0]!);
    await h.up();
    h.clear();
    h.send({ type: "EXITED", generation: 1, reason: "late exit" });
    h.send({ type: "LOST", generation: 1, reason: "late loss" });
    h.send({ type: "RELEASE", generation: 1 });
    expect([h.state(), h.emitted]).toEqual(["ready", []]);
    // The lease of generation 2 is still held: its own release starts the idle countdown.
    h.send({ type: "RELEASE", generation: 2 });
    expect(h.state()).toBe("idleCountdown");
  });

  it("a failed start is stopped and retried for whoever waits, after a backoff, as a new generation", async () => {
    const h = open();
    h.send({ type: "ACQUIRE" });
    await h.down("handshake timed out");
    expect(h.emitted).toEqual([{ type: "stopProcess", generation: 1, reason: "start failed" }]);
    expect(h.state()).toBe("backoff");
    await vi.advanceTimersByTimeAsync(POLICY.backoffMs[0]!);
    expect(h.generations()).toEqual([1, 2]);
    await h.up();
    expect(h.emitted.at(-1)).toEqual({ type: "ready", generation: 2 });
    h.send({ type: "RELEASE", generation: 2 });
    expect(h.state()).toBe("idleCountdown");
  });

  it("a host that exits while it starts counts as a failed start", async () => {
    const h = open();
    h.send({ type: "ACQUIRE" });
    h.send({ type: "EXITED", generation: 1, reason: "exited during startup" });
    expect(h.state()).toBe("backoff");
    await vi.advanceTimersByTimeAsync(POLICY.backoffMs[0]!);
    expect(h.generations()).toEqual([1, 2]);
  });

  it("each recent failure waits longer before the restart, the last delay repeating", async () => {
    const h = open({ restartBudget: 10, backoffMs: [100, 1_000] });
    h.send({ type: "ACQUIRE" });
    for (const [n, delay] of [
      [2, 100],
      [3, 1_000],
      [4, 1_000],
    ] as const) {
      await h.down();
      await vi.advanceTimersByTimeAsync(delay - 1);
      expect(h.generations()).toHaveLength(n - 1);
      await vi.advanceTimersByTimeAsync(1);
      expect(h.generations()).toHaveLength(n);
    }
  });
});

describe("host supervisor: restart budget", () => {
  async function spend(h: ReturnType<typeof open>) {
    h.send({ type: "ACQUIRE" });
    await h.down("first");
    await vi.advanceTimersByTimeAsync(POLICY.backoffMs[0]!);
    await h.down("second");
    await vi.advanceTimersByTimeAsync(POLICY.backoffMs[1]!);
    await h.down("third");
  }

  it(
    "one failure past the budget within the window makes the host unavailable, " +
      "with a typed reason, and starts nothing more",
    async () => {
      const h = open();
      await spend(h);
      expect(h.generations()).toEqual([1, 2, 3]);
      expect(h.state()).toBe("unavailable");
      expect(h.emitted.at(-1)).toEqual({
        type: "unavailable",
        reason: expect.stringMatching(/^alpha: host restart budget spent .*third/),
      });
      h.clear();
      h.send({ type: "ACQUIRE" });
      expect(h.emitted).toEqual([{ type: "unavailable", reason: expect.stringContaining("restart budget spent") }]);
      await vi.advanceTimersByTimeAsync(POLICY.backoffMs[1]! * 10);
      expect(h.generations()).toEqual([1, 2, 3]);
    },
  );

  it("once the failures age out of the window, the next acquire tries again, for that caller alone", async () => {
    const h = open();
    await spend(h);
    await vi.advanceTimersByTimeAsync(POLICY.restartWindowMs);
    h.send({ type: "ACQUIRE" });
    expect([h.state(), h.generations()]).toEqual(["starting", [1, 2, 3, 4]]);
    await h.up();
    expect(h.emitted.at(-1)).toEqual({ type: "ready", generation: 4 });
    // The waiters told `unavailable` earlier hold no lease: one release idles the host.
    h.send({ type: "RELEASE", generation: 4 });
    expect(h.state()).toBe("idleCountdown");
  });
});

describe("host supervisor: stop", () => {
  it("stopping the runtime stops the process and ends the supervisor", async () => {
    const h = await ready();
    h.send({ type: "STOP" });
    expect(h.emitted).toEqual([{ type: "stopProcess", generation: 1, reason: "runtime stopping" }]);
    expect([h.state(), h.actor.getSnapshot().status]).toEqual(["stopped", "done"]);
  });

  it("stopping while a host starts abandons the start", async () => {
    const h = open();
    h.send({ type: "ACQUIRE" });
    h.send({ type: "STOP" });
    await h.up();
    expect(h.emitted).toEqual([{ type: "stopProcess", generation: 1, reason: "runtime stopping" }]);
    expect(h.state()).toBe("stopped");
  });
});
