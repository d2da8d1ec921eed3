/**
 * Everything the runtime stores is private to the user: the data directory is 0700 and every
 * file in it 0600, whatever the process umask (which can only take bits away, so modes are
 * set explicitly after creation).
 */
import { chmod, mkdir, stat } from "node:fs/promises";
import { InvalidInputError } from "../../domain/errors.js";

export const PRIVATE_DIR_MODE = 0o700;
export const PRIVATE_FILE_MODE = 0o600;

/**
 * Creates the directory (and parents) if needed and makes it private; a path that is not a directory is
 * `invalid_input`.
 */
export async function preparePrivateDir(path: string, field: string): Promise<void> {
  const existing = await stat(path).catch((error: NodeJS.ErrnoException) => {
    if (error.code === "ENOENT") return null;
    throw new InvalidInputError(field, `cannot be used (${error.code ?? error.message}): ${path}`);
  });
  if (existing && !existing.isDirectory()) throw new InvalidInputError(field, `is not a directory: ${path}`);
  if (!existing) {
    await mkdir(path, { recursive: true, mode: PRIVATE_DIR_MODE }).catch((error: NodeJS.ErrnoException) => {
      throw new InvalidInputError(field, `cannot be created (${error.code ?? error.message}): ${path}`);
    });
  }
  await chmod(path, PRIVATE_DIR_MODE);
}

/** `invalid_input` unless `path` is an existing directory. */
export async function assertDirectory(path: string, field: string): Promise<void> {
  const found = await stat(path).catch(() => null);
  if (!found) throw new InvalidInputError(field, `does not exist: ${path}`);
  if (!found.isDirectory()) throw new InvalidInputError(field, `is not a directory: ${path}`);
}
