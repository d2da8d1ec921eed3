import { execFile } from "node:child_process";
import { mkdtemp, readFile, rm } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { promisify } from "node:util";
import { describe, expect, it } from "vitest";

const run = promisify(execFile);
const bin = join(import.meta.dirname, "../../bin/tiller.js");

/** The installed CLI (bin -> dist), as `npx tiller demo` runs it. */
async function demo(args: string[]) {
  const dataDir = await mkdtemp(join(tmpdir(), "tiller-demo-"));
  try {
    const { stdout } = await run(process.execPath, [bin, "demo", "--no-color", "--data-dir", dataDir, ...args], {
      timeout: 60_000,
    });
    const log = await readFile(join(dataDir, "events.jsonl"), "utf8");
    return {
      stdout,
      lines: log
        .trim()
        .split("\n")
        .map((l) => JSON.parse(l) as { seq: number; event: { type: string } }),
    };
  } finally {
    await rm(dataDir, { recursive: true, force: true });
  }
}

describe("tiller demo", () => {
  it("runs streamed text, an approval, a todo plan, an interrupt and a queued follow-up with --yes", async () => {
    const { stdout, lines } = await demo(["--yes"]);
    expect(stdout).toContain("(--yes: approving run `npm test -- date`)");
    expect(stdout).toContain("☑ Re-run the tests");
    expect(stdout).toContain("interrupt acknowledged");
    expect(stdout).toContain("Runs: #1 completed, #2 interrupted, #3 completed");
    expect(stdout).toMatch(/Event log: .*events\.jsonl \(\d+ events this session\)/);
    expect(lines.map((l) => l.seq)).toEqual(lines.map((_, i) => i + 1));
    expect(lines.filter((l) => l.event.type === "run.terminal")).toHaveLength(3);
  }, 60_000);

  it("never blocks when it is not interactive", async () => {
    const { stdout } = await demo([]);
    expect(stdout).toContain("not interactive: approving");
    expect(stdout).toContain("Runs: #1 completed, #2 interrupted, #3 completed");
  }, 60_000);
});
