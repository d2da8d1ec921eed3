import { execFile } from "node:child_process";
import { mkdtemp, rm } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { promisify } from "node:util";
import { describe, expect, it } from "vitest";

const run = promisify(execFile);
const bin = join(import.meta.dirname, "../../bin/tiller.js");

describe("tiller demo --provider claude", () => {
  it("runs the demo on the real Claude Code binary against the model simulator", async () => {
    const dataDir = await mkdtemp(join(tmpdir(), "tiller-demo-claude-"));
    try {
      const { stdout } = await run(process.execPath, [bin, "demo", "--provider", "claude", "--yes", "--no-color", "--data-dir", dataDir], { timeout: 60_000 });
      expect(stdout).toContain("(--yes: approving run `echo '3 date tests pass' | tee test-results.txt`)");
      expect(stdout).toContain("Fixed: today() now formats the date in UTC, and the date tests pass.");
      expect(stdout).toContain("Runs: #1 completed, #2 interrupted, #3 completed");
    } finally {
      await rm(dataDir, { recursive: true, force: true, maxRetries: 10 });
    }
  });
});
