import type { Readable } from "node:stream";
import { afterEach, describe, expect, it } from "vitest";
import { readLines } from "../../src/adapters/kit/lines.js";
import type { SpawnedHost } from "../../src/adapters/kit/hostSpec.js";
import { groupRunning, spawnHost, stopProcessGroup } from "../../src/runtime/hosts/process.js";

/** spawnHost at the process boundary, with real processes (sh): what the registry relies on. */

const started: SpawnedHost[] = [];
afterEach(async () => {
  for (const host of started.splice(0)) await stopProcessGroup(host.pid, 0);
});

async function start(script: string, env: Record<string, string> = {}): Promise<SpawnedHost> {
  const host = await spawnHost({ command: "sh", args: ["-c", script], env });
  started.push(host);
  return host;
}

/** The lines of a stream up to the first that `last` accepts, read as the host channels read (lines.ts). */
function linesUntil(stream: Readable, last: (line: string) => boolean): Promise<string[]> {
  const lines: string[] = [];
  return new Promise((resolve, reject) => {
    stream.once("end", () => reject(new Error(`the stream ended after ${JSON.stringify(lines)}`)));
    const reader = readLines(stream, {
      maxLineBytes: 1024 * 1024,
      onLine: (line) => {
        lines.push(line);
        if (!last(line)) return;
        reader.stop();
        resolve(lines);
      },
      onOverflow: () => undefined,
    });
  });
}

describe("host processes (spawnHost)", () => {
  // execa lets an output stream nobody reads flow into the void one tick after the spawn; a
  // channel attaches later, and a host's first frame may be there already.
  it(
    "what a running host wrote before its channel " + "attached is kept for the channel (stdout, then stderr)",
    async () => {
      // Each host writes to one stream, then to the other (a line there proves the first was
      // written), then waits for a go on stdin before its last line.
      const frameFirst = await start("echo first-frame; echo written >&2; read go; echo last-frame");
      expect(await linesUntil(frameFirst.child.stderr!, (line) => line === "written")).toEqual(["written"]);
      const frames = linesUntil(frameFirst.child.stdout!, (line) => line === "last-frame");
      frameFirst.child.stdin!.write("go\n");
      expect(await frames).toEqual(["first-frame", "last-frame"]);

      const diagnosticFirst = await start("echo first-diagnostic >&2; echo written; read go; echo last-diagnostic >&2");
      expect(await linesUntil(diagnosticFirst.child.stdout!, (line) => line === "written")).toEqual(["written"]);
      const diagnostics = linesUntil(diagnosticFirst.child.stderr!, (line) => line === "last-diagnostic");
      diagnosticFirst.child.stdin!.write("go\n");
      expect(await diagnostics).toEqual(["first-diagnostic", "last-diagnostic"]);
    },
  );

  it(
    "starts with the allowlisted environment plus what its adapter sets, " + "never the rest of the embedder's",
    async () => {
      process.env.TILLER_TEST_EMBEDDER_SECRET = "sk-embedder-secret";
      try {
        const host = await start("env; echo end-of-env; exec sleep 600", {
          TILLER_TEST_ADAPTER_SETTING: "set-by-adapter",
        });
        const env = await linesUntil(host.child.stdout!, (line) => line === "end-of-env");
        expect(env).toContain("TILLER_TEST_ADAPTER_SETTING=set-by-adapter");
        expect(env.some((line) => line.startsWith("PATH="))).toBe(true);
        expect(env.join("\n")).not.toContain("sk-embedder-secret");
      } finally {
        delete process.env.TILLER_TEST_EMBEDDER_SECRET;
      }
    },
  );

  it("reports its exit code, or the signal that ended it", async () => {
    const exiting = await start("exit 3");
    expect(await exiting.exited).toEqual({ code: 3, signal: null });
    const killed = await start("exec sleep 600");
    await stopProcessGroup(killed.pid, 1_000);
    expect(await killed.exited).toEqual({ code: null, signal: "SIGTERM" });
  });

  it(
    "reports the exit even while a grandchild holds its output open; " + "stopping the group ends the grandchild",
    async () => {
      const host = await start("sleep 600 & echo started; exit 0");
      const exit = await host.exited; // within the drain grace, though the pipes are still open
      expect(exit).toEqual({ code: 0, signal: null });
      expect(groupRunning(host.pid)).toBe(true); // the grandchild, in the host's group
      await stopProcessGroup(host.pid, 1_000);
      expect(groupRunning(host.pid)).toBe(false);
    },
  );

  it("a host that cannot be started fails typed (host_unavailable, spawn_failed), naming the command", async () => {
    const failure = await spawnHost({ command: "/nonexistent/tiller-host", args: ["--flag"], env: {} }).then(
      () => null,
      (error: unknown) => error as Error & { code: string; details: Record<string, unknown> },
    );
    expect(failure?.code).toBe("host_unavailable");
    expect(failure?.details).toMatchObject({
      reason: "spawn_failed",
      command: "/nonexistent/tiller-host",
      errno: "ENOENT",
    });
    expect(failure?.message).toContain("/nonexistent/tiller-host");
  });
});
