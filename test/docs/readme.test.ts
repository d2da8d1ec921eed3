import { readFile } from "node:fs/promises";
import { join } from "node:path";
import { expect, it } from "vitest";
import { capabilityTable } from "../../scripts/capability-table.js";

it("the README's provider capability table is the one the records generate", async () => {
  const readme = await readFile(join(import.meta.dirname, "..", "..", "README.md"), "utf8");
  expect(readme).toContain(capabilityTable());
});
