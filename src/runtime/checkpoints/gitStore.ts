/**
 * Filesystem checkpoints as commits in a runtime-owned bare git repository.
 *
 * The user's own `.git` is never written: every git call runs with GIT_DIR set to the private
 * store and GIT_INDEX_FILE set to a private index (one per cwd, so its stat cache keeps
 * `add -A` cheap), so the user's HEAD, branches, index and stash cannot move. The only things
 * read from the user's side are its ignore rules (see ignoreSources.ts). A checkpoint commit
 * is pinned by `refs/tiller/<ref>` so gc never drops it. The store is private to its owner:
 * directories 0700, files 0600 (objects 0400), whatever the umask.
 *
 * What a snapshot holds: cwd's files that the user's git would not ignore (every ignore source
 * it reads), minus the caller's `exclude` paths and nested repositories (a directory with its
 * own `.git`), with each file's exact permission bits (fileModes.ts). The same rule decides
 * what restore may touch, so ignored, excluded and nested content is never overwritten or deleted.
 */
import { createHash } from "node:crypto";
import { chmod, readdir, stat, unlink } from "node:fs/promises";
import { join, resolve } from "node:path";
import { CheckpointError, ClosedError, InvalidInputError } from "../../domain/errors.js";
import {
  applyModes,
  buildManifest,
  currentModes,
  manifestOf,
  modeOf,
  modesToRestore,
  regularFiles,
  withManifest,
  type TreeFile,
} from "./fileModes.js";
import { GitProcesses, type GitResult } from "./gitProcess.js";
import { refreshIgnoreFile, type IgnoreScope } from "./ignoreSources.js";
import type { CaptureInput, ChangedFile, CheckpointCapture, RestoreInput, StoreOptions } from "./storeTypes.js";
import {
  assertDirectory,
  excludeSpec,
  literalSpec,
  makePrivate,
  missingDirectories,
  normalizeExcludes,
  privateDirectory,
  removeEmptyParents,
  writePrivate,
} from "./storeFiles.js";

export type { CaptureInput, ChangedFile, CheckpointCapture, RestoreInput, StoreOptions };

/** The well-known id of git's empty tree (sha1 object format, which `open` creates). */
const EMPTY_TREE = "4b825dc642cb6eb9a060e54bf8d69288fbee4904";
const REF_PATTERN = /^[A-Za-z0-9_-]+(?:\/[A-Za-z0-9_-]+)*$/;
/** Full ids only: an abbreviation or a ref name could resolve to something else. */
const COMMIT_PATTERN = /^[0-9a-f]{40}$/;
const IDENTITY = { name: "Tiller", email: "tiller@localhost" };
/** What locates the user's config when we read core.excludesFile the way their git would. */
const USER_CONFIG_VARIABLES = ["GIT_CONFIG_GLOBAL", "GIT_CONFIG_SYSTEM", "GIT_CONFIG_NOSYSTEM"];

interface GitCall {
  /** The thread's directory: the work tree, and what picks the private index and ignore file. */
  cwd?: string;
  /** A work tree other than cwd (matching ignore rules from the user's work-tree top). */
  workTree?: string;
  /** Index file; defaults to cwd's private index. */
  index?: string;
  /** core.excludesFile; defaults to cwd's ignore file (or an empty file without cwd). */
  excludesFile?: string;
  input?: string;
  okCodes?: number[];
  privateUmask?: boolean;
}

export class GitCheckpointStore {
  private tail: Promise<unknown> = Promise.resolve();
  private closed = false;
  private readonly own: string;
  private readonly emptyFile: string;
  private readonly baseEnv: NodeJS.ProcessEnv;
  private readonly config: string[];
  private readonly processes = new GitProcesses();

  private constructor(
    private readonly dir: string,
    private readonly userEnv: NodeJS.ProcessEnv,
  ) {
    this.own = join(dir, "tiller");
    this.emptyFile = join(this.own, "empty");
    this.baseEnv = {
      ...withoutGit(userEnv),
      GIT_DIR: dir,
      GIT_CONFIG_NOSYSTEM: "1",
      GIT_CONFIG_GLOBAL: this.emptyFile,
      GIT_AUTHOR_NAME: IDENTITY.name,
      GIT_AUTHOR_EMAIL: IDENTITY.email,
      GIT_COMMITTER_NAME: IDENTITY.name,
      GIT_COMMITTER_EMAIL: IDENTITY.email,
      GIT_TERMINAL_PROMPT: "0",
    };
    this.config = [
      "core.autocrlf=false",
      "core.safecrlf=false",
      "core.quotePath=false",
      "core.fsmonitor=false",
      "commit.gpgSign=false",
      "gc.auto=0",
      // Objects 0400, everything else 0600, directories 0700, whatever the umask.
      "core.sharedRepository=0600",
      `core.hooksPath=${join(this.own, "no-hooks")}`,
    ].flatMap((setting) => ["-c", setting]);
  }

