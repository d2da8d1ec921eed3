/**
 * Single-writer lock on a data directory: a `LOCK` file naming its holder (pid, kernel start
 * time, boot id, nonce; see lockRecord.ts).
 *
 * Node has no file-lock call the kernel would drop when the holder dies (flock/fcntl need a
 * native addon), so a dead holder's `LOCK` stays behind and is taken over by an atomic
 * protocol. What makes it hold, with any number of processes racing:
 *
 * 1. A lock file is never seen half-written. A record is written whole to a private temp file
 *    and published by `link` (create only if absent: the fresh case) or `rename` (replace).
 * 2. Replacing a stale file F (LOCK, or a takeover token, below) whose content has identity
 *    `x` (the record's nonce, or a hash of garbage bytes and inode) requires first owning the
 *    token `LOCK.takeover.<x>`, made with `link`, so one process wins it. The owner then reads
 *    F again and replaces it only if it still holds `x`. Nobody else can change F between
 *    that reading and the rename: its writer is dead, a fresh `link` fails while F exists, and
 *    any other taker would need the same token.
 * 3. A token whose owner died (a crash mid-takeover) is itself a stale file and is taken over
 *    by rule 2 (a token for the token), so a crash never locks the directory for good.
 * 4. Tokens are deleted only by their owner (giving up) or by a lock holder. A holder's
 *    presence means every generation a token could guard is over and can never return (nonces
 *    are unique), so a deletion at worst lets a latecomer own a token for a past generation,
 *    and the re-read of rule 2 stops it. Temps are deleted by their writer, or once it is dead.
 *
 * A live holder (or a live process mid-takeover) means `data_dir_locked`. The records and
 * tokens are mode 0600 whatever the umask; the directory's own mode is not this file's concern.
 */
import { link, mkdir, open, readdir, rename, unlink } from "node:fs/promises";
import { join, resolve } from "node:path";
import { DataDirLockedError } from "../../domain/errors.js";
import {
  holderAlive,
  holderPidOf,
  newLockRecord,
  processAlive,
  readLockFile,
  type LockRecord,
  type SeenLock,
} from "./lockRecord.js";

export interface DataDirLock {
  readonly path: string;
  release(): Promise<void>;
}

const LOCK = "LOCK";
const TOKEN_PREFIX = "LOCK.takeover.";
const TEMP_PREFIX = "LOCK.tmp.";
const TEMP_NAME = /^LOCK\.tmp\.(\d+)\.(\d+|x)\.[0-9a-f]{32}(?:\.\d+)?$/;
/** Each repeat means another process changed the files meanwhile; this many means a live contender. */
const MAX_LOOKS = 64;
/** Tokens for tokens: one level per process that died mid-takeover since the last holder swept. */
const MAX_CHAIN = 32;

/** Lock files held by this process. Two runtimes in one process share a pid and start time. */
const heldHere = new Set<string>();

/**
 * `won`: our record is in place; `changed`: the files moved on, look again; a number: a live process's pid is in the
 * way.
 */
type Outcome = "won" | "changed" | number;

export async function acquireDataDirLock(dataDir: string): Promise<DataDirLock> {
  const dir = resolve(dataDir);
  const lockPath = join(dir, LOCK);
  if (heldHere.has(lockPath)) throw new DataDirLockedError(dataDir, process.pid);
  heldHere.add(lockPath); // reserve synchronously so two concurrent acquires here cannot both pass
  let record: LockRecord;
  try {
    await mkdir(dir, { recursive: true });
    const taker = await Taker.start(dir, dataDir);
    record = taker.record;
    try {
      await taker.acquire();
    } finally {
      await taker.dropTemp();
    }
  } catch (error) {
    heldHere.delete(lockPath);
    throw error;
  }

  let released: Promise<void> | undefined;
  return {
    path: lockPath,
    release() {
      released ??= (async () => {
        // Only our own record is removed: a LOCK that is not ours (never expected) belongs to its holder.
        const seen = await readLockFile(lockPath);
        if (seen?.kind === "record" && seen.record.nonce === record.nonce) await unlinkIfThere(lockPath);
        heldHere.delete(lockPath);
      })().catch((error: unknown) => {
        released = undefined; // still held; let the caller retry
        throw error;
      });
      return released;
    },
  };
}

/** One acquisition attempt: our record in a temp file, published under other names by link/rename. */
class Taker {
  private readonly owned = new Set<string>();
  private extraLinks = 0;

  private constructor(
    private readonly dir: string,
    private readonly dataDir: string,
    readonly record: LockRecord,
    private readonly temp: string,
  ) {}

