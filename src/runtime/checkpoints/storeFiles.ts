/**
 * File-system and path helpers of the checkpoint store: its own private files, the work tree's directories, exclude
 * paths.
 */
import { chmod, lstat, mkdir, readdir, rmdir, stat, writeFile } from "node:fs/promises";
import { dirname, isAbsolute, join, relative, resolve, sep } from "node:path";
import { CheckpointError, InvalidInputError } from "../../domain/errors.js";

/** A directory only its owner can enter (created if missing, tightened if it exists). */
export async function privateDirectory(path: string): Promise<void> {
  await mkdir(path, { recursive: true, mode: 0o700 });
  await chmod(path, 0o700);
}

/** Writes a file only its owner can read (an existing file keeps its mode on write: tighten it). */
export async function writePrivate(path: string, content: string): Promise<void> {
  await writeFile(path, content, { mode: 0o600 });
  await chmod(path, 0o600);
}

/** Takes group and other bits off everything under `dir` (a store written before it was private). */
export async function makePrivate(dir: string): Promise<void> {
  await chmod(dir, 0o700);
  for (const entry of await readdir(dir, { withFileTypes: true, recursive: true })) {
    const path = join(entry.parentPath, entry.name);
    if (entry.isDirectory()) await chmod(path, 0o700);
    else if (entry.isFile()) await chmod(path, (await stat(path)).mode & 0o7700);
  }
}

export async function assertDirectory(cwd: string): Promise<void> {
  const info = await stat(cwd).catch(() => undefined);
  if (!info?.isDirectory()) throw new CheckpointError(`${cwd} is not a directory`, { cwd });
}

/** The directories a restore will have to create for these cwd-relative files, outermost first. */
export async function missingDirectories(cwd: string, paths: string[]): Promise<string[]> {
  const missing = new Set<string>();
  for (const path of paths) {
    const chain: string[] = [];
    for (
      let dir = dirname(join(cwd, path));
      dir !== cwd && dir.startsWith(cwd + sep) && !missing.has(dir);
      dir = dirname(dir)
    ) {
      if (
        await lstat(dir).then(
          () => true,
          () => false,
        )
      )
        break;
      chain.push(dir);
    }
    for (const dir of chain.reverse()) missing.add(dir);
  }
  return [...missing];
}

/** rmdir only succeeds on empty directories, so anything ignored keeps its parent alive. */
export async function removeEmptyParents(root: string, file: string): Promise<void> {
  for (let dir = dirname(file); dir !== root && dir.startsWith(root + sep); dir = dirname(dir)) {
    try {
      await rmdir(dir);
    } catch {
      return;
    }
  }
}

/** Exclude paths as `/`-separated, cwd-relative and inside cwd; anything else is a caller bug. */
export function normalizeExcludes(cwd: string, exclude: string[] | undefined): string[] {
  const result: string[] = [];
  for (const [i, raw] of (exclude ?? []).entries()) {
    const rel = relative(cwd, resolve(cwd, raw));
    if (raw === "" || isAbsolute(raw) || rel === "" || rel === ".." || rel.startsWith(`..${sep}`)) {
      throw new InvalidInputError(`exclude.${i}`, "must be a path inside cwd, relative to it", {
        path: raw,
      });
    }
    result.push(rel.split(sep).join("/"));
  }
  return result;
}

export const excludeSpec = (path: string) => `:(top,literal,exclude)${path}`;
export const literalSpec = (path: string) => `:(top,literal)${path}`;
