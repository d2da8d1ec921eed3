import { isAbsolute, join, relative } from "node:path";
import type { ProviderCapabilities } from "../../capabilities/schema.js";
import type { ChangedFile, CheckpointPhase } from "../../domain/entities.js";
import { CheckpointError } from "../../domain/errors.js";
import type { DomainEvent } from "../../domain/events.js";
import type { IdSource } from "../../domain/ids.js";
import { redact } from "../../domain/redact.js";
import type { Projections } from "../projections.js";
import { GitCheckpointStore } from "./gitStore.js";

/** What checkpoints need from the runtime. */
export interface CheckpointHost {
  readonly views: Projections;
  readonly ids: IdSource;
  /** Commit from an asynchronous completion (ignored once the runtime closes). */
  commitLater(event: DomainEvent): void;
}

/**
 * Filesystem checkpoints owned by the runtime: a baseline before each root run's first
 * turn, a final checkpoint after its terminal, and nested scopes for subagents (which never
 * advance the run count, and can be undone one at a time). They live in a private git
 * repository under the data directory (`checkpoints.git`), never in the user's `.git`.
 * Captures are serialized by the store, so a run's final checkpoint is always taken before
 * the next run's baseline.
 */
export class Checkpoints {
  #store: Promise<GitCheckpointStore> | null = null;
  #pending = new Map<string, Promise<void>>();
  /** The latest capture per thread: the next one waits for it, so it sees its parent recorded. */
  #threadTail = new Map<string, Promise<void>>();

  constructor(
    private readonly dataDir: string,
    readonly enabled: boolean,
    private readonly host: CheckpointHost,
  ) {}

