import { spawn } from "node:child_process";
import { chmod, mkdtemp, readFile, rm, stat, writeFile } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { createRuntime, createScriptedAdapter, keyedScript, type RuntimeFailure } from "../../src/index.js";
import { isRunning } from "../../src/runtime/hosts/process.js";
import { gitDouble, type RestoreBehaviour } from "../checkpoints/gitDouble.js";
import { isolatedHome, useEnv, useHome } from "../checkpoints/isolated.js";
import { snapshotFiles } from "../support/files.js";

/**
 * A runtime SIGKILLed in the middle of a rollback's file restore, at a point made exact by a
 * git double that holds the restore's work-tree write (before it, or after it wrote the
 * files). The restore was announced durably before any file changed; the next runtime
 * finishes it (contents and exact modes) and records the rollback as it would have been; and
 * the git child of the killed runtime died with it.
 */

const child = join(import.meta.dirname, "restoreChild.ts");

let home: Awaited<ReturnType<typeof isolatedHome>>;
let restoreHome: () => void;
beforeAll(async () => {
  home = await isolatedHome();
  restoreHome = useHome(home.env); // the reopened runtime in this process reads this HOME's git config
});
afterAll(async () => {
  restoreHome();
  await home.cleanup();
});

interface Logged {
  seq: number;
  event: { type: string; [key: string]: unknown };
}
const readLog = async (dataDir: string): Promise<Logged[]> =>
  (await readFile(join(dataDir, "events.jsonl"), "utf8"))
    .trim()
    .split("\n")
    .map((line) => JSON.parse(line) as Logged);
const modeOf = async (path: string) => ((await stat(path)).mode & 0o7777).toString(8);

