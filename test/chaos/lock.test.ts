import { spawn } from "node:child_process";
import { randomBytes } from "node:crypto";
import { readdirSync, rmSync, writeFileSync } from "node:fs";
import { mkdtemp, rm } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { LineChild } from "./lockDriver.js";
import { tallyChaos } from "./tally.js";

/**
 * Issue 12, item 3: two real processes race for a data directory, 500 synchronised tries each
 * on a fresh directory, a stale LOCK (a dead holder; a live pid with another start time, i.e.
 * a recycled pid) and an empty / half-written / garbage LOCK. Exactly one winner every try,
 * and nothing left behind once the winner lets go.
 *
 * Each round races on LANES directories at once (each try is still the two processes against
 * each other on one directory, started by the same `go`), so a round trip through the pipes
 * serves several tries and 3 x 500 of them fit the test timeout on a loaded machine.
 */

const TRIES = 500;
const LANES = 5;
const ROUNDS = TRIES / LANES;
const child = join(import.meta.dirname, "lockChild.ts");
let root: string;
let lanes: string[] = [];
let contenders: LineChild[] = [];
let dead = 0;
let runs = 0;

beforeAll(async () => {
  root = await mkdtemp(join(tmpdir(), "tiller-lock-race-"));
  lanes = Array.from({ length: LANES }, (_, i) => join(root, `lane-${i}`));
  contenders = [0, 1].map((i) => new LineChild(child, [join(root, `warm-${i}`), ...lanes]));
  for (const c of contenders) expect(await c.next()).toBe("ready");
  const gone = spawn(process.execPath, ["-e", ""], { stdio: "ignore" });
  await new Promise((resolve) => gone.once("exit", resolve));
  dead = gone.pid!; // a pid no process has any more
});

afterAll(async () => {
  await Promise.all(contenders.map((c) => c.stop()));
  await rm(root, { recursive: true, force: true });
  if (runs > 0) tallyChaos("lock", { properties: 3, runs, violations: 0 });
});

const lockRecord = (pid: number, startTime: string) =>
  JSON.stringify({
    pid,
    startTime,
    bootId: null,
    nonce: randomBytes(16).toString("hex"),
    acquiredAt: new Date().toISOString(),
  }) + "\n";

/**
 * Runs the rounds; `prepare(lane, try)` sets a lane's directory up before its try. The test's
 * own file work is synchronous: a round costs the children's work and the pipe round trips.
 */
async function race(name: string, prepare: (lane: string, attempt: number) => void): Promise<void> {
  const violations: string[] = [];
  const wins = [0, 0];
  const t0 = performance.now();
  for (let round = 0; round < ROUNDS; round++) {
    lanes.forEach((lane, i) => prepare(lane, round * LANES + i));
    for (const c of contenders) c.send("go");
    const answers = (await Promise.all(contenders.map((c) => c.next()))).map((line) => line.split(" "));
    for (const c of contenders) expect(await c.ask("release")).toBe("released");
    lanes.forEach((lane, i) => {
      const said = answers.map((a) => a[i] ?? "none");
      said.forEach((a, c) => a === "won" && wins[c]!++);
      const left = readdirSync(lane);
      if (
        said.filter((a) => a === "won").length !== 1 ||
        said.some((a) => a !== "won" && a !== "lost") ||
        left.length > 0
      ) {
        violations.push(
          `try ${round * LANES + i}: ${said.join(" / ")}${left.length > 0 ? `, left behind ${left.join(", ")}` : ""}`,
        );
      }
      for (const file of left) rmSync(join(lane, file), { force: true });
    });
  }
  console.info(
    `lock race (${name}): ${TRIES} tries, wins ${wins.join(" + ")}, ` +
      `${violations.length} violations, ${(performance.now() - t0).toFixed(0)} ms`,
  );
  expect({ violations: violations.slice(0, 5), count: violations.length }).toEqual({ violations: [], count: 0 });
  runs += TRIES; // tallied once the tries passed
}

describe("the data-directory lock under a two-process race: exactly one winner per try", () => {
  it("on a fresh directory", async () => {
    await race("fresh", () => undefined);
  });

  it("over a stale LOCK: a holder that died, a live pid with another start time (recycled)", async () => {
    // The live pid is this test process's own: alive, but not the process that started at tick 1.
    await race("stale: dead pid, recycled pid", (lane, attempt) =>
      writeFileSync(join(lane, "LOCK"), lockRecord(attempt % 2 === 0 ? dead : process.pid, "1")),
    );
  });

  it("over an empty, half-written or garbage LOCK", async () => {
    const torn = [() => "", () => lockRecord(dead, "1").slice(0, 25), () => randomBytes(40).toString("latin1")];
    await race("empty / half-written / garbage", (lane, attempt) =>
      writeFileSync(join(lane, "LOCK"), torn[attempt % torn.length]!()),
    );
  });
});
