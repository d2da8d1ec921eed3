/**
 * The snapshot rule applied to git's indexes: cwd's files that the user's git would not ignore
 * (every ignore source it reads, ignoreSources.ts), minus the caller's excludes and nested
 * repositories (a directory with its own `.git`). `stage` brings cwd's private index to it for
 * a capture; `filteredTree` cuts a commit's tree down to it, so restore never touches ignored,
 * excluded or nested content.
 */
import { unlink } from "node:fs/promises";
import { join } from "node:path";
import { refreshIgnoreFile, type IgnoreScope } from "./ignoreSources.js";
import { EMPTY_TREE, splitZ, type GitCall, type PrivateRepository } from "./privateRepository.js";
import { excludeSpec, literalSpec } from "./storeFiles.js";

/**
 * Brings cwd's private index up to date with the snapshot rule. Returns its tree, the
 * paths left out on purpose (excludes plus nested repositories) and the ignore scope.
 */
export async function stage(
  repo: PrivateRepository,
  cwd: string,
  exclude: string[],
): Promise<{ tree: string; skipped: string[]; scope: IgnoreScope }> {
  const scope = await refreshCwdIgnoreFile(repo, cwd);
  const skipped = [...exclude, ...(await nestedRepositories(repo, cwd, exclude))];
  await repo.git(["add", "--all", "--", ":(top)", ...skipped.map(excludeSpec)], { cwd });
  // `add` never drops entries that are tracked already; ones that became ignored, excluded
  // or nested since an earlier snapshot of this cwd must go.
  await dropEntries(repo, repo.indexFor(cwd), skipped, { cwd });
  return { tree: (await repo.git(["write-tree"], { cwd })).stdout.trim(), skipped, scope };
}

/**
 * The commit's tree without what restore must not touch (see the module comment). Its
 * ignored entries are matched as patterns from the user's work-tree top, so a file the
 * commit holds but the work tree no longer has is left out too when it is ignored now.
 */
export async function filteredTree(
  repo: PrivateRepository,
  commit: string,
  skipped: string[],
  scope: IgnoreScope,
): Promise<string> {
  const index = join(repo.own, "restore.index");
  const prefix = scope.prefix === "" ? [] : [`--prefix=${scope.prefix}/`];
  const call: GitCall = { workTree: scope.top, excludesFile: scope.sourcesFile };
  const atTop = (path: string) => (scope.prefix === "" ? path : `${scope.prefix}/${path}`);
  await unlink(index).catch(() => undefined);
  try {
    await repo.git(["read-tree", ...prefix, commit], { ...call, index });
    await dropEntries(repo, index, skipped.map(atTop), call);
    const { stdout } = await repo.git(["ls-files", "-z", "--cached"], { ...call, index });
    if (stdout === "") return EMPTY_TREE;
    return (await repo.git(["write-tree", ...prefix], { ...call, index })).stdout.trim();
  } finally {
    await unlink(index).catch(() => undefined);
  }
}

/**
 * The tree `base` with each of `paths` as it is in `from` (taken out where `from` has none):
 * built in a scratch index, so cwd's own index and files are not touched.
 */
export async function withPathsFrom(
  repo: PrivateRepository,
  cwd: string,
  base: string,
  from: string,
  paths: string[],
): Promise<string> {
  if (paths.length === 0) return base;
  const wanted = new Set(paths);
  const index = join(repo.own, "revert.index");
  const call: GitCall = { cwd, index };
  await unlink(index).catch(() => undefined);
  try {
    await repo.git(["read-tree", base], call);
    const pathOf = (entry: string) => entry.slice(entry.indexOf("\t") + 1);
    const kept = splitZ((await repo.git(["ls-tree", "-r", "-z", from], call)).stdout).filter((e) =>
      wanted.has(pathOf(e)),
    );
    const there = new Set(kept.map(pathOf));
    // `--index-info` takes ls-tree's own lines; mode 0 removes the path.
    const gone = paths.filter((path) => !there.has(path)).map((path) => `0 ${"0".repeat(40)}\t${path}`);
    const input = [...kept, ...gone].map((entry) => `${entry}\0`).join("");
    await repo.git(["update-index", "-z", "--index-info"], { ...call, input });
    return (await repo.git(["write-tree"], call)).stdout.trim();
  } finally {
    await unlink(index).catch(() => undefined);
  }
}

/** cwd's ignore file, from every source the user's git reads (ignoreSources.ts). */
function refreshCwdIgnoreFile(repo: PrivateRepository, cwd: string): Promise<IgnoreScope> {
  return refreshIgnoreFile(cwd, {
    env: repo.userEnv,
    sourcesFile: repo.ownFile("sources", cwd),
    ignoredFile: repo.ownFile("ignored", cwd),
    listIgnored: (scope) => listIgnored(repo, scope),
    excludesFileSetting: (gitDir) => repo.excludesFileSetting(gitDir),
  });
}

/** Ignored paths under the scope's prefix, top-relative; a wholly ignored directory as `dir/`. */
async function listIgnored(repo: PrivateRepository, scope: IgnoreScope): Promise<string[]> {
  const where = scope.prefix === "" ? [] : [`:(top,literal)${scope.prefix}`];
  const { stdout } = await repo.git(
    ["ls-files", "-z", "--others", "--ignored", "--exclude-standard", "--directory", "--", ...where],
    {
      workTree: scope.top,
      index: repo.ownFile("none", scope.top), // never written: every path counts as untracked
      excludesFile: scope.sourcesFile,
    },
  );
  return splitZ(stdout);
}

/** Untracked listings show a directory holding its own `.git` as `dir/`; all else as files. */
async function nestedRepositories(repo: PrivateRepository, cwd: string, exclude: string[]): Promise<string[]> {
  const { stdout } = await repo.git(
    ["ls-files", "-z", "--others", "--exclude-standard", "--", ":(top)", ...exclude.map(excludeSpec)],
    { cwd },
  );
  return splitZ(stdout)
    .filter((path) => path.endsWith("/"))
    .map((path) => path.slice(0, -1));
}

/** Removes ignored entries, and entries under `skipped` paths, from `index` (paths relative to the work tree). */
async function dropEntries(repo: PrivateRepository, index: string, skipped: string[], call: GitCall): Promise<void> {
  const ignored = await repo.git(["ls-files", "-z", "--cached", "--ignored", "--exclude-standard"], {
    ...call,
    index,
  });
  const paths = splitZ(ignored.stdout);
  if (skipped.length > 0) {
    const under = await repo.git(["ls-files", "-z", "--cached", "--", ...skipped.map(literalSpec)], {
      ...call,
      index,
    });
    paths.push(...splitZ(under.stdout));
  }
  if (paths.length === 0) return;
  await repo.git(["update-index", "-z", "--force-remove", "--stdin"], {
    ...call,
    index,
    input: paths.map((path) => `${path}\0`).join(""),
  });
}
