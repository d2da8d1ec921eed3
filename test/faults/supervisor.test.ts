import { mkdtemp, rm } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterEach, beforeEach, describe, expect, it } from "vitest";
import type { HostLease } from "../../src/adapters/kit/hostSpec.js";
import { HostRegistry } from "../../src/runtime/hosts/registry.js";
import { alive, hosted, killIfAlive, report, until } from "./helpers.js";

/**
 * The supervisor through the registry, with real host processes: idle release after the TTL
 * and a fresh start after it, and a replaced host whose late exit must not touch its successor.
 */

let dir: string;
let registry: HostRegistry;
const started: number[] = [];

beforeEach(async () => {
  dir = await mkdtemp(join(tmpdir(), "tiller-supervisor-"));
  registry = (await HostRegistry.open(dir)).registry;
});

afterEach(async () => {
  await registry.close();
  for (const pid of started) killIfAlive(pid);
  started.length = 0;
  await rm(dir, { recursive: true, force: true });
});

async function acquire(spec: Parameters<HostRegistry["acquire"]>[0]): Promise<HostLease> {
  const lease = await registry.acquire(spec);
  started.push(lease.pid);
  return lease;
}

const state = () => {
  const [supervisor] = registry.supervisors.values();
  return supervisor!.getSnapshot();
};

describe("idle release", () => {
  it("stops the host once the TTL passes without a lease, and starts a fresh one on the next acquire", async () => {
    const { hostSpec } = hosted({ policy: { idleTtlMs: 200 } });
    const first = await acquire(hostSpec);
    const second = await acquire(hostSpec);
    expect(second.pid).toBe(first.pid);
    first.release();
    expect(state().value).toBe("ready"); // a lease is still held
    second.release();
    const t0 = performance.now();
    await until("the idle host to exit", () => !alive(first.pid));
    report("idle release (TTL 200 ms) -> host exited", performance.now() - t0);
    expect(state().value).toBe("idle");
    const fresh = await acquire(hostSpec);
    expect(fresh.pid).not.toBe(first.pid);
    expect(fresh.generation).toBe(first.generation + 1);
    await fresh.channel.call("openGate", { name: "anything" });
  });
});

describe("generations", () => {
  it("a replaced host's late exit does not touch its successor", async () => {
    // The old host lingers after SIGTERM (and the grace period outlasts the test) until the test
    // kills it, once the new one serves: its exit comes late on any machine.
    const { hostSpec } = hosted({ policy: { idleTtlMs: 50 }, lingerMs: 600_000, stopGraceMs: 600_000 });
    const old = await acquire(hostSpec);
    old.release();
    await until("the old host to be stopped (it lingers)", () => state().matches("idle"));
    expect(alive(old.pid)).toBe(true);
    const fresh = await acquire(hostSpec);
    let lost = "";
    fresh.onLost((why) => (lost = why));
    expect(fresh.generation).toBe(old.generation + 1);
    process.kill(old.pid, "SIGKILL"); // the late exit
    const [key] = registry.supervisors.keys();
    // Once the registry has seen the exit, generation 1's EXITED reached the supervisor, which ignored it.
    await until(
      "the registry to see the old host's late exit",
      () => !alive(old.pid) && !registry.pids(key!).includes(old.pid),
    );
    expect(state().value).toBe("ready");
    expect(state().context.generation).toBe(fresh.generation);
    expect(lost).toBe("");
    expect(alive(fresh.pid)).toBe(true);
    await fresh.channel.call("openGate", { name: "still-served" });
    // A release naming the old generation changes nothing either.
    old.release();
    expect(state().context.leases).toBe(1);
    // This host would linger too: it goes the way its predecessor went, before the registry closes.
    process.kill(fresh.pid, "SIGKILL");
    await until("the registry to see the new host's exit", () => !registry.pids(key!).includes(fresh.pid));
  });
});
