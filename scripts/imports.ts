/**
 * `npm run imports`: the import graph of src/ (every relative import, type-only ones too),
 * its cycles, and the layer rules of docs/architecture.md. Exits non-zero on a cycle or a
 * broken rule; test/architecture/imports.test.ts runs the same check.
 */
import { importViolations } from "../test/support/imports.js";

const violations = await importViolations();
for (const v of violations) process.stdout.write(`${v}\n`);
process.stdout.write(
  violations.length === 0 ? "imports: no cycle, layers respected\n" : `imports: ${violations.length} violation(s)\n`,
);
process.exitCode = violations.length === 0 ? 0 : 1;
