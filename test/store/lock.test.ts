import { spawn } from "node:child_process";
import { readlink, readdir, readFile, chmod, mkdtemp, rm, stat, writeFile } from "node:fs/promises";
import { hostname, tmpdir } from "node:os";
import { join } from "node:path";
import { afterEach, beforeEach, describe, expect, it } from "vitest";
import { DataDirLockedError } from "../../src/domain/errors.js";
import { processStartTime } from "../../src/runtime/hosts/process.js";
import { acquireDataDirLock } from "../../src/runtime/store/lock.js";
import type { DataDirLock } from "../../src/runtime/store/lock.js";
import { LineChild } from "../chaos/lockDriver.js";

/**
 * The lock is the kernel's (an open file description lock on LOCK): what LOCK says never decides.
 * Another holder is a real process (lockHolder.ts) holding the kernel lock.
 */

let dir: string;
const held: DataDirLock[] = [];
const children: LineChild[] = [];

beforeEach(async () => {
  dir = await mkdtemp(join(tmpdir(), "tiller-lock-"));
});

afterEach(async () => {
  await Promise.all(children.splice(0).map((c) => c.stop()));
  await Promise.allSettled(held.splice(0).map((lock) => lock.release()));
  await rm(dir, { recursive: true, force: true });
});

async function acquire(dataDir = dir): Promise<DataDirLock> {
  const lock = await acquireDataDirLock(dataDir);
  held.push(lock);
  return lock;
}

/** Another process holding the lock on `dir` (it has said `held`). */
async function otherHolder(): Promise<LineChild> {
  const child = new LineChild(join(import.meta.dirname, "lockHolder.ts"), [dir]);
  children.push(child);
  expect(await child.next()).toBe("ready");
  expect(await child.ask("go")).toBe("held");
  return child;
}

async function deadPid(): Promise<number> {
  const child = spawn(process.execPath, ["-e", ""], { stdio: "ignore" });
  await new Promise((resolve) => child.once("exit", resolve));
  if (child.pid === undefined) throw new Error("spawn failed");
  return child.pid;
}

const bootId = (await readFile("/proc/sys/kernel/random/boot_id", "utf8").catch(() => "")).trim() || null;
const lockFile = () => join(dir, "LOCK");
const holderOf = async (path: string) => JSON.parse(await readFile(path, "utf8")) as Record<string, unknown>;

/** A LOCK record as the pid/start-time/boot-id lock of before wrote it: believable, and never a reason. */
const oldRecord = (pid: number, startTime: string | null, boot: string | null) =>
  JSON.stringify({ pid, startTime, bootId: boot, nonce: "0".repeat(32), acquiredAt: new Date().toISOString() }) + "\n";

