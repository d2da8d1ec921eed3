import { spawnSync } from "node:child_process";
import { mkdtemp, readFile, rm } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { createRuntime, createScriptedAdapter } from "../../src/index.js";
import { LineChild } from "./lockDriver.js";
import { tallyChaos } from "./tally.js";

/**
 * Issue 27, item 2: a runtime in its own pid namespace (where it is pid 1) and one in the host
 * namespace on one data directory. Pids say nothing across namespaces (the one's pid 1 is the
 * other's init; the other's pid does not exist in the one's /proc), so only the kernel lock can
 * keep them apart: exactly one opens, every round, whichever starts first or both at once, and
 * the log they share opens cleanly at the end.
 *
 * Needs `unshare` (util-linux) and the right to make a pid namespace: as root directly, else in
 * a new user namespace. Where the machine forbids it the test is skipped and says so on stderr;
 * `npm run test:chaos` counts a skipped chaos test as a failure.
 */

const ROUNDS = 30;
const child = join(import.meta.dirname, "lockRuntimeChild.ts");
const wrap = [
  "unshare",
  ...(process.getuid?.() === 0 ? [] : ["--user", "--map-root-user"]),
  "--pid",
  "--fork",
  "--mount-proc",
  "--kill-child", // the runtime (the namespace's pid 1) dies with unshare
];

/** Can this machine start node as pid 1 of a new pid namespace? Undefined if so, else why not. */
function unshareRefused(): string | undefined {
  const probe = spawnSync(
    wrap[0]!,
    [...wrap.slice(1), process.execPath, "-e", "process.stdout.write(String(process.pid))"],
    {
      encoding: "utf8",
    },
  );
  if (probe.error) return `${wrap[0]}: ${probe.error.message}`;
  if (probe.status !== 0 || probe.stdout !== "1") return `${wrap.join(" ")}: ${probe.stderr.trim() || probe.stdout}`;
  return undefined;
}

const refused = unshareRefused();
if (refused) console.warn(`\n*** lockNamespaces.test.ts SKIPPED: no pid namespace here (${refused}) ***\n`);

let root: string;
let dataDir: string;
let inNamespace: LineChild;
let onHost: LineChild;

beforeAll(async () => {
  if (refused) return;
  root = await mkdtemp(join(tmpdir(), "tiller-lock-ns-"));
  dataDir = join(root, "data");
  inNamespace = new LineChild(child, [dataDir, join(root, "warm-ns")], wrap);
  onHost = new LineChild(child, [dataDir, join(root, "warm-host")]);
  for (const c of [inNamespace, onHost]) expect(await c.next()).toBe("ready");
});

afterAll(async () => {
  if (refused) return;
  await Promise.all([inNamespace, onHost].map((c) => c.stop()));
  await rm(root, { recursive: true, force: true });
});

describe("two runtimes in different pid namespaces on one data directory", () => {
  it.skipIf(refused !== undefined)(
    `never both open${refused ? ` (SKIPPED: no pid namespace here: ${refused})` : ""}`,
    async () => {
      const contenders = [inNamespace, onHost];
      const names = ["namespace", "host"];
      const violations: string[] = [];
      const wins = [0, 0];
      const lockPids = new Set<number>();
      let works = 0;
      const t0 = performance.now();
      for (let round = 0; round < ROUNDS; round++) {
        // Both at once; the namespaced one first, the other after it opened; and the other way round.
        const order = round % 3;
        let answers: string[];
        if (order === 0) {
          for (const c of contenders) c.send("go");
          answers = await Promise.all(contenders.map((c) => c.next()));
        } else {
          const [first, second] = order === 1 ? [0, 1] : [1, 0];
          answers = [];
          answers[first] = await contenders[first]!.ask("go");
          answers[second] = await contenders[second]!.ask("go");
          if (answers[first] !== "open") violations.push(`round ${round}: ${names[first]} alone did not open`);
        }
        const opened = contenders.filter((_, i) => answers[i] === "open");
        answers.forEach((a, i) => a === "open" && wins[i]!++);
        if (opened.length !== 1 || answers.some((a) => a !== "open" && a !== "locked"))
          violations.push(`round ${round}: ${names.map((n, i) => `${n} ${answers[i]}`).join(" / ")}`);
        lockPids.add((JSON.parse(await readFile(join(dataDir, "LOCK"), "utf8")) as { pid: number }).pid);
        for (const rt of opened) expect(await rt.ask("work")).toBe("worked");
        works += opened.length;
        for (const rt of opened) expect(await rt.ask("close")).toBe("closed");
      }
      console.info(
        `lock across pid namespaces: ${ROUNDS} rounds, opened ${wins.join(" (namespace) + ")} (host), ` +
          `${violations.length} violations, ${(performance.now() - t0).toFixed(0)} ms`,
      );
      expect(violations).toEqual([]);
      // The namespaced runtime's LOCK named pid 1: the pids the two wrote were not comparable.
      expect(lockPids).toContain(1);
      expect(lockPids).toContain(onHost.proc.pid);

      const rt = await createRuntime({ dataDir, providers: { s: createScriptedAdapter() } });
      try {
        expect(rt.listThreads()).toHaveLength(works);
      } finally {
        await rt.close();
      }
      tallyChaos("lock-namespaces", { properties: 1, runs: ROUNDS, violations: 0 });
    },
  );
});