  static async start(dir: string, dataDir: string): Promise<Taker> {
    const record = await newLockRecord(new Date());
    const temp = join(dir, `${TEMP_PREFIX}${record.pid}.${record.startTime ?? "x"}.${record.nonce}`);
    const handle = await open(temp, "wx", 0o600);
    try {
      await handle.chmod(0o600); // the umask may have taken bits away, never added: make it exact
      await handle.writeFile(JSON.stringify(record) + "\n");
    } catch (error) {
      await handle.close();
      await unlinkIfThere(temp);
      throw error;
    }
    await handle.close();
    return new Taker(dir, dataDir, record, temp);
  }

  private get lockPath(): string {
    return join(this.dir, LOCK);
  }

  async acquire(): Promise<void> {
    let lastPid = 0;
    for (let look = 0; look < MAX_LOOKS; look++) {
      if (await this.linkAs(this.lockPath)) return this.sweep();
      const seen = await readLockFile(this.lockPath);
      if (!seen) continue; // released in between: try the fresh way again
      lastPid = holderPidOf(seen);
      if (await holderAlive(seen)) throw new DataDirLockedError(this.dataDir, lastPid);
      const outcome = await this.replace(this.lockPath, seen, 0);
      if (outcome === "won") return this.sweep();
      await this.giveUpTokens();
      if (typeof outcome === "number") throw new DataDirLockedError(this.dataDir, outcome);
    }
    throw new DataDirLockedError(this.dataDir, lastPid);
  }

  /** Rule 2: own the token for `seen`, check `target` still holds it, then put our record in its place. */
  private async replace(target: string, seen: SeenLock, depth: number): Promise<Outcome> {
    const claimed = await this.claim(join(this.dir, TOKEN_PREFIX + seen.id), depth);
    if (claimed !== "won") return claimed;
    if ((await readLockFile(target))?.id !== seen.id) return "changed";
    const extra = `${this.temp}.${++this.extraLinks}`;
    await link(this.temp, extra);
    await rename(extra, target).catch(async (error: unknown) => {
      await unlinkIfThere(extra);
      throw error;
    });
    return "won";
  }

  /** Makes `token` ours: created fresh, or taken over from a taker that died (rule 3). */
  private async claim(token: string, depth: number): Promise<Outcome> {
    if (depth >= MAX_CHAIN) return "changed";
    for (let look = 0; look < MAX_LOOKS; look++) {
      if (await this.linkAs(token)) {
        this.owned.add(token);
        return "won";
      }
      const owner = await readLockFile(token);
      if (!owner) continue; // deleted in between (its owner gave up, or a holder swept)
      if (await holderAlive(owner)) return holderPidOf(owner);
      // Only a token holding our record is ours to give up: deleting one a live chain-taker is
      // about to replace would let a third process create it afresh beside that taker.
      const outcome = await this.replace(token, owner, depth + 1);
      if (outcome === "won") this.owned.add(token);
      return outcome;
    }
    return "changed";
  }

  private async linkAs(path: string): Promise<boolean> {
    try {
      await link(this.temp, path);
      return true;
    } catch (error) {
      if ((error as NodeJS.ErrnoException).code === "EEXIST") return false;
      throw error;
    }
  }

  /** Rule 4, owner's side: tokens we made are given up before we stop acting on them. */
  private async giveUpTokens(): Promise<void> {
    await Promise.all([...this.owned].map(unlinkIfThere));
    this.owned.clear();
  }

  /** Rule 4, holder's side: now that we hold LOCK, leftovers of earlier takeovers can go (best effort). */
  private async sweep(): Promise<void> {
    this.owned.clear();
    const names = await readdir(this.dir).catch(() => [] as string[]);
    await Promise.all(
      names.map(async (name) => {
        const path = join(this.dir, name);
        if (name.startsWith(TOKEN_PREFIX)) return unlinkIfThere(path).catch(() => undefined);
        const temp = TEMP_NAME.exec(name);
        if (!temp || path.startsWith(this.temp)) return;
        if (await processAlive(Number(temp[1]), temp[2] === "x" ? null : temp[2]!)) return;
        await unlinkIfThere(path).catch(() => undefined);
      }),
    );
  }

  /** Best effort: failing here must not lose a lock already won (a temp whose writer is gone is swept later). */
  async dropTemp(): Promise<void> {
    await unlinkIfThere(this.temp).catch(() => undefined);
  }
}

async function unlinkIfThere(path: string): Promise<void> {
  try {
    await unlink(path);
  } catch (error) {
    if ((error as NodeJS.ErrnoException).code !== "ENOENT") throw error;
  }
}
