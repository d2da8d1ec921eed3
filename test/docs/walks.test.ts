import { existsSync, readFileSync } from "node:fs";
import { join } from "node:path";
import { describe, expect, it } from "vitest";

/**
 * docs/architecture.md walks through the code file by file. Its steps are one marked list of
 * rows `| # | \`file\` | \`name\`, ... | what happens |`: every file must exist and hold every
 * name its row gives, so a moved file or a renamed function fails here, pointing at the row
 * to update.
 */

const root = join(import.meta.dirname, "../..");
const BEGIN = "<!-- BEGIN WALK FILES";
const END = "<!-- END WALK FILES -->";

interface Step {
  row: string;
  file: string;
  names: string[];
}

function walkSteps(): Step[] {
  const doc = readFileSync(join(root, "docs/architecture.md"), "utf8");
  const from = doc.indexOf(BEGIN);
  const to = doc.indexOf(END);
  if (from < 0 || to < from) throw new Error(`docs/architecture.md lost its marked walk list (${BEGIN} ... ${END})`);
  const steps: Step[] = [];
  for (const line of doc.slice(from, to).split("\n")) {
    const cells = line.split(" | ");
    if (!/^\| \d+$/.test(cells[0] ?? "")) continue;
    const file = /^`([^`]+)`$/.exec(cells[1] ?? "")?.[1];
    const names = [...(cells[2] ?? "").matchAll(/`([^`]+)`/g)].map((m) => m[1]!);
    if (!file || names.length === 0) throw new Error(`walk row without a file or names: ${line}`);
    steps.push({ row: line.slice(0, 80), file, names });
  }
  return steps;
}

describe("docs/architecture.md walks", () => {
  const steps = walkSteps();

  it("has both walks", () => {
    expect(steps.length).toBeGreaterThan(30);
  });

  it("names files that exist, holding the names it gives", () => {
    const problems: string[] = [];
    for (const { row, file, names } of steps) {
      if (!existsSync(join(root, file))) {
        problems.push(`${file} does not exist (row ${row})`);
        continue;
      }
      const text = readFileSync(join(root, file), "utf8");
      for (const name of names) if (!text.includes(name)) problems.push(`${file} has no "${name}" (row ${row})`);
    }
    expect(problems, "update the walk list in docs/architecture.md").toEqual([]);
  });
});
