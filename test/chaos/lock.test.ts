import { spawn } from "node:child_process";
import { randomBytes } from "node:crypto";
import { readdirSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { mkdtemp, rm } from "node:fs/promises";
import { hostname, tmpdir } from "node:os";
import { join } from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { LineChild } from "./lockDriver.js";
import { tallyChaos } from "./tally.js";

/**
 * Issue 12, item 3: two real processes race for a data directory, 500 synchronised tries each
 * on a fresh directory, a LOCK left behind by a holder that died (naming a dead pid, a live one,
 * pid 1 of another pid namespace, another boot) and an empty / half-written / garbage LOCK.
 * Exactly one winner every try, and nothing left behind once the winner lets go. Then (issue 27)
 * the two take and give back the lock as fast as they can, 2 x 500 holds: a contender that
 * opened LOCK just before its holder deleted it must never hold it beside the next holder.
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
  if (runs > 0) tallyChaos("lock", { properties: 4, runs, violations: 0 });
});

/** A LOCK as a holder that died left it: in today's form, or in the pid/start-time/boot-id form of before. */
const lockRecord = (pid: number, form: number) =>
  JSON.stringify(
    form % 2 === 0
      ? { pid, host: hostname(), acquiredAt: new Date().toISOString() }
      : { pid, startTime: "1", bootId: form % 3 === 0 ? "another-boot" : null, nonce: randomBytes(16).toString("hex") },
  ) + "\n";

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

  it("over a LOCK left behind, naming a dead pid, a live one (this test's), pid 1, another boot", async () => {
    // No kernel lock is on it: whatever it names, it is taken (only ever by one).
    const pids = [dead, process.pid, 1];
    await race("left behind: dead pid, live pid, pid 1", (lane, attempt) =>
      writeFileSync(join(lane, "LOCK"), lockRecord(pids[attempt % pids.length]!, Math.floor(attempt / 3))),
    );
  });

  it("over an empty, half-written or garbage LOCK", async () => {
    const torn = [() => "", () => lockRecord(dead, 0).slice(0, 25), () => randomBytes(40).toString("latin1")];
    await race("empty / half-written / garbage", (lane, attempt) =>
      writeFileSync(join(lane, "LOCK"), torn[attempt % torn.length]!()),
    );
  });

  it("taking and giving back as fast as they can: never two holders at once", async () => {
    const journal = join(root, "journal");
    const HOLDS = 500;
    const t0 = performance.now();
    const tries = await Promise.all(contenders.map((c) => c.ask(`churn ${HOLDS} ${journal}`)));
    const lines = readFileSync(journal, "utf8").trimEnd().split("\n");
    const violations: string[] = [];
    for (let i = 0; i < lines.length; i += 2) {
      const [inside, out] = [lines[i]!.split(" "), lines[i + 1]?.split(" ")];
      if (inside[1] !== "in" || out?.[1] !== "out" || out[0] !== inside[0])
        violations.push(`line ${i}: ${lines.slice(i, i + 4).join(" | ")}`);
    }
    console.info(
      `lock churn: 2 x ${HOLDS} holds (${tries.join(", ")}), ${violations.length} violations, ` +
        `${(performance.now() - t0).toFixed(0)} ms`,
    );
    expect({ holds: lines.length / 2, violations: violations.slice(0, 5) }).toEqual({
      holds: 2 * HOLDS,
      violations: [],
    });
    expect(readdirSync(lanes[0]!)).toEqual([]);
    runs += 2 * HOLDS;
  });
});
