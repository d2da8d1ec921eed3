import { spawn } from "node:child_process";
import { mkdtemp, rm, writeFile } from "node:fs/promises";
import { hostname, tmpdir } from "node:os";
import { join } from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { createRuntime, createScriptedAdapter } from "../../src/index.js";
import { LineChild } from "./lockDriver.js";
import { tallyChaos } from "./tally.js";

/**
 * Issue 12, item 3, whole runtimes: two processes call createRuntime on one data directory at
 * the same moment, round after round, every other round over the LOCK of a runtime that died
 * (as after a crash). One opens, the other gets data_dir_locked, every time;
 * the one that opened writes (a thread), and at the end the log holds every round's thread
 * and opens cleanly (two writers once left it store_corrupt).
 */

const ROUNDS = 50;
const child = join(import.meta.dirname, "lockRuntimeChild.ts");
let root: string;
let dataDir: string;
let contenders: LineChild[] = [];

beforeAll(async () => {
  root = await mkdtemp(join(tmpdir(), "tiller-lock-runtimes-"));
  dataDir = join(root, "data");
  contenders = [0, 1].map((i) => new LineChild(child, [dataDir, join(root, `warm-${i}`)]));
  for (const c of contenders) expect(await c.next()).toBe("ready");
});

afterAll(async () => {
  await Promise.all(contenders.map((c) => c.stop()));
  await rm(root, { recursive: true, force: true });
});

describe("two runtimes started together on one data directory", () => {
  it("never both open, and the log they share stays whole", async () => {
    const violations: string[] = [];
    const wins = [0, 0];
    const gone = spawn(process.execPath, ["-e", ""], { stdio: "ignore" });
    await new Promise((resolve) => gone.once("exit", resolve));
    const crashedLock = () => JSON.stringify({ pid: gone.pid, host: hostname(), acquiredAt: new Date().toISOString() });
    const t0 = performance.now();
    for (let round = 0; round < ROUNDS; round++) {
      if (round % 2 === 1) await writeFile(join(dataDir, "LOCK"), crashedLock());
      for (const c of contenders) c.send("go");
      const answers = await Promise.all(contenders.map((c) => c.next()));
      const opened = contenders.filter((_, i) => answers[i] === "open");
      answers.forEach((a, i) => a === "open" && wins[i]!++);
      if (opened.length !== 1 || answers.some((a) => a !== "open" && a !== "locked"))
        violations.push(`round ${round}: ${answers.join(" / ")}`);
      for (const rt of opened) expect(await rt.ask("work")).toBe("worked");
      for (const rt of opened) expect(await rt.ask("close")).toBe("closed");
    }
    console.info(
      `lock race (two runtimes): ${ROUNDS} rounds, opened ${wins.join(" + ")}, ` +
        `${violations.length} violations, ${(performance.now() - t0).toFixed(0)} ms`,
    );
    expect(violations).toEqual([]);

    const rt = await createRuntime({ dataDir, providers: { s: createScriptedAdapter() } });
    try {
      expect(rt.listThreads()).toHaveLength(ROUNDS);
    } finally {
      await rt.close();
    }
    tallyChaos("lock-runtimes", { properties: 1, runs: ROUNDS, violations: 0 });
  });
});
