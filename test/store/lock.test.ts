import { spawn } from "node:child_process";
import { randomBytes } from "node:crypto";
import { link, mkdtemp, readdir, readFile, rm, stat, writeFile } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterEach, beforeEach, describe, expect, it } from "vitest";
import { DataDirLockedError } from "../../src/domain/errors.js";
import { processStartTime } from "../../src/runtime/hosts/process.js";
import { acquireDataDirLock } from "../../src/runtime/store/lock.js";
import type { DataDirLock } from "../../src/runtime/store/lock.js";

let dir: string;
const held: DataDirLock[] = [];

beforeEach(async () => {
  dir = await mkdtemp(join(tmpdir(), "tiller-lock-"));
});

afterEach(async () => {
  await Promise.allSettled(held.splice(0).map((lock) => lock.release()));
  await rm(dir, { recursive: true, force: true });
});

async function acquire(dataDir = dir): Promise<DataDirLock> {
  const lock = await acquireDataDirLock(dataDir);
  held.push(lock);
  return lock;
}

async function deadPid(): Promise<number> {
  const child = spawn(process.execPath, ["-e", ""], { stdio: "ignore" });
  await new Promise((resolve) => child.once("exit", resolve));
  if (child.pid === undefined) throw new Error("spawn failed");
  return child.pid;
}

const bootId = (await readFile("/proc/sys/kernel/random/boot_id", "utf8").catch(() => "")).trim() || null;

/** A lock record as the protocol writes it; by default naming the live parent process (the test runner). */
function record(
  over: Partial<{ pid: number; startTime: string | null; bootId: string | null; nonce: string }> = {},
): string {
  return (
    JSON.stringify({
      pid: process.ppid,
      startTime: null,
      bootId,
      nonce: randomBytes(16).toString("hex"),
      acquiredAt: new Date().toISOString(),
      ...over,
    }) + "\n"
  );
}

const liveParent = async () => record({ pid: process.ppid, startTime: await processStartTime(process.ppid) });
const lockFile = () => join(dir, "LOCK");
const token = (nonceOrRecord: string) =>
  join(dir, `LOCK.takeover.n${(JSON.parse(nonceOrRecord) as { nonce: string }).nonce}`);
const holderOf = async (path: string) =>
  JSON.parse(await readFile(path, "utf8")) as { pid: number; nonce: string; startTime: string | null };