  /** Opens (creating if needed) the private bare repository at `dir` (e.g. `<dataDir>/checkpoints.git`). */
  static async open(dir: string, options: StoreOptions = {}): Promise<GitCheckpointStore> {
    const store = new GitCheckpointStore(resolve(dir), options.env ?? process.env);
    // A store written before it was private has group/other bits: it gets tightened once.
    const shared = await stat(store.dir).then(
      (info) => (info.mode & 0o077) !== 0,
      () => false,
    );
    await privateDirectory(store.dir);
    // Re-running init on an existing repository is a no-op that keeps its objects and refs.
    await store.git(["init", "--bare", "--quiet", "--template=", "--shared=0600", store.dir]);
    if (shared) await makePrivate(store.dir);
    await privateDirectory(store.own);
    await privateDirectory(join(store.dir, "info"));
    await writePrivate(store.emptyFile, "");
    // info/attributes outranks every .gitattributes, so the user's eol/filter rules cannot
    // rewrite bytes on the way in or out: a restore must reproduce files exactly.
    await writePrivate(join(store.dir, "info", "attributes"), "* -text -eol -filter -ident -working-tree-encoding\n");
    // Index locks left by a crashed git: the data-dir lock makes this process the only writer,
    // and a git of the previous runtime died with it (gitProcess.ts).
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
      const treeFiles = await this.treeFiles(tree);
      const manifest = buildManifest(treeFiles, await currentModes(cwd, treeFiles));
      const parentArgs = input.parent === null ? [] : ["-p", input.parent];
      const message = withManifest(input.message, manifest);
      const commit = (await this.git(["commit-tree", tree, ...parentArgs], { cwd, input: message })).stdout.trim();
      await this.git(["update-ref", `refs/tiller/${input.ref}`, commit], { cwd });
      const from = input.parent ?? EMPTY_TREE;
      const files = await this.diffFiles(from, commit);
      // Git sees only the executable bit: a mode change it cannot see is a change all the same.
      const parentManifest = input.parent === null ? null : await this.manifest(input.parent);
      if (parentManifest) {
        const listed = new Set(files.map((f) => f.path));
        for (const file of treeFiles) {
          if (!listed.has(file.path) && modeOf(parentManifest, file) !== modeOf(manifest, file))
            files.push({ path: file.path, change: "modified" });
        }
      }
      const { insertions, deletions } = await this.diffStat(from, commit);
      return { commit, files: byPath(files), insertions, deletions };
    });
  }

  /**
   * Makes cwd's non-ignored files match `commit`, contents and permission bits: changed files
   * rewritten, files absent from the commit deleted (and directories this empties removed),
   * ignored, excluded and nested repository content untouched. `beforeChange` hears the list
   * first. Throws CheckpointError when the commit is not in the store, or when git refuses
   * because an untracked path (e.g. an ignored directory) is in the way; nothing is changed
   * in that case.
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
      const { tree: current, skipped, scope } = await this.stage(cwd, exclude);
      const target = await this.filteredTree(input.commit, skipped, scope);
      const content = await this.diffFiles(current, target);
      const { modes, modeOnly } = await this.targetModes(cwd, input.commit, target, content);
      const files = byPath([...content, ...modeOnly.map((path) => ({ path, change: "modified" as const }))]);
      if (files.length === 0) return { files };
      await input.beforeChange?.(files);
      if (content.length > 0) {
        const created = await missingDirectories(
          cwd,
          content.filter((f) => f.change === "added").map((f) => f.path),
        );
        // Two-tree merge from the tree the index holds: updates and deletes only what differs,
        // and refuses (rather than clobbers) untracked paths in the way. Files are created
        // owner-only and get their exact modes below, so none is ever readable by more than it should.
        await this.git(["read-tree", "-m", "-u", current, target], { cwd, privateUmask: true });
        const directoryMode = 0o777 & ~process.umask();
        for (const dir of created) await chmod(dir, directoryMode).catch(() => undefined);
      }
      await applyModes(cwd, modes);
      for (const file of content) {
        if (file.change === "deleted") await removeEmptyParents(cwd, join(cwd, file.path));
      }
      return { files };
    });
  }

  /** Is this commit still in the store? */
  has(commit: string): Promise<boolean> {
    return this.enqueue(() => this.hasCommit(commit));
  }

  /**
   * Kills any git still running (its process group) and waits for the queue to drain: the
   * operation it served and any queued after it reject with ClosedError, as do later calls.
   */
  async close(): Promise<void> {
    this.closed = true;
    this.processes.killAll();
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
   * Brings cwd's private index up to date with the snapshot rule. Returns its tree, the
   * paths left out on purpose (excludes plus nested repositories) and the ignore scope.
   */
  private async stage(
    cwd: string,
    exclude: string[],
  ): Promise<{ tree: string; skipped: string[]; scope: IgnoreScope }> {
    const scope = await this.refreshIgnoreFile(cwd);
    const skipped = [...exclude, ...(await this.nestedRepositories(cwd, exclude))];
    await this.git(["add", "--all", "--", ":(top)", ...skipped.map(excludeSpec)], { cwd });
    // `add` never drops entries that are tracked already; ones that became ignored, excluded
    // or nested since an earlier snapshot of this cwd must go.
    await this.dropEntries(this.indexFor(cwd), skipped, { cwd });
    return { tree: (await this.git(["write-tree"], { cwd })).stdout.trim(), skipped, scope };
  }

  /** cwd's ignore file, from every source the user's git reads (ignoreSources.ts). */
  private refreshIgnoreFile(cwd: string): Promise<IgnoreScope> {
    return refreshIgnoreFile(cwd, {
      env: this.userEnv,
      sourcesFile: this.ownFile("sources", cwd),
      ignoredFile: this.ownFile("ignored", cwd),
      listIgnored: (scope) => this.listIgnored(scope),
      excludesFileSetting: (gitDir) => this.excludesFileSetting(gitDir),
    });
  }

  /** Ignored paths under the scope's prefix, top-relative; a wholly ignored directory as `dir/`. */
  private async listIgnored(scope: IgnoreScope): Promise<string[]> {
    const where = scope.prefix === "" ? [] : [`:(top,literal)${scope.prefix}`];
    const { stdout } = await this.git(
      ["ls-files", "-z", "--others", "--ignored", "--exclude-standard", "--directory", "--", ...where],
      {
        workTree: scope.top,
        index: this.ownFile("none", scope.top), // never written: every path counts as untracked
        excludesFile: scope.sourcesFile,
      },
    );
    return splitZ(stdout);
  }

  /** `core.excludesFile` as the user's git reads it (repository, global, system config); null when unset. */
  private async excludesFileSetting(gitDir: string | null): Promise<string | null> {
    const env: NodeJS.ProcessEnv = { ...withoutGit(this.userEnv), GIT_DIR: gitDir ?? this.dir };
    for (const name of USER_CONFIG_VARIABLES) if (this.userEnv[name] !== undefined) env[name] = this.userEnv[name];
    try {
      const { stdout, code } = await this.processes.run({
        config: [],
        args: ["config", "--get", "--path", "core.excludesFile"],
        env,
        cwd: this.dir,
        okCodes: [1],
      });
      return code === 0 && stdout.trim() !== "" ? stdout.trim() : null;
    } catch (error) {
      if (error instanceof ClosedError) throw error;
      return null; // a config the user's git cannot read either: git's default file applies
    }
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

  /** Removes ignored entries, and entries under `skipped` paths, from `index` (paths relative to the work tree). */
  private async dropEntries(index: string, skipped: string[], call: GitCall): Promise<void> {
    const ignored = await this.git(["ls-files", "-z", "--cached", "--ignored", "--exclude-standard"], {
      ...call,
      index,
    });
    const paths = splitZ(ignored.stdout);
    if (skipped.length > 0) {
      const under = await this.git(["ls-files", "-z", "--cached", "--", ...skipped.map(literalSpec)], {
        ...call,
        index,
      });
      paths.push(...splitZ(under.stdout));
    }
    if (paths.length === 0) return;
    await this.git(["update-index", "-z", "--force-remove", "--stdin"], {
      ...call,
      index,
      input: paths.map((path) => `${path}\0`).join(""),
    });
  }

  /**
   * The commit's tree without what restore must not touch (see the module comment). Its
   * ignored entries are matched as patterns from the user's work-tree top, so a file the
   * commit holds but the work tree no longer has is left out too when it is ignored now.
   */
  private async filteredTree(commit: string, skipped: string[], scope: IgnoreScope): Promise<string> {
    const index = join(this.own, "restore.index");
    const prefix = scope.prefix === "" ? [] : [`--prefix=${scope.prefix}/`];
    const call: GitCall = { workTree: scope.top, excludesFile: scope.sourcesFile };
    const atTop = (path: string) => (scope.prefix === "" ? path : `${scope.prefix}/${path}`);
    await unlink(index).catch(() => undefined);
    try {
      await this.git(["read-tree", ...prefix, commit], { ...call, index });
      await this.dropEntries(index, skipped.map(atTop), call);
      const { stdout } = await this.git(["ls-files", "-z", "--cached"], { ...call, index });
      if (stdout === "") return EMPTY_TREE;
      return (await this.git(["write-tree", ...prefix], { ...call, index })).stdout.trim();
    } finally {
      await unlink(index).catch(() => undefined);
    }
  }

  /** The exact modes restore must leave, and the files whose mode alone differs (fileModes.ts). */
  private async targetModes(cwd: string, commit: string, target: string, content: ChangedFile[]) {
    const manifest = await this.manifest(commit);
    const written = new Set(content.filter((f) => f.change !== "deleted").map((f) => f.path));
    const files = await this.treeFiles(target);
    const kept = manifest
      ? await currentModes(
          cwd,
          files.filter((f) => !written.has(f.path)),
        )
      : new Map<string, number>();
    return modesToRestore(files, manifest, written, kept, process.umask());
  }

  private async treeFiles(tree: string): Promise<TreeFile[]> {
    return regularFiles((await this.git(["ls-tree", "-r", "-z", tree])).stdout);
  }

  private async manifest(commit: string) {
    return manifestOf((await this.git(["cat-file", "commit", commit])).stdout);
  }

  private async diffFiles(from: string, to: string): Promise<ChangedFile[]> {
    const { stdout } = await this.git(["diff-tree", "-r", "-z", "--no-renames", "--name-status", from, to]);
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
  private async diffStat(from: string, to: string) {
    const { stdout } = await this.git(["diff-tree", "-r", "-z", "--no-renames", "--numstat", from, to]);
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
    return this.ownFile("index", cwd);
  }

  /** A private file per directory (`<kind>-<hash of the path>`). */
  private ownFile(kind: string, dir: string): string {
    const key = createHash("sha256").update(dir).digest("hex").slice(0, 24);
    return join(this.own, `${kind}-${key}`);
  }

  private git(args: string[], call: GitCall = {}): Promise<GitResult> {
    const env: NodeJS.ProcessEnv = { ...this.baseEnv };
    const workTree = call.workTree ?? call.cwd;
    if (workTree !== undefined) {
      env.GIT_WORK_TREE = workTree;
      env.GIT_INDEX_FILE = call.index ?? this.indexFor(workTree);
    }
    const excludesFile =
      call.excludesFile ?? (call.cwd !== undefined ? this.ownFile("ignored", call.cwd) : this.emptyFile);
    const config = [...this.config, "-c", `core.excludesFile=${excludesFile}`];
    const { input, okCodes, privateUmask } = call;
    return this.processes.run({ config, args, env, cwd: workTree ?? this.dir, input, okCodes, privateUmask });
  }
}

/** The environment minus anything GIT_* (a hook's GIT_DIR would redirect every call). */
function withoutGit(env: NodeJS.ProcessEnv): NodeJS.ProcessEnv {
  const out: NodeJS.ProcessEnv = {};
  for (const [key, value] of Object.entries(env)) {
    if (!key.toUpperCase().startsWith("GIT_")) out[key] = value;
  }
  return out;
}

const splitZ = (text: string) => text.split("\0").filter((part) => part !== "");
const byPath = (files: ChangedFile[]) => files.sort((a, b) => (a.path < b.path ? -1 : a.path > b.path ? 1 : 0));
