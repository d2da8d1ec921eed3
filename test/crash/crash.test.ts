import { spawn } from "node:child_process";
import { mkdtemp, rm, stat } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { createInterface } from "node:readline";
import { describe, expect, it } from "vitest";
import { createRuntime, createScriptedAdapter, type TillerRuntime } from "../../src/index.js";
import type { DomainEvent } from "../../src/domain/events.js";
import { EventLog } from "../../src/runtime/store/eventLog.js";

const child = join(import.meta.dirname, "child.ts");

/** Starts the child runtime and SIGKILLs it once `count` events of `type` were delivered. */
async function killAfter(
  dataDir: string,
  mode: "stream" | "queue" | "native",
  killType: string,
  count: number,
): Promise<Array<{ seq: number; type: string }>> {
  const proc = spawn(process.execPath, ["--import", "tsx", child, dataDir, mode], {
    stdio: ["ignore", "pipe", "inherit"],
  });
  const delivered: Array<{ seq: number; type: string }> = [];
  const exited = new Promise<NodeJS.Signals | null>((resolve) => proc.on("exit", (_code, signal) => resolve(signal)));
  let seen = 0;
  for await (const line of createInterface({ input: proc.stdout })) {
    const [seq, type] = line.split(" ");
    delivered.push({ seq: Number(seq), type: type! });
    if (type === killType && ++seen === count) {
      process.kill(proc.pid!, "SIGKILL");
      break;
    }
  }
  expect(await exited).toBe("SIGKILL");
  return delivered;
}

/** Opens a runtime on the directory a killed child left, hands it to `check`, and closes it. */
async function reopened(dataDir: string, check: (rt: TillerRuntime) => Promise<void>): Promise<void> {
  const rt = await createRuntime({ dataDir, providers: { scripted: createScriptedAdapter() } });
  try {
    await check(rt);
  } finally {
    await rt.close();
  }
}

/** A fresh data directory for `test`, removed afterwards whatever happened. */
async function inTempDir(test: (dataDir: string) => Promise<void>): Promise<void> {
  const dataDir = await mkdtemp(join(tmpdir(), "tiller-crash-"));
  try {
    await test(dataDir);
  } finally {
    await rm(dataDir, { recursive: true, force: true });
  }
}

describe("crash safety", () => {
  it("keeps every event delivered before a SIGKILL mid-stream, gap-free, and settles the run on reopen", async () => {
    await inTempDir(async (dataDir) => {
      const delivered = await killAfter(dataDir, "stream", "node.delta", 400);
      expect(delivered.filter((d) => d.type === "node.delta").length).toBe(400);
      const sizeBefore = (await stat(join(dataDir, "events.jsonl"))).size;

      const log = await EventLog.open<DomainEvent>(join(dataDir, "events.jsonl"));
      const recovered: Array<{ seq: number; type: string }> = [];
      for await (const record of log.readAll()) recovered.push({ seq: record.seq, type: record.event.type });
      await log.close();

      // Gap-free from 1, and a superset of what any subscriber saw.
      expect(recovered.map((r) => r.seq)).toEqual(recovered.map((_, i) => i + 1));
      const bySeq = new Map(recovered.map((r) => [r.seq, r.type]));
      for (const d of delivered) expect(bySeq.get(d.seq)).toBe(d.type);
      // At most a torn tail was dropped: less than one record's worth of bytes.
      expect(log.recovery.truncatedBytes).toBeLessThan(4096);
      expect((await stat(join(dataDir, "events.jsonl"))).size).toBe(sizeBefore - log.recovery.truncatedBytes);

      // The reopened runtime leaves nothing "running".
      await reopened(dataDir, async (rt) => {
        const [thread] = rt.listThreads();
        const snapshot = await rt.readThread(thread!.threadId);
        expect(snapshot.runs.map((r) => [r.status, r.reason])).toEqual([["cancelled", "runtime_restarted"]]);
        expect(snapshot.runs[0]!.items.every((i) => i.status === "complete")).toBe(true);
        expect(snapshot.thread.status).toBe("idle");
      });
    });
  }, 60_000);

  it("cancels a follow-up handed to a provider's queue (the queue died with it), never sending it twice", async () => {
    await inTempDir(async (dataDir) => {
      const delivered = await killAfter(dataDir, "native", "attempt.turn_bound", 2);
      expect(delivered.filter((d) => d.type === "attempt.turn_bound")).toHaveLength(2);
      await reopened(dataDir, async (rt) => {
        const [thread] = rt.listThreads();
        const snapshot = await rt.readThread(thread!.threadId);
        expect(snapshot.runs.map((r) => [r.status, r.reason])).toEqual([
          ["cancelled", "runtime_restarted"],
          ["cancelled", "runtime_restarted"],
        ]);
        expect(snapshot.runs.flatMap((r) => r.attempts.map((a) => a.status))).toEqual(["cancelled", "cancelled"]);
        expect(snapshot.runs.flatMap((r) => r.items).every((i) => i.status === "complete")).toBe(true);
        expect(snapshot.thread.status).toBe("idle");
      });
    });
  }, 60_000);

  it("resumes a queued run after the crash, once the interrupted one is settled", async () => {
    await inTempDir(async (dataDir) => {
      const delivered = await killAfter(dataDir, "queue", "run.created", 2);
      expect(delivered.filter((d) => d.type === "run.created")).toHaveLength(2);
      await reopened(dataDir, async (rt) => {
        const [thread] = rt.listThreads();
        const [first, second] = (await rt.readThread(thread!.threadId)).runs;
        expect([first!.status, first!.reason]).toEqual(["cancelled", "runtime_restarted"]);
        const resumed = await rt.waitForRun(second!.runId);
        expect(resumed.status).toBe("completed");
        expect(resumed.items.find((i) => i.kind === "assistant_message")?.text).toBe("You said: queued behind it");
      });
    });
  }, 60_000);
});