describe("acquireDataDirLock", () => {
  it(
    "writes a LOCK naming this process (pid, kernel start time, " + "boot, nonce), mode 0600, creating the directory",
    async () => {
      const dataDir = join(dir, "data");
      const lock = await acquire(dataDir);
      expect(lock.path).toBe(join(dataDir, "LOCK"));
      const content = JSON.parse(await readFile(lock.path, "utf8")) as Record<string, unknown>;
      expect(content).toMatchObject({
        pid: process.pid,
        startTime: await processStartTime(process.pid),
        bootId,
        nonce: expect.stringMatching(/^[0-9a-f]{32}$/),
      });
      expect(Number.isNaN(Date.parse(content.acquiredAt as string))).toBe(false);
      expect((await stat(lock.path)).mode & 0o777).toBe(0o600);
      expect(await readdir(dataDir)).toEqual(["LOCK"]); // no temp file left behind
    },
  );

  it("makes the LOCK 0600 whatever the umask", async () => {
    const previous = process.umask(0o277); // would leave 0400
    try {
      const lock = await acquire();
      expect((await stat(lock.path)).mode & 0o777).toBe(0o600);
    } finally {
      process.umask(previous);
    }
  });

  it("refuses a second acquisition in the same process", async () => {
    await acquire();
    const error = await acquireDataDirLock(dir).catch((e: unknown) => e);
    expect(error).toBeInstanceOf(DataDirLockedError);
    expect(error).toMatchObject({ code: "data_dir_locked", details: { holderPid: process.pid } });
  });

  it("refuses concurrent acquisitions racing in the same process", async () => {
    const results = await Promise.allSettled([acquireDataDirLock(dir), acquireDataDirLock(dir)]);
    const won = results.filter((r) => r.status === "fulfilled");
    expect(won).toHaveLength(1);
    held.push((won[0] as PromiseFulfilledResult<DataDirLock>).value);
    expect(results.find((r) => r.status === "rejected")).toMatchObject({
      reason: expect.objectContaining({ code: "data_dir_locked" }),
    });
  });

  it("refuses a lock held by another live process (same start time), and leaves it alone", async () => {
    const content = await liveParent();
    await writeFile(lockFile(), content);
    await expect(acquireDataDirLock(dir)).rejects.toMatchObject({
      code: "data_dir_locked",
      details: { holderPid: process.ppid },
    });
    expect(await readFile(lockFile(), "utf8")).toBe(content);
    expect(await readdir(dir)).toEqual(["LOCK"]);
  });

  it("replaces a stale lock left by a dead process", async () => {
    await writeFile(lockFile(), record({ pid: await deadPid(), startTime: "1" }));
    const lock = await acquire();
    expect(await holderOf(lock.path)).toMatchObject({ pid: process.pid });
  });

  it("replaces a lock naming a live pid that another process had (recycled pid: other start time)", async () => {
    const live = await processStartTime(process.ppid);
    expect(live).not.toBeNull();
    await writeFile(lockFile(), record({ pid: process.ppid, startTime: String(Number(live) + 1) }));
    const lock = await acquire();
    expect(await holderOf(lock.path)).toMatchObject({ pid: process.pid });
  });

  it("replaces a lock from before a reboot (other boot id), even where the pid and start time match", async () => {
    await writeFile(
      lockFile(),
      record({ pid: process.ppid, startTime: await processStartTime(process.ppid), bootId: "an-earlier-boot" }),
    );
    await expect(acquire()).resolves.toBeDefined();
  });

  it("replaces an empty, a half-written and an unreadable lock file", async () => {
    for (const content of ["", record().slice(0, 20), "{garbage"]) {
      await writeFile(lockFile(), content);
      const lock = await acquire();
      expect(await holderOf(lock.path)).toMatchObject({ pid: process.pid });
      await held.pop()!.release();
      expect(await readdir(dir)).toEqual([]);
    }
  });

  describe("a crash in the middle of a takeover", () => {
    it("a token left by a taker that died does not lock the directory", async () => {
      const stale = record({ pid: await deadPid(), startTime: "1" });
      await writeFile(lockFile(), stale);
      await writeFile(token(stale), record({ pid: await deadPid(), startTime: "1" })); // the dead taker's claim
      const lock = await acquire();
      expect(await holderOf(lock.path)).toMatchObject({ pid: process.pid });
      expect(await readdir(dir)).toEqual(["LOCK"]); // the dead taker's token swept
    });

    it("nor does a chain of them (a taker of the token died too)", async () => {
      const stale = record({ pid: await deadPid(), startTime: "1" });
      const firstTaker = record({ pid: await deadPid(), startTime: "1" });
      await writeFile(lockFile(), stale);
      await writeFile(token(stale), firstTaker);
      await writeFile(token(firstTaker), record({ pid: await deadPid(), startTime: "1" }));
      const lock = await acquire();
      expect(await holderOf(lock.path)).toMatchObject({ pid: process.pid });
      expect(await readdir(dir)).toEqual(["LOCK"]);
    });

    it("nor a taker that died after putting its record in LOCK, before cleaning up", async () => {
      const taker = record({ pid: await deadPid(), startTime: "1" });
      await writeFile(lockFile(), taker);
      await link(lockFile(), token(record())); // the token it took for the generation before
      await writeFile(join(dir, "LOCK.tmp.999999.1.0123456789abcdef0123456789abcdef"), taker.slice(0, 10)); // its temp
      await acquire();
      expect(await readdir(dir)).toEqual(["LOCK"]);
    });

    it("but a live taker's token means the directory is being taken: locked, nothing touched", async () => {
      const stale = record({ pid: await deadPid(), startTime: "1" });
      const taker = await liveParent();
      await writeFile(lockFile(), stale);
      await writeFile(token(stale), taker);
      await expect(acquireDataDirLock(dir)).rejects.toMatchObject({
        code: "data_dir_locked",
        details: { holderPid: process.ppid },
      });
      expect(await readFile(lockFile(), "utf8")).toBe(stale);
      expect(await readFile(token(stale), "utf8")).toBe(taker);
    });
  });

  it("release leaves a LOCK that is no longer ours in place", async () => {
    const lock = await acquireDataDirLock(dir);
    const other = await liveParent();
    await writeFile(lock.path, other); // never expected; the point is release does not remove someone else's
    await lock.release();
    expect(await readFile(lock.path, "utf8")).toBe(other);
  });

  it("releases idempotently and can be reacquired", async () => {
    const lock = await acquireDataDirLock(dir);
    await lock.release();
    await lock.release();
    await expect(stat(lock.path)).rejects.toMatchObject({ code: "ENOENT" });
    const again = await acquire();
    expect(again.path).toBe(lock.path);
  });
});
