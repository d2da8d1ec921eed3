/**
 * Exact permission bits of a checkpoint's files. Git keeps only "executable or not" (100755 /
 * 100644) and writes files with the process umask, so without help a 0600 file would come
 * back 0644. A checkpoint commit's message carries a manifest: the most common mode of plain
 * files and of executable files, and every file whose mode differs from those. A commit
 * without one (written before manifests existed) restores with git's own modes.
 */
import { chmod, lstat } from "node:fs/promises";
import { join } from "node:path";

export interface ModeManifest {
  plain: number;
  exec: number;
  /** Files whose mode is not the default of their kind. */
  except: Record<string, number>;
}

/** A regular file of a tree: path and git mode ("100644" or "100755"). */
export interface TreeFile {
  path: string;
  gitMode: string;
}

const TRAILER = "Tiller-Modes: ";
const PERMISSIONS = 0o7777;
const LSTAT_BATCH = 64;

const isExec = (gitMode: string) => gitMode === "100755";

/** Regular files of `git ls-tree -r -z` output (symlinks and gitlinks carry no permission bits). */
export function regularFiles(lsTree: string): TreeFile[] {
  const files: TreeFile[] = [];
  for (const record of lsTree.split("\0")) {
    const tab = record.indexOf("\t");
    if (tab < 0) continue;
    const gitMode = record.slice(0, record.indexOf(" "));
    if (gitMode === "100644" || gitMode === "100755") files.push({ path: record.slice(tab + 1), gitMode });
  }
  return files;
}

/** The permission bits of each file under cwd that is still a regular file (others are left out). */
export async function currentModes(cwd: string, files: TreeFile[]): Promise<Map<string, number>> {
  const modes = new Map<string, number>();
  for (let i = 0; i < files.length; i += LSTAT_BATCH) {
    await Promise.all(
      files.slice(i, i + LSTAT_BATCH).map(async ({ path }) => {
        const info = await lstat(join(cwd, path)).catch(() => undefined);
        if (info?.isFile()) modes.set(path, info.mode & PERMISSIONS);
      }),
    );
  }
  return modes;
}

export function buildManifest(files: TreeFile[], modes: Map<string, number>): ModeManifest {
  const plain = mostCommon(
    files.filter((f) => !isExec(f.gitMode)).map((f) => modes.get(f.path)),
    0o644,
  );
  const exec = mostCommon(
    files.filter((f) => isExec(f.gitMode)).map((f) => modes.get(f.path)),
    0o755,
  );
  const except: Record<string, number> = {};
  for (const file of files) {
    const mode = modes.get(file.path);
    if (mode !== undefined && mode !== (isExec(file.gitMode) ? exec : plain)) except[file.path] = mode;
  }
  return { plain, exec, except };
}

/** The commit message with the manifest as its last line. */
export function withManifest(message: string, manifest: ModeManifest): string {
  return `${message.trimEnd()}\n\n${TRAILER}${JSON.stringify(manifest)}\n`;
}

/** The manifest of a raw commit object (`git cat-file commit`), or null when it has none. */
export function manifestOf(rawCommit: string): ModeManifest | null {
  const line = rawCommit.split("\n").findLast((l) => l.startsWith(TRAILER));
  if (!line) return null;
  try {
    const parsed = JSON.parse(line.slice(TRAILER.length)) as Partial<ModeManifest>;
    if (
      typeof parsed.plain !== "number" ||
      typeof parsed.exec !== "number" ||
      typeof parsed.except !== "object" ||
      parsed.except === null
    )
      return null;
    return { plain: parsed.plain, exec: parsed.exec, except: parsed.except };
  } catch {
    return null;
  }
}

/** The mode a file had when the manifest was written. */
export function modeOf(manifest: ModeManifest, file: TreeFile): number {
  return manifest.except[file.path] ?? (isExec(file.gitMode) ? manifest.exec : manifest.plain);
}

/** What git itself would have given a file it writes (no manifest to say better). */
export function gitDefaultMode(file: TreeFile, umask: number): number {
  return (isExec(file.gitMode) ? 0o777 : 0o666) & ~umask;
}

/**
 * The exact modes a restore must leave: for every file git writes, the commit's mode (git's
 * own default for a commit without a manifest); for every other file of the target whose
 * current mode (`kept`) drifted, the commit's mode again, and that file counts as changed.
 */
export function modesToRestore(
  files: TreeFile[],
  manifest: ModeManifest | null,
  written: Set<string>,
  kept: Map<string, number>,
  umask: number,
) {
  const modes = new Map<string, number>();
  const modeOnly: string[] = [];
  for (const file of files) {
    if (written.has(file.path)) {
      modes.set(file.path, manifest ? modeOf(manifest, file) : gitDefaultMode(file, umask));
    } else if (manifest && kept.has(file.path) && kept.get(file.path) !== modeOf(manifest, file)) {
      modes.set(file.path, modeOf(manifest, file));
      modeOnly.push(file.path);
    }
  }
  return { modes, modeOnly };
}

/** Sets each path's exact mode; never through a symlink (chmod follows them). */
export async function applyModes(cwd: string, modes: Map<string, number>): Promise<void> {
  const entries = [...modes];
  for (let i = 0; i < entries.length; i += LSTAT_BATCH) {
    await Promise.all(
      entries.slice(i, i + LSTAT_BATCH).map(async ([path, mode]) => {
        const target = join(cwd, path);
        const info = await lstat(target).catch(() => undefined);
        if (info?.isFile() && (info.mode & PERMISSIONS) !== mode) await chmod(target, mode);
      }),
    );
  }
}

function mostCommon(modes: Array<number | undefined>, fallback: number): number {
  const counts = new Map<number, number>();
  for (const mode of modes) if (mode !== undefined) counts.set(mode, (counts.get(mode) ?? 0) + 1);
  let best = fallback;
  let bestCount = 0;
  for (const [mode, count] of counts) {
    if (count > bestCount) [best, bestCount] = [mode, count];
  }
  return best;
}
