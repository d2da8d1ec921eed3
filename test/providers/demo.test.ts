import { execFile } from "node:child_process";
import { mkdtemp, rm } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { promisify } from "node:util";
import { describe, expect, it } from "vitest";
import { codexBinary } from "../codex/harness.js";

const run = promisify(execFile);
const bin = join(import.meta.dirname, "../../bin/tiller.js");

/**
 * `tiller demo --provider <name>` on each real binary and ACP agent, against the model simulator. The agents that share
 * a plan (claude-agent-acp's TodoWrite, codex-acp's update_plan) show the scripted demo's, done at the end.
 */
const tee = "(--yes: approving run `echo '3 date tests pass' | tee test-results.txt`)";
const cases = [
  { provider: "codex", approval: "(--yes: approving run `/bin/bash -lc", plan: false, ready: codexBinary },
  { provider: "claude", approval: tee, plan: false, ready: () => undefined },
  { provider: "gemini", approval: tee, plan: false, ready: () => undefined },
  { provider: "claude-acp", approval: tee, plan: true, ready: () => undefined },
  {
    provider: "codex-acp",
    approval: "(--yes: approving run `echo '3 date tests pass'`)",
    plan: true,
    ready: () => undefined,
  },
];

describe("tiller demo on the real binaries and ACP agents", () => {
  for (const { provider, approval, plan, ready } of cases) {
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
        expect(stdout.includes("☑ Re-run the tests")).toBe(plan);
        expect(stdout).toContain("Fixed: today() now formats the date in UTC, and the date tests pass.");
        expect(stdout).toContain("Runs: #1 completed, #2 interrupted, #3 completed");
      } finally {
        await rm(dataDir, { recursive: true, force: true, maxRetries: 10 });
      }
    }, 90_000); // the child's own limit (60 s) fails first, with its output
  }
});
