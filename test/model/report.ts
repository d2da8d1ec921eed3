/**
 * `npm run test:model`: every policy model over every combination of the flags it reads,
 * each generated path replayed against the real runtime. Prints what ran per policy and
 * how many paths exercised each degradation transition; the last line is the coverage.
 * Exits non-zero if any path failed.
 */
import { models } from "./models/index.js";
import { fieldGovernance, runSuite } from "./suite.js";

const report = await runSuite(models, (r) => {
  if (r.error)
    process.stdout.write(`FAILED ${r.model} ${JSON.stringify(r.flags)} ${r.events.join(" → ")}\n  ${r.error}\n`);
});
process.stdout.write(`${report.lines.join("\n")}\n`);
const fields = fieldGovernance(models);
const governed = fields.filter((f) => f.shownBy);
process.stdout.write("\ncapability field, the model path that flips it, and what changes\n");
for (const { field, shownBy: s } of fields) {
  process.stdout.write(
    s
      ? `${field}\n  ${s.model}, ${s.flag}=${s.from}: ${s.path}\n  ${s.flag}=${s.to} instead: ${s.instead}\n`
      : `${field}\n  NOT SHOWN: no model path changes when it flips\n`,
  );
}
process.stdout.write(`\ndegradation transitions covered: ${report.covered}/${report.total}\n`);
process.stdout.write(`capability fields governing behaviour: ${governed.length}/${fields.length}\n`);
process.exitCode =
  report.failures.length > 0 || report.covered < report.total || governed.length < fields.length ? 1 : 0;