describe("a runtime killed during a rollback's file restore", () => {
  it.each<RestoreBehaviour>(["hold", "hold-after"])(
    "killed at %s: the announce was durable, " +
      "the next runtime finishes the restore, and the git child died with the runtime",
    async (behaviour) => {
      const dataDir = await mkdtemp(join(tmpdir(), "tiller-restore-crash-"));
      const work = await mkdtemp(join(tmpdir(), "tiller-restore-work-"));
      const git = await gitDouble(behaviour);
      try {
        await writeFile(join(work, "secret.env"), "KEY=mine\n");
        await chmod(join(work, "secret.env"), 0o600);
        const proc = spawn(process.execPath, ["--import", "tsx", child, dataDir, work], {
          env: { ...home.env, ...git.env },
          stdio: ["ignore", "ignore", "inherit"],
        });
        const exited = new Promise<NodeJS.Signals | null>((resolve) =>
          proc.on("exit", (_code, signal) => resolve(signal)),
        );
        const gitPid = await git.held;
        process.kill(proc.pid!, "SIGKILL");
        expect(await exited).toBe("SIGKILL");

        // What the killed runtime left: the announce (durable before any file changed), no rollback.applied.
        const left = await readLog(dataDir);
        const announce = left.find((r) => r.event.type === "checkpoint.restore_started")?.event;
        expect(announce).toMatchObject({
          files: [
            { path: "one.txt", change: "modified" },
            { path: "secret.env", change: "modified" },
            { path: "two.txt", change: "deleted" },
          ],
          provider: "divergent",
        });
        expect(left.some((r) => r.event.type === "rollback.applied")).toBe(false);
        const before = await snapshotFiles(work);
        if (behaviour === "hold")
          expect(before).toEqual({ "one.txt": "one changed\n", "two.txt": "two\n", "secret.env": "KEY=changed\n" });
        else expect(before).toEqual({ "one.txt": "one\n", "secret.env": "KEY=mine\n" });

        const rt = await createRuntime({
          dataDir,
          checkpoints: true,
          providers: { s: createScriptedAdapter({ capabilities: { threads: { canRollbackThread: false } } }) },
        });
        try {
          const log = await readLog(dataDir);
          const settled = log.filter((r) => r.event.type === "checkpoint.restore_settled").map((r) => r.event);
          expect(settled).toMatchObject([
            { outcome: "finished", toRunId: announce!.toRunId, checkpointId: announce!.checkpointId },
          ]);
          const applied = log.filter((r) => r.event.type === "rollback.applied").map((r) => r.event);
          const { type: _type, files, ...outcome } = announce!;
          expect(applied).toEqual([{ ...outcome, type: "rollback.applied", files }]);
          expect(
            log.some(
              (r) => r.event.type === "warning" && String(r.event.message).includes("was interrupted by a restart"),
            ),
          ).toBe(false);

          const [thread] = rt.listThreads();
          expect((await rt.readThread(thread!.threadId)).runs.map((r) => r.status)).toEqual([
            "completed",
            "rolled_back",
          ]);
          expect(await snapshotFiles(work)).toEqual({ "one.txt": "one\n", "secret.env": "KEY=mine\n" });
          expect([await modeOf(join(work, "one.txt")), await modeOf(join(work, "secret.env"))]).toEqual([
            (0o666 & ~process.umask()).toString(8),
            "600",
          ]);

          const next = await rt.waitForRun(
            (await rt.sendMessage({ threadId: thread!.threadId, text: "back again" })).runId,
          );
          expect(next.status).toBe("completed");
        } finally {
          await rt.close();
        }

        // The killed runtime's git did not outlive it (the kernel killed it with its parent).
        await git.gone;
        expect(isRunning(gitPid)).toBe(false);
      } finally {
        await git.cleanup();
        await rm(dataDir, { recursive: true, force: true });
        await rm(work, { recursive: true, force: true });
      }
    },
    60_000,
  );

  it(
    "a restore the next runtime cannot finish is reported with the files in an unknown state, " +
      "and nothing counts as rolled back",
    async () => {
      const dataDir = await mkdtemp(join(tmpdir(), "tiller-restore-crash-"));
      const work = await mkdtemp(join(tmpdir(), "tiller-restore-work-"));
      const git = await gitDouble("hold");
      try {
        await writeFile(join(work, "secret.env"), "KEY=mine\n");
        const proc = spawn(process.execPath, ["--import", "tsx", child, dataDir, work], {
          env: { ...home.env, ...git.env },
          stdio: ["ignore", "ignore", "inherit"],
        });
        const exited = new Promise<NodeJS.Signals | null>((resolve) =>
          proc.on("exit", (_code, signal) => resolve(signal)),
        );
        await git.held;
        process.kill(proc.pid!, "SIGKILL");
        await exited;
        // The checkpoint repository is gone by the time the runtime comes back.
        await rm(join(dataDir, "checkpoints.git"), { recursive: true, force: true });

        const rt = await createRuntime({ dataDir, checkpoints: true, providers: { s: createScriptedAdapter() } });
        try {
          const log = await readLog(dataDir);
          const announce = log.find((r) => r.event.type === "checkpoint.restore_started")!.event;
          const settled = log.filter((r) => r.event.type === "checkpoint.restore_settled").map((r) => r.event);
          expect(settled).toMatchObject([
            { outcome: "unknown", files: announce.files, checkpointId: announce.checkpointId },
          ]);
          expect(String(settled[0]!.message)).toContain("one.txt, secret.env, two.txt");
          expect(log.filter((r) => r.event.type === "rollback.applied").map((r) => r.event)).toMatchObject([
            { rolledBackRunIds: [], checkpointId: null, provider: "divergent" },
          ]);
          const [thread] = rt.listThreads();
          expect((await rt.readThread(thread!.threadId)).runs.map((r) => r.status)).toEqual(["completed", "completed"]);
        } finally {
          await rt.close();
        }
      } finally {
        await git.cleanup();
        await rm(dataDir, { recursive: true, force: true });
        await rm(work, { recursive: true, force: true });
      }
    },
    60_000,
  );

  it(
    "a runtime closed while a restore's git hangs kills that git; " +
      "the rollback rejects as closed and the next runtime finishes it",
    async () => {
      const dataDir = await mkdtemp(join(tmpdir(), "tiller-restore-close-"));
      const work = await mkdtemp(join(tmpdir(), "tiller-restore-work-"));
      const git = await gitDouble("hold");
      const restoreEnv = useEnv(git.env); // read when the runtime opens its checkpoint store
      const change = (path: string, content: string) => ({
        type: "file_change" as const,
        path,
        diff: `+${content}`,
        content,
      });
      const script = keyedScript({ "[r1]": [change("one.txt", "one\n")], "[r2]": [change("one.txt", "two\n")] });
      // Work that close() cut short ends `closed`: that is no failure to report.
      const failures: RuntimeFailure[] = [];
      try {
        const rt = await createRuntime({
          dataDir,
          checkpoints: true,
          providers: { s: createScriptedAdapter({ script }) },
          onFailure: (f) => failures.push(f),
        });
        const { threadId } = await rt.createThread({ providerTarget: "s", cwd: work });
        const r1 = await rt.waitForRun((await rt.sendMessage({ threadId, text: "[r1]" })).runId);
        await rt.waitForRun((await rt.sendMessage({ threadId, text: "[r2]" })).runId);
        const rollback = rt.rollback({ threadId, toRunId: r1.runId }).then(
          () => null,
          (error: unknown) => error,
        );
        const gitPid = await git.held;
        await rt.close(); // gives the rollback its grace, then closes the store, which kills the held git
        await git.gone;
        expect(isRunning(gitPid)).toBe(false);
        expect(await rollback).toMatchObject({ code: "closed" });
        expect(failures).toEqual([]);
        const left = await readLog(dataDir);
        expect(left.some((r) => r.event.type === "checkpoint.restore_started")).toBe(true);
        expect(left.some((r) => r.event.type === "rollback.applied")).toBe(false);
        restoreEnv();

        const again = await createRuntime({
          dataDir,
          checkpoints: true,
          providers: { s: createScriptedAdapter({ script }) },
        });
        try {
          const log = await readLog(dataDir);
          expect(log.filter((r) => r.event.type === "checkpoint.restore_settled").map((r) => r.event.outcome)).toEqual([
            "finished",
          ]);
          expect((await again.readThread(threadId)).runs.map((r) => r.status)).toEqual(["completed", "rolled_back"]);
          expect(await readFile(join(work, "one.txt"), "utf8")).toBe("one\n");
        } finally {
          await again.close();
        }
      } finally {
        restoreEnv();
        await git.cleanup();
        await rm(dataDir, { recursive: true, force: true });
        await rm(work, { recursive: true, force: true });
      }
    },
    60_000,
  );
});
