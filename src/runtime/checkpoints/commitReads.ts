/**
 * What the checkpoint store reads back from its own commits and trees: whether a commit is
 * there, a tree's regular files, a commit's mode manifest (fileModes.ts), and the files and
 * line counts two trees differ by.
 */
import { manifestOf, regularFiles, type TreeFile } from "./fileModes.js";
import { splitZ, type PrivateRepository } from "./privateRepository.js";
import { literalSpec } from "./storeFiles.js";
import type { ChangedFile } from "./storeTypes.js";

/** Full ids only: an abbreviation or a ref name could resolve to something else. */
const COMMIT_PATTERN = /^[0-9a-f]{40}$/;

export async function hasCommit(repo: PrivateRepository, commit: string): Promise<boolean> {
  if (!COMMIT_PATTERN.test(commit)) return false;
  const { code } = await repo.git(["rev-parse", "--verify", "--quiet", `${commit}^{commit}`], {
    okCodes: [1],
  });
  return code === 0;
}

export async function treeFiles(repo: PrivateRepository, tree: string): Promise<TreeFile[]> {
  return regularFiles((await repo.git(["ls-tree", "-r", "-z", tree])).stdout);
}

export async function commitManifest(repo: PrivateRepository, commit: string) {
  return manifestOf((await repo.git(["cat-file", "commit", commit])).stdout);
}

/** The files two trees differ by; only among `paths` (cwd-relative, literal) when given. */
export async function diffFiles(
  repo: PrivateRepository,
  from: string,
  to: string,
  paths?: string[],
): Promise<ChangedFile[]> {
  const only = paths ? ["--", ...paths.map(literalSpec)] : [];
  const { stdout } = await repo.git(["diff-tree", "-r", "-z", "--no-renames", "--name-status", from, to, ...only]);
  const parts = splitZ(stdout);
  const files: ChangedFile[] = [];
  for (let i = 0; i + 1 < parts.length; i += 2) {
    const status = parts[i] ?? "";
    const change = status === "A" ? "added" : status === "D" ? "deleted" : "modified";
    files.push({ path: parts[i + 1] ?? "", change });
  }
  return byPath(files);
}

/** Line counts; binary files (`-` in numstat) count as zero. */
export async function diffStat(repo: PrivateRepository, from: string, to: string) {
  const { stdout } = await repo.git(["diff-tree", "-r", "-z", "--no-renames", "--numstat", from, to]);
  let insertions = 0;
  let deletions = 0;
  for (const record of splitZ(stdout)) {
    const [added, deleted] = record.split("\t");
    insertions += Number.parseInt(added ?? "", 10) || 0;
    deletions += Number.parseInt(deleted ?? "", 10) || 0;
  }
  return { insertions, deletions };
}

export const byPath = (files: ChangedFile[]) => files.sort((a, b) => (a.path < b.path ? -1 : a.path > b.path ? 1 : 0));
