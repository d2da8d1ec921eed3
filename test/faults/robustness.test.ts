import { mkdtemp, readFile, rm } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { describe, expect, it } from "vitest";
import type { HostSpec } from "../../src/adapters/kit/hostSpec.js";
import { HostRegistry } from "../../src/runtime/hosts/registry.js";
import { groupRunning, stopProcessGroup } from "../../src/runtime/hosts/process.js";
import { spawn } from "node:child_process";
import { alive, hosted, killIfAlive, openFaultRuntime, until } from "./helpers.js";

/** Hosts that misbehave at the process boundary (found in review): none may hang the runtime or leak a process. */

const never = new Promise<never>(() => undefined);

async function withRegistry<T>(fn: (registry: HostRegistry, dir: string) => Promise<T>): Promise<T> {
  const dir = await mkdtemp(join(tmpdir(), "tiller-robust-"));
  const { registry } = await HostRegistry.open(dir);
  try {
    return await fn(registry, dir);
  } finally {
    await registry.close();
    await rm(dir, { recursive: true, force: true });
  }
}

describe("misbehaving hosts", () => {
  it(
    "a host that exits at once is reported as such (not as a timeout), " + "leaves no record, and close returns",
    async () => {
      await withRegistry(async (registry, dir) => {
        const spec: HostSpec = {
          target: "quick",
          identity: { executable: "sh", config: {} },
          spawn: { command: "sh", args: ["-c", "echo dying >&2; exit 3"], env: {} },
          connect: () => never,
          policy: { startupTimeoutMs: 20_000, restartBudget: 0 },
        };
        const error = await registry.acquire(spec).then(
          () => null,
          (e: unknown) => e as Error & { code: string },
        );
        expect(error?.code).toBe("host_unavailable");
        expect(error?.message).toMatch(/exited \(code 3\)/);
        expect(error?.message).not.toMatch(/did not become ready/);
        const recorded = async () =>
          (JSON.parse(await readFile(join(dir, "runtimes", "hosts.json"), "utf8")) as { hosts: unknown[] }).hosts;
        for (let left = await recorded(); left.length > 0; left = await recorded())
          await new Promise((r) => setTimeout(r, 5));
      });
    },
  );

  it("close() returns even when a host hangs (SIGSTOP), and the host is killed", async () => {
    const adapter = hosted();
    const { rt, cleanup } = await openFaultRuntime({ s: adapter });
    let pid: number | null = null;
    try {
      const { threadId } = await rt.createThread({ providerTarget: "s" });
      expect((await rt.waitForRun((await rt.sendMessage({ threadId, text: "hi" })).runId)).status).toBe("completed");
      pid = adapter.hostPid([...rt.views.sessions.keys()][0]!);
      process.kill(pid!, "SIGSTOP");
    } finally {
      await cleanup();
    }
    await until("the hung host to be killed", () => !alive(pid!));
  }, 30_000);

  it("stopping a host ends its whole process group, children that ignore SIGTERM included", async () => {
    const leader = spawn("sh", ["-c", "sh -c 'trap \"\" TERM; sleep 30' & wait"], { detached: true, stdio: "ignore" });
    await new Promise((r) => leader.once("spawn", r));
    try {
      await stopProcessGroup(leader.pid!, 200);
      expect(alive(leader.pid!)).toBe(false);
      // No member of the group survives (the grandchild ignored SIGTERM, so it took the SIGKILL).
      expect(groupRunning(leader.pid!)).toBe(false);
    } finally {
      killIfAlive(leader.pid);
    }
  });
});
