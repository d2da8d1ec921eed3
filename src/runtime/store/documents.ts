/**
 * Small state documents (settings, cursors, registries) stored as one JSON file each.
 *
 * lowdb rewrites the whole file on every write (temp file + rename), so this is only for
 * small documents that change rarely — never for the event log or anything that grows.
 */
import { randomBytes } from "node:crypto";
import { access, mkdir, open, readFile, rename, unlink } from "node:fs/promises";
import { basename, dirname, join } from "node:path";
import { Low, type Adapter } from "lowdb";
import type { z } from "zod";
import { InvalidInputError, StoreCorruptError } from "../../domain/errors.js";
import { PRIVATE_DIR_MODE, PRIVATE_FILE_MODE } from "./files.js";

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

/**
 * lowdb's storage: the whole document to a private temp file (0600 whatever the umask),
 * fsynced, renamed over the old one, then the directory fsynced, so a resolved update survives
 * power loss and no reader ever sees a half-written or world-readable document.
 */
class PrivateJsonFile<T> implements Adapter<T> {
  constructor(private readonly file: string) {}

  async read(): Promise<T | null> {
    try {
      return JSON.parse(await readFile(this.file, "utf8")) as T;
    } catch (error) {
      if ((error as NodeJS.ErrnoException).code === "ENOENT") return null;
      throw error;
    }
  }

  async write(data: T): Promise<void> {
    const temp = join(dirname(this.file), `.${basename(this.file)}.${randomBytes(4).toString("hex")}.tmp`);
    const handle = await open(temp, "wx", PRIVATE_FILE_MODE);
    try {
      await handle.chmod(PRIVATE_FILE_MODE);
      await handle.writeFile(JSON.stringify(data, null, 2));
      await handle.sync();
    } catch (error) {
      await handle.close();
      await unlink(temp).catch(() => undefined);
      throw error;
    }
    await handle.close();
    await rename(temp, this.file).catch(async (error: unknown) => {
      await unlink(temp).catch(() => undefined);
      throw error;
    });
    // Windows cannot open a directory for fsync; its rename is as durable as it gets there.
    if (process.platform !== "win32") {
      const dir = await open(dirname(this.file), "r");
      await dir.sync().finally(() => dir.close());
    }
  }
}

export async function openStateDocument<T extends { schemaVersion: number }>(
  file: string,
  schema: z.ZodType<T>,
  defaults: () => T,
): Promise<StateDocument<T>> {
  await mkdir(dirname(file), { recursive: true, mode: PRIVATE_DIR_MODE });
  const db = new Low<T | null>(new PrivateJsonFile<T | null>(file), null);
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
