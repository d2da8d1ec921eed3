/**
 * Small state documents (settings, cursors, registries) stored as one JSON file each.
 *
 * lowdb rewrites the whole file on every write (temp file + rename), so this is only for
 * small documents that change rarely — never for the event log or anything that grows.
 */
import { access, mkdir, open } from "node:fs/promises";
import { dirname } from "node:path";
import { Low } from "lowdb";
import { JSONFile } from "lowdb/node";
import type { z } from "zod";
import { InvalidInputError, StoreCorruptError } from "../../domain/errors.js";

export interface StateDocument<T> {
  /** The current, validated document. Deep-frozen: change it only through `update`. */
  readonly data: T;
  /** Runs the mutator on a copy, validates, writes. Calls are applied one at a time, in order.
   * A mutator that produces an invalid document rejects with InvalidInputError and changes nothing. */
  update(mutator: (draft: T) => void): Promise<void>;
}

function firstIssue(error: z.ZodError): { field: string; message: string } {
  const issue = error.issues[0];
  return { field: issue?.path.map(String).join(".") ?? "", message: issue?.message ?? "invalid" };
}

function deepFreeze<T>(value: T): T {
  if (typeof value === "object" && value !== null && !Object.isFrozen(value)) {
    Object.freeze(value);
    for (const child of Object.values(value)) deepFreeze(child);
  }
  return value;
}

/** steno (lowdb's writer) renames without fsync; sync file and directory so a resolved
 * update survives power loss, not just a process crash. */
async function syncToDisk(file: string): Promise<void> {
  // Windows cannot open a directory for fsync; its rename is as durable as it gets there.
  for (const path of process.platform === "win32" ? [file] : [file, dirname(file)]) {
    const handle = await open(path, "r");
    await handle.sync().finally(() => handle.close());
  }
}

export async function openStateDocument<T extends { schemaVersion: number }>(
  file: string,
  schema: z.ZodType<T>,
  defaults: () => T,
): Promise<StateDocument<T>> {
  await mkdir(dirname(file), { recursive: true });
  const db = new Low<T | null>(new JSONFile<T | null>(file), null);
  // Checked separately: lowdb cannot tell a missing file from one containing `null`.
  const created = await access(file).then(
    () => false,
    (error: NodeJS.ErrnoException) => {
      if (error.code === "ENOENT") return true;
      throw error;
    },
  );
  if (!created) {
    try {
      await db.read();
    } catch (error) {
      throw new StoreCorruptError(`${file}: not valid JSON (${String(error)})`, { file });
    }
  }
  const parsed = schema.safeParse(created ? defaults() : db.data);
  if (!parsed.success) {
    const { field, message } = firstIssue(parsed.error);
    if (created) throw new InvalidInputError(field, `default document is invalid: ${message}`);
    throw new StoreCorruptError(`${file}: ${field || "(root)"}: ${message}`, { file, field });
  }
  let current = deepFreeze(parsed.data);
  if (created) {
    db.data = current;
    await db.write();
    await syncToDisk(file);
  }

  let queue: Promise<unknown> = Promise.resolve();
  const apply = async (mutator: (draft: T) => void): Promise<void> => {
    const draft = structuredClone(current);
    mutator(draft);
    const result = schema.safeParse(draft);
    if (!result.success) {
      const { field, message } = firstIssue(result.error);
      throw new InvalidInputError(field, message, { file });
    }
    const next = deepFreeze(result.data);
    db.data = next;
    await db.write();
    await syncToDisk(file);
    // Only adopt the new state once it is on disk; a failed write leaves `data` as it was.
    current = next;
  };

  return {
    get data() {
      return current;
    },
    update(mutator) {
      const run = queue.then(() => apply(mutator));
      queue = run.catch(() => undefined); // one failed update must not block the next
      return run;
    },
  };
}
