/**
 * Filesystem checkpoints as commits in a runtime-owned bare git repository.
 *
 * The user's own `.git` is never read or written: every git call runs with GIT_DIR set to
 * the private store and GIT_INDEX_FILE set to a private index (one per cwd, so its stat
 * cache keeps `add -A` cheap), so the user's HEAD, branches, index and stash cannot move.
 * A checkpoint commit is pinned by `refs/tiller/<ref>` so gc never drops it.
 *
 * What a snapshot holds: cwd's files that its `.gitignore` files do not ignore, minus the
 * caller's `exclude` paths and nested repositories (a directory with its own `.git`). The
 * same rule decides what restore may touch, so ignored, excluded and nested content is
 * never overwritten or deleted.
 */
import { spawn } from "node:child_process";
import { createHash } from "node:crypto";
import { mkdir, readdir, rmdir, stat, unlink, writeFile } from "node:fs/promises";
import { dirname, isAbsolute, join, relative, resolve, sep } from "node:path";
import { CheckpointError, ClosedError, InvalidInputError } from "../../domain/errors.js";

export interface ChangedFile {
  path: string;
  change: "added" | "modified" | "deleted";
}

export interface CheckpointCapture {
  /** Commit id in the runtime-owned repository. */
  commit: string;
  /** Files that differ from the parent checkpoint (or from an empty tree when there is none), sorted by path. */
  files: ChangedFile[];
  insertions: number;
  deletions: number;
}

export interface CaptureInput {
  cwd: string;
  /** Pinned as `refs/tiller/<ref>`: letters, digits, `_`, `-`, and `/` between non-empty parts. */
  ref: string;
  parent: string | null;
  message: string;
  /** Paths relative to cwd (e.g. ".tiller") kept out of the snapshot. */
  exclude?: string[];
}

export interface RestoreInput {
  cwd: string;
  commit: string;
  /** Paths relative to cwd that restore must leave alone (should match the capture's). */
  exclude?: string[];
}

/** The well-known id of git's empty tree (sha1 object format, which `open` creates). */
const EMPTY_TREE = "4b825dc642cb6eb9a060e54bf8d69288fbee4904";
const REF_PATTERN = /^[A-Za-z0-9_-]+(?:\/[A-Za-z0-9_-]+)*$/;
/** Full ids only: an abbreviation or a ref name could resolve to something else. */
const COMMIT_PATTERN = /^[0-9a-f]{40}$/;
const STDERR_LIMIT = 2048;
const IDENTITY = { name: "Tiller", email: "tiller@localhost" };

interface GitCall {
  /** Work tree; omitted for calls that only touch the object store. */
  cwd?: string;
  /** Index file; defaults to cwd's private index. */
  index?: string;
  input?: string;
  /** Exit codes that are answers rather than failures (e.g. 1 from `rev-parse --quiet`). */
  okCodes?: number[];
}

interface GitResult {
  stdout: string;
  code: number;
}

export class GitCheckpointStore {
  private tail: Promise<unknown> = Promise.resolve();
  private closed = false;
  private readonly own: string;
  private readonly emptyFile: string;
  private readonly baseEnv: NodeJS.ProcessEnv;
  private readonly config: string[];

  private constructor(private readonly dir: string) {
    this.own = join(dir, "tiller");
    this.emptyFile = join(this.own, "empty");
    this.baseEnv = cleanEnv({
      GIT_DIR: dir,
      GIT_CONFIG_NOSYSTEM: "1",
      GIT_CONFIG_GLOBAL: this.emptyFile,
      GIT_AUTHOR_NAME: IDENTITY.name,
      GIT_AUTHOR_EMAIL: IDENTITY.email,
      GIT_COMMITTER_NAME: IDENTITY.name,
      GIT_COMMITTER_EMAIL: IDENTITY.email,
      GIT_TERMINAL_PROMPT: "0",
    });
    this.config = [
      "core.autocrlf=false",
      "core.safecrlf=false",
      "core.quotePath=false",
      "core.fsmonitor=false",
      "commit.gpgSign=false",
      `core.hooksPath=${join(this.own, "no-hooks")}`,
      // Only the work tree's .gitignore files count, never the user's global ignore file.
      `core.excludesFile=${this.emptyFile}`,
    ].flatMap((setting) => ["-c", setting]);
  }

