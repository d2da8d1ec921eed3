import { execFile } from "node:child_process";
import { mkdtemp, readFile, rm } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { promisify } from "node:util";
import { describe, expect, it } from "vitest";
import { capabilityTable } from "../../scripts/capability-table.js";

const root = join(import.meta.dirname, "../..");
const run = promisify(execFile);

describe("README", () => {
  it("shows the embedding example verbatim, and the example runs", async () => {
    const readme = await readFile(join(root, "README.md"), "utf8");
    const example = await readFile(join(root, "examples/embedding.ts"), "utf8");
    const block = /<!-- example: examples\/embedding\.ts -->\n```ts\n([\s\S]*?)```/.exec(readme);
    expect(block?.[1]).toBe(example);

    const cwd = await mkdtemp(join(tmpdir(), "tiller-example-"));
    try {
      const tsx = join(root, "node_modules/tsx/dist/cli.mjs");
      const { stdout } = await run(process.execPath, [tsx, join(root, "examples/embedding.ts")], { cwd, timeout: 60_000 });
      expect(stdout).toMatch(/run run_\w+ completed/);
      expect(stdout).toContain("command deployed");
      expect(stdout).toContain("status: completed | capabilities version: 1");
    } finally {
      await rm(cwd, { recursive: true, force: true });
    }
  }, 60_000);

  it("has the provider capability table the records generate", async () => {
    expect(await readFile(join(root, "README.md"), "utf8")).toContain(capabilityTable());
  });
});
