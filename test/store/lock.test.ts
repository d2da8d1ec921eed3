import { spawn } from "node:child_process";
import { mkdtemp, readFile, rm, stat, writeFile } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterEach, beforeEach, describe, expect, it } from "vitest";
import { DataDirLockedError } from "../../src/domain/errors.js";
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

describe("acquireDataDirLock", () => {
  it("writes a LOCK file with pid and time, creating the directory", async () => {
    const dataDir = join(dir, "data");
    const lock = await acquire(dataDir);
    expect(lock.path).toBe(join(dataDir, "LOCK"));
    const content = JSON.parse(await readFile(lock.path, "utf8")) as { pid: number; acquiredAt: string };
    expect(content.pid).toBe(process.pid);
    expect(Number.isNaN(Date.parse(content.acquiredAt))).toBe(false);
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

  it("refuses a lock held by another live process", async () => {
    const lockPath = join(dir, "LOCK");
    const content = JSON.stringify({ pid: process.ppid, acquiredAt: new Date().toISOString() });
    await writeFile(lockPath, content);
    await expect(acquireDataDirLock(dir)).rejects.toMatchObject({
      code: "data_dir_locked",
      details: { holderPid: process.ppid },
    });
    expect(await readFile(lockPath, "utf8")).toBe(content); // left alone
  });

  it("replaces a stale lock left by a dead process", async () => {
    const pid = await deadPid();
    await writeFile(join(dir, "LOCK"), JSON.stringify({ pid, acquiredAt: new Date().toISOString() }));
    const lock = await acquire();
    expect(JSON.parse(await readFile(lock.path, "utf8"))).toMatchObject({ pid: process.pid });
  });

  it("replaces an unreadable lock file", async () => {
    await writeFile(join(dir, "LOCK"), "{garbage");
    const lock = await acquire();
    expect(JSON.parse(await readFile(lock.path, "utf8"))).toMatchObject({ pid: process.pid });
  });

  it("replaces a lock carrying our pid from before this process started (pid reuse)", async () => {
    await writeFile(join(dir, "LOCK"), JSON.stringify({ pid: process.pid, acquiredAt: "2000-01-01T00:00:00.000Z" }));
    await expect(acquire()).resolves.toBeDefined();
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
