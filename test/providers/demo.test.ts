import { execFile } from "node:child_process";
import { mkdtemp, rm } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { promisify } from "node:util";
import { describe, expect, it } from "vitest";
import { codexBinary } from "../codex/harness.js";

const run = promisify(execFile);
const bin = join(import.meta.dirname, "../../bin/tiller.js");

/** `tiller demo --provider <name>` on each real binary, against the model simulator. */
const cases = [
  { provider: "codex", approval: "(--yes: approving run `/bin/bash -lc", ready: codexBinary },
  {
    provider: "claude",
    approval: "(--yes: approving run `echo '3 date tests pass' | tee test-results.txt`)",
    ready: () => undefined,
  },
];

describe("tiller demo on the real binaries", () => {
  for (const { provider, approval, ready } of cases) {
    it(`--provider ${provider} runs the demo against the model simulator`, async () => {
      ready();
      const dataDir = await mkdtemp(join(tmpdir(), `tiller-demo-${provider}-`));
      try {
        const { stdout } = await run(
          process.execPath,
          [bin, "demo", "--provider", provider, "--yes", "--no-color", "--data-dir", dataDir],
          { timeout: 60_000 },
        );
        expect(stdout).toContain(approval);
        expect(stdout).toContain("Fixed: today() now formats the date in UTC, and the date tests pass.");
        expect(stdout).toContain("Runs: #1 completed, #2 interrupted, #3 completed");
      } finally {
        await rm(dataDir, { recursive: true, force: true, maxRetries: 10 });
      }
    }, 90_000); // the child's own limit (60 s) fails first, with its output
  }
});
