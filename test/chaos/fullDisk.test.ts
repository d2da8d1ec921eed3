import { execFileSync, spawn } from "node:child_process";
import { mkdtemp, rm } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { describe, expect, it } from "vitest";
import { tallyChaos } from "./tally.js";

/**
 * A real full disk: the child runtime's data directory is a 4 MiB tmpfs mounted in a private
 * mount namespace (`unshare -rm` works without root where user namespaces are allowed; as root
 * a plain mount namespace is used). The namespace, and the mount, end with the child.
 */
function namespaceCommand(): string[] {
  const root = process.getuid?.() === 0;
  try {
    execFileSync("unshare", root ? ["-m", "true"] : ["-rm", "true"], { stdio: "ignore" });
  } catch (error) {
    throw new Error(
      `this test needs a private mount namespace for its tmpfs (unshare ${root ? "-m" : "-rm"} failed: ` +
        `${String(error)}); it is never skipped`,
    );
  }
  return root ? ["unshare", "-m"] : ["unshare", "-rm"];
}

describe("chaos: a full disk", () => {
  it(
    "rejects every waiter at once with store_failed, reports it, " +
      "reopens typed while full and loses nothing acknowledged once space is freed",
    async () => {
      const mount = await mkdtemp(join(tmpdir(), "tiller-full-"));
      try {
        const [cmd, ...args] = namespaceCommand();
        const script =
          `mount -t tmpfs -o size=4m,mode=0700 tmpfs "$1" && ` +
          `exec "$2" --import tsx test/chaos/fullDiskChild.ts "$1"`;
        const child = spawn(cmd!, [...args, "sh", "-c", script, "sh", mount, process.execPath], {
          stdio: ["ignore", "pipe", "pipe"],
        });
        let out = "";
        let err = "";
        child.stdout.on("data", (d: Buffer) => (out += d.toString()));
        child.stderr.on("data", (d: Buffer) => (err += d.toString()));
        const code = await new Promise<number | null>((done) => child.on("exit", done));
        expect(code, err).toBe(0);
        const report = JSON.parse(out.trim().split("\n").at(-1)!) as Record<string, any>;
        expect(report.failures.filter((f: { kind: string }) => f.kind === "store_failed")).toEqual([
          { kind: "store_failed", code: "store_failed" },
        ]);
        expect(report.waiters.length).toBeGreaterThan(0);
        // Every waiter settled (none hangs), each with the typed failure or a terminal it saw before the failure.
        for (const w of report.waiters) expect(["store_failed", "resolved"]).toContain(w);
        expect(report.waiters).toContain("store_failed");
        expect(report.afterFailure).toBe("store_failed");
        expect(report.close).toBe("closed");
        expect(report.reopenFull).toBe("store_failed");
        expect(report.acknowledged).toBeGreaterThan(0);
        expect(report.lost).toEqual([]);
        expect(report.running).toEqual([]);
        tallyChaos("full disk", { properties: 4, runs: report.waiters.length });
      } finally {
        await rm(mount, { recursive: true, force: true });
      }
    },
  );
});
