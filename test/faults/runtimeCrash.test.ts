import { spawn } from "node:child_process";
import { mkdtemp, readFile, rm } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { createInterface } from "node:readline";
import { describe, expect, it } from "vitest";
import { HostRecordStore } from "../../src/runtime/hosts/records.js";
import { alive, hosted, killIfAlive, openFaultRuntime, report } from "./helpers.js";

/**
 * The runtime itself dies (SIGKILL) with an approval pending and its provider host running.
 * The next runtime on the same data directory reaps that orphan (only it), settles what was
 * left open, has lost no acknowledged event, and works.
 */

const child = join(import.meta.dirname, "runtimeChild.ts");

async function crashRuntime(dataDir: string): Promise<{ delivered: Array<[number, string]>; hostPid: number }> {
  const proc = spawn(process.execPath, ["--import", "tsx", child, dataDir], { stdio: ["ignore", "pipe", "inherit"] });
  const exited = new Promise<NodeJS.Signals | null>((resolve) => proc.on("exit", (_code, signal) => resolve(signal)));
  const delivered: Array<[number, string]> = [];
  let hostPid = 0;
  for await (const line of createInterface({ input: proc.stdout })) {
    const [first, second] = line.split(" ");
    if (first === "host") {
      hostPid = Number(second);
      process.kill(proc.pid!, "SIGKILL");
      break;
    }
    delivered.push([Number(first), second!]);
  }
  expect(await exited).toBe("SIGKILL");
  return { delivered, hostPid };
}

describe("runtime crash with a host running", () => {
  it(
    "reaps the orphaned host, settles the run and its approval, " + "loses nothing acknowledged, and works again",
    async () => {
      const dataDir = await mkdtemp(join(tmpdir(), "tiller-runtime-crash-"));
      let hostPid = 0;
      try {
        const crashed = await crashRuntime(dataDir);
        hostPid = crashed.hostPid;
        expect(alive(hostPid)).toBe(true); // its own process group: it outlived the runtime

        const t0 = performance.now();
        const { rt, cleanup } = await openFaultRuntime({ s: hosted({ transport: "websocket" }) }, { dataDir });
        report("runtime SIGKILL -> reopen (orphan reaped, recovery committed)", performance.now() - t0);
        try {
          expect(alive(hostPid)).toBe(false);
          const lines = (await readFile(join(dataDir, "events.jsonl"), "utf8"))
            .trim()
            .split("\n")
            .map((l) => JSON.parse(l) as { seq: number; event: { type: string; message?: string } });
          // Every event the crashed runtime delivered to its subscriber is still there, same seq, same type.
          for (const [seq, type] of crashed.delivered) expect(lines[seq - 1]).toMatchObject({ seq, event: { type } });
          expect(lines.some((l) => l.event.type === "warning" && l.event.message?.includes(`pid ${hostPid}`))).toBe(
            true,
          );

          const [thread] = rt.listThreads();
          const snapshot = await rt.readThread(thread!.threadId);
          expect(snapshot.runs.map((r) => [r.status, r.reason])).toEqual([["cancelled", "runtime_restarted"]]);
          expect(snapshot.pendingRequests).toEqual([]);
          const [request] = rt.views.requests.values();
          expect(request).toMatchObject({ status: "expired", closedReason: expect.stringMatching(/^not_resumable/) });
          await expect(
            rt.respond({ requestId: request!.requestId, response: { kind: "decision", decision: "accept" } }),
          ).rejects.toMatchObject({ code: "not_resumable" });

          const next = await rt.waitForRun(
            (await rt.sendMessage({ threadId: thread!.threadId, text: "are you back?" })).runId,
          );
          expect(next.status).toBe("completed");
        } finally {
          await cleanup();
        }
      } finally {
        killIfAlive(hostPid);
        await rm(dataDir, { recursive: true, force: true });
      }
    },
    60_000,
  );

  it("never kills a process whose pid was reused (start time differs)", async () => {
    const dataDir = await mkdtemp(join(tmpdir(), "tiller-reap-"));
    const stranger = spawn("sleep", ["30"], { stdio: "ignore" });
    try {
      const records = await HostRecordStore.open(dataDir);
      await records.add({
        hostKey: "s:x",
        target: "s",
        generation: 1,
        pid: stranger.pid!,
        startTime: "1",
        commandLine: "node host",
        startedAt: new Date().toISOString(),
      });
      const { reaped, gone } = await records.reapOrphans(100);
      expect(reaped).toEqual([]);
      expect(gone.map((r) => r.pid)).toEqual([stranger.pid]);
      expect(alive(stranger.pid!)).toBe(true);
      expect(records.hosts).toEqual([]);
    } finally {
      stranger.kill("SIGKILL");
      await rm(dataDir, { recursive: true, force: true });
    }
  });
});