  #open(): Promise<GitCheckpointStore> {
    this.#store ??= GitCheckpointStore.open(join(this.dataDir, "checkpoints.git"));
    return this.#store;
  }

  /** Checkpoint only where the runtime is asked to and the target lets the app checkpoint. */
  applies(caps: ProviderCapabilities): boolean {
    return this.enabled && caps.checkpointing.appCanCheckpointFilesystem;
  }

  /** The pre-run baseline; awaited before the run's first turn so it sees the files as they were. */
  baseline(runId: string, caps: ProviderCapabilities): Promise<void> {
    if (!this.applies(caps)) return Promise.resolve();
    return this.#track(runId, this.#inOrder(runId, "root_run", "baseline", null));
  }

  /** The post-run checkpoint: the state a rollback to this run restores. */
  final(runId: string, caps: ProviderCapabilities): void {
    const run = this.host.views.runs.get(runId);
    if (!run || !this.applies(caps) || !this.host.views.checkpointsOf(run.threadId).some((c) => c.runId === runId))
      return;
    void this.#track(runId, this.#inOrder(runId, "root_run", "final", null));
  }

  /**
   * A subagent finished: its nested scope ends here. Nested scopes are app-owned, taken
   * whatever the provider says of its own (`supportsNestedCheckpointScopes` only says whether
   * the provider's nested conversation could follow an undo), so one subagent's edits can be
   * undone on their own (`revertScope`). The scope opens at the run's previous checkpoint
   * (its baseline, or the end of the subagent before): what the root changed in the directory
   * since then, before the subagent started, counts as the subagent's.
   */
  nested(runId: string, nodeId: string, caps: ProviderCapabilities): void {
    if (!this.applies(caps)) return;
    void this.#track(runId, this.#inOrder(runId, "subagent", "final", nodeId));
  }

  /**
   * Undoes one nested scope in its thread's directory: the files that changed within it go
   * back to the scope's start, if each is still as the scope left it (else nothing changes and
   * the conflicts are returned). Waits for the thread's captures, and the thread's next capture
   * (a run's baseline, which its first turn awaits) waits for it.
   */
  revertScope(
    checkpointId: string,
    beforeChange?: (files: ChangedFile[]) => Promise<void>,
  ): Promise<{ files: ChangedFile[]; conflicts: ChangedFile[] }> {
    const scope = this.host.views.checkpoints.get(checkpointId);
    const start = scope?.parentCheckpointId ? this.host.views.checkpoints.get(scope.parentCheckpointId) : undefined;
    if (!scope?.commit || !start?.commit)
      throw new CheckpointError(`checkpoint ${checkpointId} has no scope to revert`, { checkpointId });
    const cwd = this.host.views.threads.get(scope.threadId)!.cwd;
    const input = { cwd, from: start.commit, to: scope.commit, exclude: this.#exclude(cwd) };
    return this.#afterThread(scope.threadId, async () =>
      (await this.#open()).revert({ ...input, ...(beforeChange ? { beforeChange } : {}) }),
    );
  }

  /**
   * Restores a thread's working directory to a checkpoint; returns what changed.
   * `beforeChange` hears every file about to change before the first one does (see rollback.ts).
   */
  async restore(checkpointId: string, beforeChange?: (files: ChangedFile[]) => Promise<void>): Promise<ChangedFile[]> {
    const checkpoint = this.host.views.checkpoints.get(checkpointId);
    if (!checkpoint?.commit)
      throw new CheckpointError(`checkpoint ${checkpointId} has no commit to restore`, { checkpointId });
    const thread = this.host.views.threads.get(checkpoint.threadId)!;
    const store = await this.#open();
    const { files } = await store.restore({
      cwd: thread.cwd,
      commit: checkpoint.commit,
      exclude: this.#exclude(thread.cwd),
      ...(beforeChange ? { beforeChange } : {}),
    });
    return files;
  }

  /** Resolves once every capture started for this run (or for all runs) is recorded. */
  async settled(runId?: string): Promise<void> {
    const pending = runId ? [this.#pending.get(runId)] : [...this.#pending.values()];
    await Promise.allSettled(pending.filter((p) => p !== undefined));
  }

  /**
   * Waits for the captures under way (a run's final checkpoint is worth its wait), then closes
   * the store, which kills any git still running: a restore the runtime gave up waiting for is
   * cut short, and the next runtime finishes it (its announce is in the log).
   */
  async close(): Promise<void> {
    await this.settled();
    if (this.#store) await (await this.#store.catch(() => null))?.close();
  }

  #track(runId: string, work: Promise<void>): Promise<void> {
    const chained = (this.#pending.get(runId) ?? Promise.resolve()).then(() => work);
    this.#pending.set(runId, chained);
    void chained.finally(() => {
      if (this.#pending.get(runId) === chained) this.#pending.delete(runId);
    });
    return chained;
  }

  #inOrder(
    runId: string,
    scope: "root_run" | "subagent",
    phase: CheckpointPhase,
    nodeId: string | null,
  ): Promise<void> {
    const threadId = this.host.views.runs.get(runId)!.threadId;
    return this.#afterThread(threadId, () => this.#capture(runId, scope, phase, nodeId));
  }

  /** Runs `work` after the thread's latest capture or revert; the next one waits for it. */
  #afterThread<T>(threadId: string, work: () => Promise<T>): Promise<T> {
    const result = (this.#threadTail.get(threadId) ?? Promise.resolve()).then(work);
    const done = result.then(
      () => undefined,
      () => undefined,
    );
    this.#threadTail.set(threadId, done);
    void done.finally(() => {
      if (this.#threadTail.get(threadId) === done) this.#threadTail.delete(threadId);
    });
    return result;
  }

  async #capture(
    runId: string,
    scope: "root_run" | "subagent",
    phase: CheckpointPhase,
    nodeId: string | null,
  ): Promise<void> {
    const { views, ids } = this.host;
    const run = views.runs.get(runId)!;
    const thread = views.threads.get(run.threadId)!;
    const checkpointId = ids.next("chk");
    const where = { threadId: run.threadId, runId, checkpointId, scope, phase, nodeId };
    // A root checkpoint's parent is the thread's latest root one still standing (a rollback makes later ones
    // stale); a subagent's is its run's latest, root or nested: where its scope opens.
    const parent = scope === "subagent" ? latestOfRun(views, run.threadId, runId) : latest(views, run.threadId);
    try {
      const store = await this.#open();
      const capture = await store.capture({
        cwd: thread.cwd,
        ref: `${run.threadId}/${checkpointId}`,
        parent: parent?.commit ?? null,
        message: `${scope} ${phase} of ${runId} (run ${run.ordinal})`,
        exclude: this.#exclude(thread.cwd),
      });
      this.host.commitLater({
        type: "checkpoint.captured",
        ...where,
        parentCheckpointId: parent?.checkpointId ?? null,
        ...capture,
      });
    } catch (error) {
      const message = redact(error instanceof Error ? error.message : String(error));
      this.host.commitLater({ type: "checkpoint.failed", ...where, message });
    }
  }

  /** Never checkpoint the runtime's own data directory when it lives inside the work tree. */
  #exclude(cwd: string): string[] {
    const rel = relative(cwd, this.dataDir);
    return rel && !rel.startsWith("..") && !isAbsolute(rel) ? [rel] : [];
  }
}

function latest(views: Projections, threadId: string) {
  return views
    .checkpointsOf(threadId)
    .filter((c) => c.status === "ready" && c.scope === "root_run")
    .at(-1);
}

function latestOfRun(views: Projections, threadId: string, runId: string) {
  return views
    .checkpointsOf(threadId)
    .filter((c) => c.status === "ready" && c.runId === runId)
    .at(-1);
}