describe("acquireDataDirLock", () => {
  it("writes a LOCK naming this process (pid, host, since when), mode 0600, creating the directory", async () => {
    const dataDir = join(dir, "data");
    const lock = await acquire(dataDir);
    expect(lock.path).toBe(join(dataDir, "LOCK"));
    const content = await holderOf(lock.path);
    expect(content).toEqual({ pid: process.pid, host: hostname(), acquiredAt: expect.any(String) });
    expect(Number.isNaN(Date.parse(content.acquiredAt as string))).toBe(false);
    expect((await stat(lock.path)).mode & 0o777).toBe(0o600);
    expect(await readdir(dataDir)).toEqual(["LOCK"]);
  });

  it("makes the LOCK 0600 whatever the umask, and whatever mode a LOCK left behind had", async () => {
    const previous = process.umask(0o277); // would leave 0400
    try {
      const lock = await acquire();
      expect((await stat(lock.path)).mode & 0o777).toBe(0o600);
    } finally {
      process.umask(previous);
    }
    await held.pop()!.release();
    await writeFile(lockFile(), "left behind");
    await chmod(lockFile(), 0o644);
    const lock = await acquire();
    expect((await stat(lock.path)).mode & 0o777).toBe(0o600);
  });

  it("refuses a second acquisition in the same process (two runtimes in one process), naming the holder", async () => {
    await acquire();
    const error = await acquireDataDirLock(dir).catch((e: unknown) => e);
    expect(error).toBeInstanceOf(DataDirLockedError);
    expect(error).toMatchObject({ code: "data_dir_locked", details: { holderPid: process.pid } });
    expect((error as Error).message).toContain(`pid ${process.pid} on host ${JSON.stringify(hostname())}`);
  });

  it("refuses concurrent acquisitions racing in the same process", async () => {
    const results = await Promise.allSettled(Array.from({ length: 8 }, () => acquireDataDirLock(dir)));
    const won = results.filter((r) => r.status === "fulfilled");
    expect(won).toHaveLength(1);
    held.push((won[0] as PromiseFulfilledResult<DataDirLock>).value);
    for (const r of results.filter((r) => r.status === "rejected")) {
      expect(r).toMatchObject({ reason: expect.objectContaining({ code: "data_dir_locked" }) });
    }
  });

  it("refuses a lock another process holds, and leaves its LOCK alone", async () => {
    const child = await otherHolder();
    const content = await readFile(lockFile(), "utf8");
    await expect(acquireDataDirLock(dir)).rejects.toMatchObject({
      code: "data_dir_locked",
      details: { holderPid: child.proc.pid },
    });
    expect(await readFile(lockFile(), "utf8")).toBe(content);
    expect(await readdir(dir)).toEqual(["LOCK"]);
  });

  describe("what a held LOCK says is never a reason to take it", () => {
    const says: Array<[string, () => Promise<string>]> = [
      [
        "a live pid with its true start time but another boot id",
        async () => oldRecord(process.ppid, await processStartTime(process.ppid), "another-boot"),
      ],
      ["pid 1 with another start time (a holder in its own pid namespace)", async () => oldRecord(1, "1", bootId)],
      ["a pid that is dead here", async () => oldRecord(await deadPid(), "1", bootId)],
      ["nothing readable", async () => "{garbage"],
      ["nothing at all", async () => ""],
    ];
    for (const [what, content] of says) {
      it(`a LOCK naming ${what}, held by another process: locked, LOCK untouched`, async () => {
        await otherHolder();
        const written = await content();
        await writeFile(lockFile(), written); // same file, other words: the kernel lock is still on it
        await expect(acquireDataDirLock(dir)).rejects.toMatchObject({ code: "data_dir_locked" });
        expect(await readFile(lockFile(), "utf8")).toBe(written);
      });
    }
  });

  it("a LOCK its holder left behind (no kernel lock on it) is taken, whatever it names", async () => {
    const leftovers = [
      oldRecord(process.ppid, await processStartTime(process.ppid), bootId), // a live process's true identity
      oldRecord(await deadPid(), "1", bootId),
      JSON.stringify({ pid: 1, host: "elsewhere", acquiredAt: new Date().toISOString() }),
      "",
      "{garbage",
    ];
    for (const content of leftovers) {
      await writeFile(lockFile(), content);
      const lock = await acquire();
      expect(await holderOf(lock.path)).toMatchObject({ pid: process.pid });
      await held.pop()!.release();
      expect(await readdir(dir)).toEqual([]);
    }
  });

  it("a holder killed by SIGKILL lets go: the kernel drops its lock, and its LOCK is taken", async () => {
    const child = await otherHolder();
    await expect(acquireDataDirLock(dir)).rejects.toMatchObject({ code: "data_dir_locked" });
    const exited = new Promise((resolve) => child.proc.once("exit", resolve));
    child.proc.kill("SIGKILL");
    await exited;
    expect(await holderOf(lockFile())).toMatchObject({ pid: child.proc.pid }); // left behind
    const lock = await acquire();
    expect(await holderOf(lock.path)).toMatchObject({ pid: process.pid });
  });

  it("a child process of the holder does not inherit the lock", async () => {
    const lock = await acquireDataDirLock(dir);
    const child = spawn(process.execPath, ["-e", "process.stdin.resume()"], { stdio: ["pipe", "ignore", "ignore"] });
    const exited = new Promise((resolve) => child.once("exit", resolve));
    try {
      await new Promise((resolve) => child.once("spawn", resolve));
      const fds = await readdir(`/proc/${child.pid}/fd`).catch(() => [] as string[]);
      const links = await Promise.all(fds.map((fd) => readlink(`/proc/${child.pid}/fd/${fd}`).catch(() => "")));
      expect(links).not.toContain(lock.path);
      await lock.release();
      await expect(acquire()).resolves.toBeDefined(); // the child still runs
    } finally {
      child.stdin.end();
      await exited;
    }
  });

  it("release leaves a LOCK that is no longer ours in place", async () => {
    const lock = await acquireDataDirLock(dir);
    await rm(lock.path); // never expected; the point is release does not remove someone else's
    const other = await otherHolder();
    await lock.release();
    expect(await holderOf(lockFile())).toMatchObject({ pid: other.proc.pid });
  });

  it("releases idempotently, deletes the LOCK, and can be reacquired, also by another process", async () => {
    const lock = await acquireDataDirLock(dir);
    await lock.release();
    await lock.release();
    await expect(stat(lock.path)).rejects.toMatchObject({ code: "ENOENT" });
    const again = await acquire();
    expect(again.path).toBe(lock.path);
    await held.pop()!.release();
    const child = await otherHolder();
    expect(await child.ask("release")).toBe("released");
    expect(await readdir(dir)).toEqual([]);
  });
});
