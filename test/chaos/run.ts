/**
 * `npm run test:chaos`: runs test/chaos/ and ends with one line summing what it exercised:
 * `chaos: N properties, M generated runs, K kills, V violations`. Violations are the tallied
 * ones plus every failed test; nothing skipped counts as passed (a skipped test fails the run).
 */
import { spawnSync } from "node:child_process";
import { mkdtempSync, readFileSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";

const dir = mkdtempSync(join(tmpdir(), "tiller-chaos-"));
const tallyFile = join(dir, "tally.jsonl");
const reportFile = join(dir, "report.json");
const vitest = spawnSync(
  process.execPath,
  [
    "node_modules/vitest/vitest.mjs",
    "run",
    "test/chaos",
    "--reporter=default",
    "--reporter=json",
    `--outputFile.json=${reportFile}`,
    ...process.argv.slice(2),
  ],
  { stdio: "inherit", env: { ...process.env, TILLER_CHAOS_TALLY: tallyFile } },
);

const sum = { properties: 0, runs: 0, kills: 0, violations: 0 };
try {
  for (const line of readFileSync(tallyFile, "utf8").split("\n")) {
    if (!line) continue;
    const t = JSON.parse(line) as Partial<typeof sum>;
    for (const key of Object.keys(sum) as Array<keyof typeof sum>) sum[key] += t[key] ?? 0;
  }
} catch {
  // no tally: nothing ran
}
let failed = 0;
let skipped = 0;
try {
  const report = JSON.parse(readFileSync(reportFile, "utf8")) as {
    numFailedTests: number;
    numPendingTests: number;
    numTodoTests: number;
  };
  failed = report.numFailedTests;
  skipped = report.numPendingTests + report.numTodoTests;
} catch {
  failed = 1; // vitest did not report: count the run as failed
}
rmSync(dir, { recursive: true, force: true });
if (skipped > 0) console.log(`chaos: ${skipped} test(s) skipped; a skipped chaos test is a failure`);
console.log(
  `chaos: ${sum.properties} properties, ${sum.runs} generated runs, ` +
    `${sum.kills} kills, ${sum.violations + failed} violations`,
);
process.exit(vitest.status === 0 && skipped === 0 && failed === 0 ? 0 : 1);
