/**
 * Single-writer lock on a data directory: a `LOCK` file created with O_EXCL holding
 * `{pid, acquiredAt}`. The OS does not remove it when the holder dies, so a lock whose
 * pid is gone is treated as stale and replaced.
 */
import { mkdir, readFile, unlink, writeFile } from "node:fs/promises";
import { join, resolve } from "node:path";
import { DataDirLockedError } from "../../domain/errors.js";

export interface DataDirLock {
  readonly path: string;
  release(): Promise<void>;
}

/** Lock files held by this process. The pid check cannot tell two runtimes in one process apart. */
const heldHere = new Set<string>();

/** When this process started; a lock carrying our pid but older than this is from a
 * previous process that had the same pid (common in containers, where pids restart at 1). */
const processStartedAt = Date.now() - process.uptime() * 1000;

interface Holder {
  pid: number;
  acquiredAt: number;
}

async function readHolder(lockPath: string): Promise<Holder | undefined> {
  try {
    const value: unknown = JSON.parse(await readFile(lockPath, "utf8"));
    if (typeof value !== "object" || value === null) return undefined;
    const { pid, acquiredAt } = value as Record<string, unknown>;
    if (typeof pid !== "number" || !Number.isInteger(pid) || pid <= 0) return undefined;
    const at = typeof acquiredAt === "string" ? Date.parse(acquiredAt) : Number.NaN;
    return { pid, acquiredAt: at };
  } catch {
    return undefined; // unreadable garbage (or gone already): stale
  }
}

function isAlive(holder: Holder): boolean {
  if (holder.pid === process.pid) {
    // Not in heldHere, so it is either a previous incarnation of our pid or another copy of
    // this module (e.g. a worker thread). Only the former can predate our start.
    return !(holder.acquiredAt < processStartedAt);
  }
  try {
    process.kill(holder.pid, 0);
    return true;
  } catch (error) {
    return (error as NodeJS.ErrnoException).code === "EPERM"; // exists, owned by someone else
  }
}

async function createExclusive(lockPath: string): Promise<boolean> {
  const content = JSON.stringify({ pid: process.pid, acquiredAt: new Date().toISOString() });
  try {
    await writeFile(lockPath, content + "\n", { flag: "wx" });
    return true;
  } catch (error) {
    if ((error as NodeJS.ErrnoException).code === "EEXIST") return false;
    throw error;
  }
}

export async function acquireDataDirLock(dataDir: string): Promise<DataDirLock> {
  const dir = resolve(dataDir);
  const lockPath = join(dir, "LOCK");
  if (heldHere.has(lockPath)) throw new DataDirLockedError(dataDir, process.pid);
  heldHere.add(lockPath); // reserve synchronously so two concurrent acquires here cannot both pass
  try {
    await mkdir(dir, { recursive: true });
    if (!(await createExclusive(lockPath))) {
      const holder = await readHolder(lockPath);
      if (holder && isAlive(holder)) throw new DataDirLockedError(dataDir, holder.pid);
      // Stale. Two processes replacing the same stale lock race here; `wx` makes one of
      // them lose cleanly. (A loser that unlinks *after* the winner re-created the file can
      // still steal it; narrowing that needs a takeover lock, which is not worth it for a
      // "two runtimes started at the same instant on a crashed dir" case.)
      await unlink(lockPath).catch((error: NodeJS.ErrnoException) => {
        if (error.code !== "ENOENT") throw error;
      });
      if (!(await createExclusive(lockPath))) {
        throw new DataDirLockedError(dataDir, (await readHolder(lockPath))?.pid ?? 0);
      }
    }
  } catch (error) {
    heldHere.delete(lockPath);
    throw error;
  }

  let released: Promise<void> | undefined;
  return {
    path: lockPath,
    release() {
      released ??= unlink(lockPath).then(
        () => void heldHere.delete(lockPath),
        (error: NodeJS.ErrnoException) => {
          if (error.code === "ENOENT") return void heldHere.delete(lockPath);
          released = undefined; // still held; let the caller retry
          throw error;
        },
      );
      return released;
    },
  };
}
