/**
 * Filesystem checkpoints as commits in a runtime-owned bare git repository.
 *
 * The user's own `.git` is never written: every git call runs with GIT_DIR set to the private
 * store and GIT_INDEX_FILE set to a private index (one per cwd, so its stat cache keeps
 * `add -A` cheap), so the user's HEAD, branches, index and stash cannot move
 * (privateRepository.ts). The only things read from the user's side are its ignore rules (see
 * ignoreSources.ts). A checkpoint commit is pinned by `refs/tiller/<ref>` so gc never drops it.
 * The store is private to its owner: directories 0700, files 0600 (objects 0400), whatever the umask.
 *
 * What a snapshot holds: cwd's files that the user's git would not ignore (every ignore source
 * it reads), minus the caller's `exclude` paths and nested repositories (a directory with its
 * own `.git`), with each file's exact permission bits (fileModes.ts). The same rule decides
 * what restore may touch, so ignored, excluded and nested content is never overwritten or
 * deleted (staging.ts).
 */
import { chmod } from "node:fs/promises";
import { join, resolve } from "node:path";
import { CheckpointError, ClosedError, InvalidInputError } from "../../domain/errors.js";
import { byPath, commitManifest, diffFiles, diffStat, hasCommit, treeFiles } from "./commitReads.js";
import { applyModes, buildManifest, currentModes, modeOf, modesToRestore, withManifest } from "./fileModes.js";
import { EMPTY_TREE, PrivateRepository } from "./privateRepository.js";
import { filteredTree, stage, withPathsFrom } from "./staging.js";
import type {
  CaptureInput,
  ChangedFile,
  CheckpointCapture,
  RestoreInput,
  RevertInput,
  StoreOptions,
} from "./storeTypes.js";
import { assertDirectory, missingDirectories, normalizeExcludes, removeEmptyParents } from "./storeFiles.js";

export type { CaptureInput, ChangedFile, CheckpointCapture, RestoreInput, RevertInput, StoreOptions };

const REF_PATTERN = /^[A-Za-z0-9_-]+(?:\/[A-Za-z0-9_-]+)*$/;

export class GitCheckpointStore {
  private tail: Promise<unknown> = Promise.resolve();
  private closed = false;

  private constructor(private readonly repo: PrivateRepository) {}

