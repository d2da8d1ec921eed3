/**
 * Where the user's git takes its ignore rules from, for a store that runs git with its own
 * GIT_DIR and the thread's directory as work tree (so git alone would see only the `.gitignore`
 * files inside that directory). The user's git also reads:
 * - the `.gitignore` files of the directories above, up to its work tree's top;
 * - that repository's `info/exclude` (in its common dir, for a linked worktree);
 * - `core.excludesFile` from its config (repository, global, system), or by default
 *   `$XDG_CONFIG_HOME/git/ignore` (`~/.config/git/ignore`).
 * The store matches from `top` with the last two written into one file (both are
 * top-relative). Everything here only reads: the user's config and repository are never written.
 *
 * One departure: when the enclosing repository ignores the thread's directory itself (or a
 * directory above it), its rules are not applied, since everything would be ignored and
 * nothing checkpointed; the directory is then matched on its own, like a repository's top.
 */
import { lstat, readFile, writeFile } from "node:fs/promises";
import { dirname, isAbsolute, join, relative, resolve, sep } from "node:path";

export interface UserRepository {
  /** The work tree's top directory. */
  top: string;
  gitDir: string;
  /** Where `info/exclude` lives (differs from gitDir in a linked worktree). */
  commonDir: string;
}

export interface IgnoreScope {
  /** Where git's matching starts: the user's work-tree top, or cwd itself. */
  top: string;
  /** cwd relative to top, `/`-separated ("" when cwd is the top). */
  prefix: string;
  /** A file holding the top-relative sources besides `.gitignore` files (use as core.excludesFile). */
  sourcesFile: string;
}

/** Reads `core.excludesFile` as the user's git would for this repository (null: unset). */
export type ExcludesFileSetting = (gitDir: string | null) => Promise<string | null>;

/** The nearest enclosing git work tree of `cwd` (cwd included), read from the file system only. */
export async function findUserRepository(cwd: string): Promise<UserRepository | null> {
  for (let dir = resolve(cwd); ; dir = dirname(dir)) {
    const dotGit = join(dir, ".git");
    const info = await lstat(dotGit).catch(() => undefined);
    if (info?.isDirectory()) return { top: dir, gitDir: dotGit, commonDir: await commonDirOf(dotGit) };
    if (info?.isFile()) {
      // A gitfile (linked worktree, submodule): "gitdir: <path>".
      const match = /^gitdir: (.+)$/m.exec(await readFile(dotGit, "utf8").catch(() => ""));
      if (!match) return null;
      const gitDir = resolve(dir, match[1]!.trim());
      return { top: dir, gitDir, commonDir: await commonDirOf(gitDir) };
    }
    if (dirname(dir) === dir) return null;
  }
}

async function commonDirOf(gitDir: string): Promise<string> {
  const common = (await readFile(join(gitDir, "commondir"), "utf8").catch(() => "")).trim();
  return common === "" ? gitDir : resolve(gitDir, common);
}

/** git's default global ignore file: `$XDG_CONFIG_HOME/git/ignore`, else `$HOME/.config/git/ignore`. */
export function defaultExcludesFile(env: NodeJS.ProcessEnv): string | null {
  if (env.XDG_CONFIG_HOME) return join(env.XDG_CONFIG_HOME, "git", "ignore");
  if (env.HOME) return join(env.HOME, ".config", "git", "ignore");
  return null;
}

/**
 * Writes `sourcesFile` for matching from the user's work-tree top (`repo`), or, with `repo`
 * null, from cwd with only the excludes file. Returns the scope to list ignored paths in.
 */
export async function writeSources(
  cwd: string,
  repo: UserRepository | null,
  sourcesFile: string,
  excludesFileSetting: ExcludesFileSetting,
  env: NodeJS.ProcessEnv,
): Promise<IgnoreScope> {
  const setting = await excludesFileSetting(repo?.gitDir ?? null);
  const excludesFile =
    setting === null ? defaultExcludesFile(env) : isAbsolute(setting) ? setting : resolve(repo?.top ?? cwd, setting);
  const parts = [await readText(excludesFile)];
  if (repo) parts.push(await readText(join(repo.commonDir, "info", "exclude")));
  await writeFile(sourcesFile, parts.join("\n"), { mode: 0o600 });
  const top = repo?.top ?? cwd;
  return { top, prefix: relative(top, cwd).split(sep).join("/"), sourcesFile };
}

/** What refreshIgnoreFile needs from the store. */
export interface IgnoreFileIO {
  /** The user's environment (HOME, XDG_CONFIG_HOME locate git's default ignore file). */
  env: NodeJS.ProcessEnv;
  /** Where this cwd's combined sources and its literal ignore file are written. */
  sourcesFile: string;
  ignoredFile: string;
  /** `git ls-files --others --ignored --exclude-standard --directory` in the scope: top-relative paths. */
  listIgnored(scope: IgnoreScope): Promise<string[]>;
  excludesFileSetting: ExcludesFileSetting;
}

/**
 * Lists what the user's git ignores under cwd, matching from its work-tree top with every
 * source, and writes it as cwd's ignore file (literal paths) for the git calls rooted at cwd.
 */
export async function refreshIgnoreFile(cwd: string, io: IgnoreFileIO): Promise<IgnoreScope> {
  let scope = await writeSources(cwd, await findUserRepository(cwd), io.sourcesFile, io.excludesFileSetting, io.env);
  let listed = await io.listIgnored(scope);
  if (ignoresItself(scope, listed)) {
    scope = await writeSources(cwd, null, io.sourcesFile, io.excludesFileSetting, io.env);
    listed = await io.listIgnored(scope);
  }
  await writeFile(io.ignoredFile, literalIgnoreFile(scope, listed), { mode: 0o600 });
  return scope;
}

/** Is cwd (the scope's prefix) itself, or a directory above it, among the listed ignored paths? */
export function ignoresItself(scope: IgnoreScope, listed: string[]): boolean {
  if (scope.prefix === "") return false;
  const self = `${scope.prefix}/`;
  return listed.some((path) => path.endsWith("/") && self.startsWith(path));
}

/**
 * Ignored paths under the scope (top-relative, as `ls-files --directory` lists them) as
 * gitignore lines anchored at cwd that match exactly those paths and nothing else.
 */
export function literalIgnoreFile(scope: IgnoreScope, listed: string[]): string {
  const strip = scope.prefix === "" ? 0 : scope.prefix.length + 1;
  return listed
    .map((path) => path.slice(strip))
    .filter((path) => path !== "")
    .map(literalPattern)
    .join("\n");
}

/** `/path` with every wildcard and space escaped; a newline (no gitignore line can hold one) matches as `?`. */
export function literalPattern(path: string): string {
  const dir = path.endsWith("/");
  const body = (dir ? path.slice(0, -1) : path).replace(/[\\*?[ ]/g, (c) => `\\${c}`).replace(/[\r\n]/g, "?");
  return `/${body}${dir ? "/" : ""}`;
}

async function readText(path: string | null): Promise<string> {
  return path === null ? "" : readFile(path, "utf8").catch(() => "");
}
