/**
 * `npm run test:model`: every policy model over every combination of the flags it reads,
 * each generated path replayed against the real runtime. Prints what ran per policy and
 * how many paths exercised each degradation transition; the last line is the coverage.
 * Exits non-zero if any path failed.
 */
import { models } from "./models/index.js";
import { runSuite } from "./suite.js";

const report = await runSuite(models, (r) => {
  if (r.error)
    process.stdout.write(`FAILED ${r.model} ${JSON.stringify(r.flags)} ${r.events.join(" → ")}\n  ${r.error}\n`);
});
process.stdout.write(`${report.lines.join("\n")}\n`);
process.exitCode = report.failures.length > 0 || report.covered < report.total ? 1 : 0;