  /** Opens (creating if needed) the private bare repository at `dir` (e.g. `<dataDir>/checkpoints.git`). */
  static async open(dir: string): Promise<GitCheckpointStore> {
    const store = new GitCheckpointStore(resolve(dir));
    await mkdir(store.dir, { recursive: true });
    // Re-running init on an existing repository is a no-op that keeps its objects and refs.
    await store.git(["init", "--bare", "--quiet", "--template=", store.dir]);
    await mkdir(store.own, { recursive: true });
    await mkdir(join(store.dir, "info"), { recursive: true });
    await writeFile(store.emptyFile, "");
    // info/attributes outranks every .gitattributes, so the user's eol/filter rules cannot
    // rewrite bytes on the way in or out: a restore must reproduce files exactly.
    const attributes = "* -text -eol -filter -ident -working-tree-encoding\n";
    await writeFile(join(store.dir, "info", "attributes"), attributes);
    // Index locks left by a crashed git: the data-dir lock makes this process the only writer.
    for (const name of await readdir(store.own)) {
      if (name.endsWith(".lock")) await unlink(join(store.own, name)).catch(() => undefined);
    }
    return store;
  }

  /**
   * Snapshots cwd as a commit whose parent is `parent` (null: none), pinned at
   * `refs/tiller/<ref>`. An invalid `ref` or `exclude` path throws InvalidInputError (a
   * caller bug, not a git failure); an unknown parent or any git failure throws CheckpointError.
   */
  async capture(input: CaptureInput): Promise<CheckpointCapture> {
    if (!REF_PATTERN.test(input.ref)) {
      throw new InvalidInputError("ref", "must be letters, digits, _ or - separated by /", {
        ref: input.ref,
      });
    }
    const cwd = resolve(input.cwd);
    const exclude = normalizeExcludes(cwd, input.exclude);
    return this.enqueue(async () => {
      await assertDirectory(cwd);
      if (input.parent !== null && !(await this.hasCommit(input.parent))) {
        throw new CheckpointError(`parent checkpoint ${input.parent} is not in the store`, {
          commit: input.parent,
        });
      }
      const { tree } = await this.stage(cwd, exclude);
      const parentArgs = input.parent === null ? [] : ["-p", input.parent];
      const commit = (
        await this.git(["commit-tree", tree, ...parentArgs], { cwd, input: input.message })
      ).stdout.trim();
      await this.git(["update-ref", `refs/tiller/${input.ref}`, commit], { cwd });
      const files = await this.diffFiles(cwd, input.parent ?? EMPTY_TREE, commit);
      const { insertions, deletions } = await this.diffStat(cwd, input.parent ?? EMPTY_TREE, commit);
      return { commit, files, insertions, deletions };
    });
  }

  /**
   * Makes cwd's non-ignored files match `commit`: changed files rewritten, files absent from
   * the commit deleted (and directories this empties removed), ignored, excluded and nested
   * repository content untouched. Throws CheckpointError when the commit is not in the store,
   * or when git refuses because an untracked path (e.g. an ignored directory) is in the way;
   * nothing is changed in that case.
   */
  async restore(input: RestoreInput): Promise<{ files: ChangedFile[] }> {
    const cwd = resolve(input.cwd);
    const exclude = normalizeExcludes(cwd, input.exclude);
    return this.enqueue(async () => {
      if (!(await this.hasCommit(input.commit))) {
        throw new CheckpointError(`checkpoint ${input.commit} is not in the store`, {
          commit: input.commit,
        });
      }
      await assertDirectory(cwd);
      const { tree: current, skipped } = await this.stage(cwd, exclude);
      const target = await this.filteredTree(cwd, input.commit, skipped);
      const files = await this.diffFiles(cwd, current, target);
      if (files.length === 0) return { files };
      // Two-tree merge from the tree the index holds: updates and deletes only what differs,
      // and refuses (rather than clobbers) untracked paths in the way.
      await this.git(["read-tree", "-m", "-u", current, target], { cwd });
      for (const file of files) {
        if (file.change === "deleted") await removeEmptyParents(cwd, join(cwd, file.path));
      }
      return { files };
    });
  }

