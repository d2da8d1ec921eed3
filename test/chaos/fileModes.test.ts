import { execFile } from "node:child_process";
import { rm } from "node:fs/promises";
import { promisify } from "node:util";
import { describe, expect, it } from "vitest";
import { tallyChaos } from "./tally.js";

/**
 * Stored files are private to the user: the data directory and every directory in it 0700, every
 * file 0600 (git's immutable objects in the checkpoint store 0400: owner-only, read-only by git's
 * own design), under umask 000.
 */
describe("chaos: file modes", () => {
  it("keeps everything under the data directory private whatever the umask", async () => {
    const { stdout } = await promisify(execFile)(
      process.execPath,
      ["--import", "tsx", "test/chaos/fileModesChild.ts"],
      { timeout: 120_000 },
    );
    const report = JSON.parse(stdout.trim().split("\n").at(-1)!) as {
      root: string;
      entries: Array<{ path: string; kind: string; mode: number }>;
    };
    try {
      // the log, state, lock, host records and the checkpoint store's objects
      expect(report.entries.length).toBeGreaterThan(10);
      const wrong = report.entries
        .filter((e) =>
          e.kind === "dir"
            ? e.mode !== 0o700
            : e.kind === "file"
              ? !(e.mode === 0o600 || (e.mode === 0o400 && e.path.includes("/objects/")))
              : true,
        )
        .map((e) => `${e.path} (${e.kind}) ${e.mode.toString(8)}`);
      expect(wrong).toEqual([]);
      tallyChaos("file modes", { properties: 1, runs: report.entries.length });
    } finally {
      await rm(report.root, { recursive: true, force: true });
    }
  });
});
