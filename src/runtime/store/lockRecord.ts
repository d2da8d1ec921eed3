/**
 * What the data-directory lock files hold, and whether the process they name still lives.
 *
 * A holder is named by pid plus the kernel's start time of that process (and the boot id),
 * so a pid the kernel handed to another process since (common in containers, where pids
 * restart at 1) is recognised as a different process, and a lock from before a reboot as
 * stale. Where /proc is missing only the pid can be probed: a recycled pid then reads as
 * alive, which keeps the directory locked (the safe mistake) rather than admitting two.
 */
import { createHash, randomBytes } from "node:crypto";
import { open, readFile } from "node:fs/promises";
import { z } from "zod";
import { processStartTime } from "../hosts/process.js";

const LockRecordSchema = z.object({
  pid: z.number().int().positive(),
  /** Kernel start time of `pid` (clock ticks since boot, /proc/<pid>/stat field 22); null without /proc. */
  startTime: z.string().regex(/^\d+$/).nullable(),
  bootId: z.string().min(1).nullable(),
  /** Unique per acquisition attempt: names this lock generation (also in takeover file names). */
  nonce: z.string().regex(/^[0-9a-f]{32}$/),
  acquiredAt: z.string(),
});
export type LockRecord = z.infer<typeof LockRecordSchema>;

/**
 * One reading of a lock file. `id` names exactly this content: the nonce of a record, else a
 * hash of the bytes and the inode (an empty, half-written or foreign file has no nonce).
 */
export type SeenLock = { kind: "record"; id: string; record: LockRecord } | { kind: "garbage"; id: string };

export const holderPidOf = (seen: SeenLock): number => (seen.kind === "record" ? seen.record.pid : 0);

interface Self {
  pid: number;
  startTime: string | null;
  bootId: string | null;
  /** /proc is there: a pid missing from it is gone (not merely unknown). */
  proc: boolean;
}

let self: Promise<Self> | undefined;

function whoAmI(): Promise<Self> {
  self ??= (async () => {
    const [startTime, bootId] = await Promise.all([
      processStartTime(process.pid),
      readFile("/proc/sys/kernel/random/boot_id", "utf8").then(
        (s) => s.trim() || null,
        () => null,
      ),
    ]);
    return { pid: process.pid, startTime, bootId, proc: startTime !== null };
  })();
  return self;
}

export async function newLockRecord(now: Date): Promise<LockRecord> {
  const me = await whoAmI();
  return {
    pid: me.pid,
    startTime: me.startTime,
    bootId: me.bootId,
    nonce: randomBytes(16).toString("hex"),
    acquiredAt: now.toISOString(),
  };
}

/** Reads a lock file; undefined when it is not there. */
export async function readLockFile(path: string): Promise<SeenLock | undefined> {
  let handle;
  try {
    handle = await open(path, "r");
  } catch (error) {
    if ((error as NodeJS.ErrnoException).code === "ENOENT") return undefined;
    throw error;
  }
  try {
    // Bytes and inode from one open file: the identity must describe a single file.
    const [bytes, info] = await Promise.all([handle.readFile(), handle.stat({ bigint: true })]);
    return identify(bytes, `${info.dev}:${info.ino}`);
  } finally {
    await handle.close();
  }
}

function identify(bytes: Buffer, inode: string): SeenLock {
  let value: unknown;
  try {
    value = JSON.parse(bytes.toString("utf8"));
  } catch {
    value = undefined;
  }
  const record = LockRecordSchema.safeParse(value);
  if (record.success) return { kind: "record", id: `n${record.data.nonce}`, record: record.data };
  return {
    kind: "garbage",
    id: `h${createHash("sha256").update(inode).update("\0").update(bytes).digest("hex").slice(0, 32)}`,
  };
}

type ProcState = { state: string; startTime: string } | "gone" | "unknown";

async function procState(pid: number, me: Self): Promise<ProcState> {
  try {
    const stat = await readFile(`/proc/${pid}/stat`, "utf8");
    // The command name (field 2) may hold spaces and parentheses: count fields after the last ')'.
    const fields = stat.slice(stat.lastIndexOf(")") + 2).split(" ");
    return { state: fields[0] ?? "", startTime: fields[19] ?? "" };
  } catch {
    return me.proc ? "gone" : "unknown";
  }
}

/** Signal probe: EPERM means the process exists but belongs to someone else. */
function probe(pid: number): boolean {
  try {
    process.kill(pid, 0);
    return true;
  } catch (error) {
    return (error as NodeJS.ErrnoException).code === "EPERM";
  }
}

/** Does the process that wrote this still run? A zombie does not count: it holds nothing any more. */
export async function holderAlive(seen: SeenLock): Promise<boolean> {
  if (seen.kind === "garbage") return false;
  return aliveAs(seen.record.pid, seen.record.startTime, seen.record.bootId, await whoAmI());
}

/** For the pid and start time a temp file carries in its name. */
export async function processAlive(pid: number, startTime: string | null): Promise<boolean> {
  return aliveAs(pid, startTime, null, await whoAmI());
}

async function aliveAs(pid: number, startTime: string | null, bootId: string | null, me: Self): Promise<boolean> {
  if (bootId !== null && me.bootId !== null && bootId !== me.bootId) return false; // written before a reboot
  const proc = await procState(pid, me);
  if (proc === "unknown") return probe(pid);
  if (proc === "gone" || proc.state === "Z") return false;
  return startTime === null || proc.startTime === startTime;
}