  /** Is this commit still in the store? */
  has(commit: string): Promise<boolean> {
    return this.enqueue(() => this.hasCommit(commit));
  }

  /** Waits for queued operations; later calls reject with ClosedError. */
  async close(): Promise<void> {
    this.closed = true;
    await this.tail.catch(() => undefined);
  }

  /** One writer: the private index and refs must not see two operations at once. */
  private enqueue<T>(operation: () => Promise<T>): Promise<T> {
    if (this.closed) return Promise.reject(new ClosedError("checkpoint store"));
    const result = this.tail.then(operation);
    this.tail = result.catch(() => undefined);
    return result;
  }

  private async hasCommit(commit: string): Promise<boolean> {
    if (!COMMIT_PATTERN.test(commit)) return false;
    const { code } = await this.git(["rev-parse", "--verify", "--quiet", `${commit}^{commit}`], {
      okCodes: [1],
    });
    return code === 0;
  }

  /**
   * Brings cwd's private index up to date with the snapshot rule. Returns its tree and the
   * paths left out on purpose (excludes plus nested repositories).
   */
  private async stage(cwd: string, exclude: string[]): Promise<{ tree: string; skipped: string[] }> {
    const skipped = [...exclude, ...(await this.nestedRepositories(cwd, exclude))];
    await this.git(["add", "--all", "--", ":(top)", ...skipped.map(excludeSpec)], { cwd });
    // `add` never drops entries that are tracked already; ones that became ignored, excluded
    // or nested since an earlier snapshot of this cwd must go.
    await this.dropEntries(cwd, this.indexFor(cwd), skipped);
    return { tree: (await this.git(["write-tree"], { cwd })).stdout.trim(), skipped };
  }

  /** Untracked listings show a directory holding its own `.git` as `dir/`; all else as files. */
  private async nestedRepositories(cwd: string, exclude: string[]): Promise<string[]> {
    const { stdout } = await this.git(
      ["ls-files", "-z", "--others", "--exclude-standard", "--", ":(top)", ...exclude.map(excludeSpec)],
      { cwd },
    );
    return splitZ(stdout)
      .filter((path) => path.endsWith("/"))
      .map((path) => path.slice(0, -1));
  }

  /** Removes ignored entries, and entries under `skipped` paths, from `index`. */
  private async dropEntries(cwd: string, index: string, skipped: string[]): Promise<void> {
    const ignored = await this.git(["ls-files", "-z", "--cached", "--ignored", "--exclude-standard"], {
      cwd,
      index,
    });
    const paths = splitZ(ignored.stdout);
    if (skipped.length > 0) {
      const under = await this.git(["ls-files", "-z", "--cached", "--", ...skipped.map(literalSpec)], {
        cwd,
        index,
      });
      paths.push(...splitZ(under.stdout));
    }
    if (paths.length === 0) return;
    await this.git(["update-index", "-z", "--force-remove", "--stdin"], {
      cwd,
      index,
      input: paths.map((path) => `${path}\0`).join(""),
    });
  }

  /** The commit's tree without what restore must not touch (see the module comment). */
  private async filteredTree(cwd: string, commit: string, skipped: string[]): Promise<string> {
    const index = join(this.own, "restore.index");
    await unlink(index).catch(() => undefined);
    try {
      await this.git(["read-tree", commit], { cwd, index });
      await this.dropEntries(cwd, index, skipped);
      return (await this.git(["write-tree"], { cwd, index })).stdout.trim();
    } finally {
      await unlink(index).catch(() => undefined);
    }
  }

  private async diffFiles(cwd: string, from: string, to: string): Promise<ChangedFile[]> {
    const { stdout } = await this.git(
      ["diff-tree", "-r", "-z", "--no-renames", "--name-status", from, to],
      { cwd },
    );
    const parts = splitZ(stdout);
    const files: ChangedFile[] = [];
    for (let i = 0; i + 1 < parts.length; i += 2) {
      const status = parts[i] ?? "";
      const change = status === "A" ? "added" : status === "D" ? "deleted" : "modified";
      files.push({ path: parts[i + 1] ?? "", change });
    }
    return files.sort((a, b) => (a.path < b.path ? -1 : a.path > b.path ? 1 : 0));
  }

