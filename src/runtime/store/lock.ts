/**
 * Single-writer lock on a data directory: an exclusive kernel lock on the file `LOCK` in it.
 *
 * The lock is an open file description lock (`fcntl(F_OFD_SETLK)` on Linux, `flock` on macOS;
 * fs-native-extensions, prebuilt). The kernel decides who holds it and drops it when the holder's
 * file is closed, which it does itself when the process dies, SIGKILL included. Nothing is
 * compared between processes, so it holds where pids, start times and boot ids say nothing:
 * another pid namespace, another container on the same volume, another process in this one
 * (each acquisition opens the file anew, and two open file descriptions exclude each other even
 * in one process). The file is opened close-on-exec: a child process never inherits the lock.
 *
 * What the file holds, `{pid, host, acquiredAt}` of the holder, serves only to name the holder in
 * `data_dir_locked`; it is never a reason to take the lock or to refuse it. A `LOCK` left by a
 * holder that died has no kernel lock on it any more and is simply taken (and overwritten).
 *
 * The holder deletes `LOCK` when it lets go, still holding the kernel lock. A contender that
 * opened the file just before and locks it just after holds a lock on a deleted file, so every
 * acquisition checks, once locked, that `LOCK` is still the file it locked, and starts again if
 * not. The file is mode 0600 whatever the umask; the directory's own mode is not this file's
 * concern. What holds on a network file system: docs/guarantees.md.
 */
import { constants } from "node:fs";
import { mkdir, open, stat, unlink, type FileHandle } from "node:fs/promises";
import { hostname } from "node:os";
import { join, resolve } from "node:path";
import { z } from "zod";
import { DataDirLockedError } from "../../domain/errors.js";

export interface DataDirLock {
  readonly path: string;
  release(): Promise<void>;
}

const LOCK = "LOCK";
/** Each repeat means a holder let go between our open and our lock; this many in a row is a contender. */
const MAX_LOOKS = 64;

/** What a `LOCK` says about its holder: for the error message only. */
const HolderSchema = z.object({
  pid: z.number().int().positive(),
  host: z.string(),
  acquiredAt: z.string(),
});
type Holder = z.infer<typeof HolderSchema>;

export async function acquireDataDirLock(dataDir: string): Promise<DataDirLock> {
  const dir = resolve(dataDir);
  const path = join(dir, LOCK);
  await mkdir(dir, { recursive: true });
  let holder: Holder | undefined;
  for (let look = 0; look < MAX_LOOKS; look++) {
    const handle = await open(path, constants.O_RDWR | constants.O_CREAT | constants.O_NOFOLLOW, 0o600);
    let kept = false;
    try {
      if (!(await lockFile(handle, path))) {
        holder = await readHolder(handle);
        throw new DataDirLockedError(dataDir, holder?.pid ?? 0, holder && describe(holder));
      }
      if (!(await isAt(handle, path))) continue; // locked a LOCK its holder deleted as it let go: look again
      await writeHolder(handle);
      kept = true;
      return heldLock(handle, path);
    } finally {
      if (!kept) await handle.close(); // closing gives the kernel lock back, if it was taken
    }
  }
  throw new DataDirLockedError(dataDir, holder?.pid ?? 0, holder && describe(holder));
}

function heldLock(handle: FileHandle, path: string): DataDirLock {
  let released: Promise<void> | undefined;
  return {
    path,
    release() {
      released ??= (async () => {
        try {
          // Deleted while still locked, and only if it is still ours (nobody else deletes it while we hold it).
          if (await isAt(handle, path)) await unlink(path).catch(ignoreMissing);
        } finally {
          await handle.close(); // the kernel lock goes with the last descriptor of this open file
        }
      })();
      return released;
    },
  };
}

type TryLock = (fd: number) => boolean;
let addon: Promise<TryLock> | undefined;

/**
 * The addon is loaded on first use, not at import: where it has no build for the platform, importing the runtime still
 * works and opening a data directory fails as `store_failed`.
 */
function loadTryLock(path: string): Promise<TryLock> {
  addon ??= import("fs-native-extensions").then(
    (native) => native.tryLock,
    (error: unknown) => {
      addon = undefined;
      throw lockError(path, error, "cannot load the file-lock addon (fs-native-extensions)", "ENOTSUP");
    },
  );
  return addon;
}

/** Takes the kernel lock without waiting: false when another open file holds it. */
async function lockFile(handle: FileHandle, path: string): Promise<boolean> {
  const tryLock = await loadTryLock(path);
  try {
    return tryLock(handle.fd);
  } catch (error) {
    // Typed like any file system failure (store_failed): e.g. ENOLCK where a network file system has no lock service.
    throw lockError(path, error, `cannot lock ${path}`, "ENOLCK");
  }
}

function lockError(path: string, error: unknown, what: string, fallbackCode: string): Error {
  const code = (error as { code?: unknown }).code;
  return Object.assign(new Error(`${what}: ${(error as Error).message}`), {
    code: typeof code === "string" ? code : fallbackCode,
    syscall: "lock",
    path,
    cause: error,
  });
}

/** Is `path` still the file this handle has open (the same device and inode)? */
async function isAt(handle: FileHandle, path: string): Promise<boolean> {
  const [mine, there] = await Promise.all([
    handle.stat({ bigint: true }),
    stat(path, { bigint: true }).catch((error: unknown) => ignoreMissing(error)),
  ]);
  return there !== undefined && there.dev === mine.dev && there.ino === mine.ino;
}

async function writeHolder(handle: FileHandle): Promise<void> {
  // The umask may have taken bits away, never added; a LOCK left behind may have any mode: make it exact.
  if (((await handle.stat()).mode & 0o777) !== 0o600) await handle.chmod(0o600);
  const holder: Holder = { pid: process.pid, host: hostname(), acquiredAt: new Date().toISOString() };
  await handle.truncate(0);
  await handle.write(JSON.stringify(holder) + "\n", 0);
}

/** The holder a locked `LOCK` names; undefined while it is still being written, or when it says nothing readable. */
async function readHolder(handle: FileHandle): Promise<Holder | undefined> {
  const bytes = await handle.readFile();
  let value: unknown;
  try {
    value = JSON.parse(bytes.toString("utf8"));
  } catch {
    return undefined;
  }
  const parsed = HolderSchema.safeParse(value);
  return parsed.success ? parsed.data : undefined;
}

const describe = (holder: Holder): string =>
  `pid ${holder.pid} on host ${JSON.stringify(holder.host)}, since ${holder.acquiredAt}`;

function ignoreMissing(error: unknown): undefined {
  if ((error as NodeJS.ErrnoException).code === "ENOENT") return undefined;
  throw error;
}