  /** Opens (creating if needed) the private bare repository at `dir` (e.g. `<dataDir>/checkpoints.git`). */
  static async open(dir: string, options: StoreOptions = {}): Promise<GitCheckpointStore> {
    return new GitCheckpointStore(await PrivateRepository.open(resolve(dir), options.env ?? process.env));
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
    const repo = this.repo;
    return this.enqueue(async () => {
      await assertDirectory(cwd);
      if (input.parent !== null && !(await hasCommit(repo, input.parent))) {
        throw new CheckpointError(`parent checkpoint ${input.parent} is not in the store`, {
          commit: input.parent,
        });
      }
      const { tree } = await stage(repo, cwd, exclude);
      const stagedFiles = await treeFiles(repo, tree);
      const manifest = buildManifest(stagedFiles, await currentModes(cwd, stagedFiles));
      const parentArgs = input.parent === null ? [] : ["-p", input.parent];
      const message = withManifest(input.message, manifest);
      const commit = (await repo.git(["commit-tree", tree, ...parentArgs], { cwd, input: message })).stdout.trim();
      await repo.git(["update-ref", `refs/tiller/${input.ref}`, commit], { cwd });
      const from = input.parent ?? EMPTY_TREE;
      const files = await diffFiles(repo, from, commit);
      // Git sees only the executable bit: a mode change it cannot see is a change all the same.
      const parentManifest = input.parent === null ? null : await commitManifest(repo, input.parent);
      if (parentManifest) {
        const listed = new Set(files.map((f) => f.path));
        for (const file of stagedFiles) {
          if (!listed.has(file.path) && modeOf(parentManifest, file) !== modeOf(manifest, file))
            files.push({ path: file.path, change: "modified" });
        }
      }
      const { insertions, deletions } = await diffStat(repo, from, commit);
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
    const repo = this.repo;
    return this.enqueue(async () => {
      if (!(await hasCommit(repo, input.commit))) {
        throw new CheckpointError(`checkpoint ${input.commit} is not in the store`, {
          commit: input.commit,
        });
      }
      await assertDirectory(cwd);
      const { tree: current, skipped, scope } = await stage(repo, cwd, exclude);
      const target = await filteredTree(repo, input.commit, skipped, scope);
      const content = await diffFiles(repo, current, target);
      const { modes, modeOnly } = await this.targetModes(cwd, input.commit, target, content);
      const files = byPath([...content, ...modeOnly.map((path) => ({ path, change: "modified" as const }))]);
      if (files.length === 0) return { files };
      await input.beforeChange?.(files);
      await this.apply(cwd, current, target, content, modes);
      return { files };
    });
  }

  /**
   * Undoes what changed between two commits of the store (`from`, a scope's start, and `to`,
   * its end) in cwd, and nothing else: each of those files goes back to its state in `from`
   * (content and permission bits), provided it is still as `to` left it. A file that has
   * changed since is a conflict: nothing is changed then, and the conflicts are returned. A
   * file already back as in `from` is left. Ignored, excluded and nested content is never
   * touched (the snapshot rule, as for restore). `beforeChange` hears the list first.
   */
  async revert(input: RevertInput): Promise<{ files: ChangedFile[]; conflicts: ChangedFile[] }> {
    const cwd = resolve(input.cwd);
    const exclude = normalizeExcludes(cwd, input.exclude);
    const repo = this.repo;
    return this.enqueue(async () => {
      for (const commit of [input.from, input.to]) {
        if (!(await hasCommit(repo, commit)))
          throw new CheckpointError(`checkpoint ${commit} is not in the store`, { commit });
      }
      await assertDirectory(cwd);
      const scoped = (await diffFiles(repo, input.from, input.to)).map((f) => f.path);
      if (scoped.length === 0) return { files: [], conflicts: [] };
      const { tree: current, skipped, scope } = await stage(repo, cwd, exclude);
      const sinceEnd = await diffFiles(repo, input.to, current, scoped);
      const fromStart = new Set((await diffFiles(repo, input.from, current, scoped)).map((f) => f.path));
      // Changed since the scope ended, and not back as it began: someone else's work now.
      const conflicts = sinceEnd.filter((f) => fromStart.has(f.path));
      if (conflicts.length > 0) return { files: [], conflicts };
      const movedOn = new Set(sinceEnd.map((f) => f.path));
      const mixed = await withPathsFrom(
        repo,
        cwd,
        current,
        input.from,
        scoped.filter((path) => !movedOn.has(path)),
      );
      const target = await filteredTree(repo, mixed, skipped, scope);
      const content = await diffFiles(repo, current, target);
      if (content.length === 0) return { files: [], conflicts: [] };
      await input.beforeChange?.(content);
      const manifest = await commitManifest(repo, input.from);
      const written = new Set(content.filter((f) => f.change !== "deleted").map((f) => f.path));
      const { modes } = modesToRestore(await treeFiles(repo, target), manifest, written, new Map(), process.umask());
      await this.apply(cwd, current, target, content, modes);
      return { files: content, conflicts: [] };
    });
  }

  /** Is this commit still in the store? */
  has(commit: string): Promise<boolean> {
    return this.enqueue(() => hasCommit(this.repo, commit));
  }

  /**
   * Kills any git still running (its process group) and waits for the queue to drain: the
   * operation it served and any queued after it reject with ClosedError, as do later calls.
   */
  async close(): Promise<void> {
    this.closed = true;
    this.repo.processes.killAll();
    await this.tail.catch(() => undefined);
  }

  /** One writer: the private index and refs must not see two operations at once. */
  private enqueue<T>(operation: () => Promise<T>): Promise<T> {
    if (this.closed) return Promise.reject(new ClosedError("checkpoint store"));
    const result = this.tail.then(operation);
    this.tail = result.catch(() => undefined);
    return result;
  }

  /**
   * Makes cwd go from `current` (the tree its index holds) to `target`: `content` is what differs, `modes` the exact
   * permission bits to leave.
   */
  private async apply(
    cwd: string,
    current: string,
    target: string,
    content: ChangedFile[],
    modes: Map<string, number>,
  ): Promise<void> {
    if (content.length > 0) {
      const created = await missingDirectories(
        cwd,
        content.filter((f) => f.change === "added").map((f) => f.path),
      );
      // Two-tree merge from the tree the index holds: updates and deletes only what differs,
      // and refuses (rather than clobbers) untracked paths in the way. Files are created
      // owner-only and get their exact modes below, so none is ever readable by more than it should.
      await this.repo.git(["read-tree", "-m", "-u", current, target], { cwd, privateUmask: true });
      const directoryMode = 0o777 & ~process.umask();
      for (const dir of created) await chmod(dir, directoryMode).catch(() => undefined);
    }
    await applyModes(cwd, modes);
    for (const file of content) {
      if (file.change === "deleted") await removeEmptyParents(cwd, join(cwd, file.path));
    }
  }

  /** The exact modes restore must leave, and the files whose mode alone differs (fileModes.ts). */
  private async targetModes(cwd: string, commit: string, target: string, content: ChangedFile[]) {
    const manifest = await commitManifest(this.repo, commit);
    const written = new Set(content.filter((f) => f.change !== "deleted").map((f) => f.path));
    const files = await treeFiles(this.repo, target);
    const kept = manifest
      ? await currentModes(
          cwd,
          files.filter((f) => !written.has(f.path)),
        )
      : new Map<string, number>();
    return modesToRestore(files, manifest, written, kept, process.umask());
  }
}