  /** Line counts; binary files (`-` in numstat) count as zero. */
  private async diffStat(cwd: string, from: string, to: string) {
    const { stdout } = await this.git(
      ["diff-tree", "-r", "-z", "--no-renames", "--numstat", from, to],
      { cwd },
    );
    let insertions = 0;
    let deletions = 0;
    for (const record of splitZ(stdout)) {
      const [added, deleted] = record.split("\t");
      insertions += Number.parseInt(added ?? "", 10) || 0;
      deletions += Number.parseInt(deleted ?? "", 10) || 0;
    }
    return { insertions, deletions };
  }

  private indexFor(cwd: string): string {
    const key = createHash("sha256").update(cwd).digest("hex").slice(0, 24);
    return join(this.own, `index-${key}`);
  }

  private git(args: string[], call: GitCall = {}): Promise<GitResult> {
    const env: NodeJS.ProcessEnv = { ...this.baseEnv };
    if (call.cwd !== undefined) {
      env.GIT_WORK_TREE = call.cwd;
      env.GIT_INDEX_FILE = call.index ?? this.indexFor(call.cwd);
    }
    return runGit(this.config, args, env, call.cwd ?? this.dir, call);
  }
}

/** Arguments as an array, never a shell; stdin carries `input`. */
function runGit(config: string[], args: string[], env: NodeJS.ProcessEnv, cwd: string, call: GitCall) {
  return new Promise<GitResult>((resolvePromise, reject) => {
    const child = spawn("git", [...config, ...args], { cwd, env, windowsHide: true });
    const out: Buffer[] = [];
    let stderr = "";
    child.stdout.on("data", (chunk: Buffer) => out.push(chunk));
    child.stderr.on("data", (chunk: Buffer) => {
      if (stderr.length < STDERR_LIMIT * 2) stderr += chunk.toString("utf8");
    });
    child.stdin.on("error", () => undefined); // git may exit before reading stdin; the exit code tells
    child.on("error", (error) => {
      reject(new CheckpointError(`could not run git: ${error.message}`, { args }));
    });
    child.on("close", (code) => {
      const exit = code ?? -1;
      if (exit === 0 || call.okCodes?.includes(exit)) {
        resolvePromise({ stdout: Buffer.concat(out).toString("utf8"), code: exit });
        return;
      }
      const detail = stderr.trim().slice(0, STDERR_LIMIT);
      reject(
        new CheckpointError(`git ${args[0] ?? ""} failed: ${detail.split("\n")[0] ?? ""}`.trim(), {
          args,
          exitCode: exit,
          stderr: detail,
        }),
      );
    });
    child.stdin.end(call.input ?? "");
  });
}

/** The parent's environment minus anything GIT_* (a hook's GIT_DIR would redirect every call). */
function cleanEnv(extra: Record<string, string>): NodeJS.ProcessEnv {
  const env: NodeJS.ProcessEnv = {};
  for (const [key, value] of Object.entries(process.env)) {
    if (!key.toUpperCase().startsWith("GIT_")) env[key] = value;
  }
  return { ...env, ...extra };
}

/** Exclude paths as `/`-separated, cwd-relative and inside cwd; anything else is a caller bug. */
function normalizeExcludes(cwd: string, exclude: string[] | undefined): string[] {
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

const excludeSpec = (path: string) => `:(top,literal,exclude)${path}`;
const literalSpec = (path: string) => `:(top,literal)${path}`;
const splitZ = (text: string) => text.split("\0").filter((part) => part !== "");

async function assertDirectory(cwd: string): Promise<void> {
  const info = await stat(cwd).catch(() => undefined);
  if (!info?.isDirectory()) throw new CheckpointError(`${cwd} is not a directory`, { cwd });
}

/** rmdir only succeeds on empty directories, so anything ignored keeps its parent alive. */
async function removeEmptyParents(root: string, file: string): Promise<void> {
  for (let dir = dirname(file); dir !== root && dir.startsWith(root + sep); dir = dirname(dir)) {
    try {
      await rmdir(dir);
    } catch {
      return;
    }
  }
}
