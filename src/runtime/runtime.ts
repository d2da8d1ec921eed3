import { join, resolve } from "node:path";
import type { ProviderCapabilities } from "../capabilities/schema.js";
import {
  CreateThreadInputSchema,
  SubagentInputSchema,
  WaitForSubagentInputSchema,
  ForkThreadInputSchema,
  InterruptInputSchema,
  RespondInputSchema,
  RollbackInputSchema,
  RunIdSchema,
  SendMessageInputSchema,
  SubscribeInputSchema,
  ThreadIdSchema,
  UndoSubagentInputSchema,
  ImplementPlanInputSchema,
  parseInput,
  type CloseSubagentInput,
  type CloseSubagentReceipt,
  type CreateThreadInput,
  type CreateThreadReceipt,
  type ForkReceipt,
  type ForkThreadInput,
  type InterruptInput,
  type InterruptReceipt,
  type RespondInput,
  type RespondReceipt,
  type RollbackInput,
  type SendMessageInput,
  type SendMessageReceipt,
  type SubscribeInput,
  type SubagentOutcome,
  type UndoSubagentInput,
  type ImplementPlanInput,
  type WaitForSubagentInput,
} from "../domain/commands.js";
import {
  InvalidInputError,
  NotFoundError,
  StoreCorruptError,
  StoreFailedError,
  isFileSystemError,
} from "../domain/errors.js";
import type { DomainEvent } from "../domain/events.js";
import { coalesceDeltas, isUrgentEvent, threadOf } from "../domain/eventRouting.js";
import { randomIds, unusedIds, type IdSource } from "../domain/ids.js";
import type { Actors } from "./actors.js";
import type { Subscriber, TillerRuntime, WaitForRunOptions } from "./api.js";
import { affordancesOf, type Affordances } from "./affordances.js";
import { assertNotFailed, assertOpen, findTarget, findThread } from "./commands/checks.js";
import { CommandReceipts } from "./commands/receipts.js";
import { interrupt } from "./commands/interrupt.js";
import { respond } from "./commands/respond.js";
import { rollback } from "./commands/rollback.js";
import { sendMessage } from "./commands/submit.js";
import { implementPlan } from "./commands/plans.js";
import { closeSubagent, waitForSubagent } from "./commands/subagents.js";
import { createThread, forkThread } from "./commands/threads.js";
import { undoSubagent, type UndoSubagentReceipt } from "./commands/undoSubagent.js";
import { Dispatcher } from "./dispatch.js";
import type { RollbackReceipt } from "./rollback.js";
import { threadSnapshot, type ThreadSnapshot } from "./snapshot.js";
import { FOLD_VERSION, Projections, isTerminalRunStatus, type RunView } from "./projections.js";
import { ReadModelStore, type ReadModelSelector } from "./readModels.js";
import { HostRegistry } from "./hosts/registry.js";
import {
  checkedClock,
  failureReporter,
  negotiateRecords,
  prepareDataDir,
  validateOptions,
  type RuntimeOptions,
} from "./options.js";
import { startPrewarm } from "./prewarm.js";
import { inspectOptionsOf, startRuntimeInspector, type RuntimeInspector } from "./inspector.js";
import { shutDown } from "./shutdown.js";
import { WaitForRunOptionsSchema, runEndedWithin } from "./waitForRun.js";
import { reportCutTail, reportIgnoredSnapshot, reportReaped, restoreRuntime } from "./recovery.js";
import {
  checkPrefix,
  readSnapshot,
  removeSnapshot,
  removeStaleTemps,
  type VerifiedSnapshot,
} from "./snapshots/file.js";
import { SnapshotWriter } from "./snapshots/writer.js";
import { EventLog, type LogRecord } from "./store/eventLog.js";
import { acquireDataDirLock, type DataDirLock } from "./store/lock.js";
import { openRuntimeMeta } from "./store/meta.js";
import type { StateDocument } from "./store/documents.js";
import type { RuntimeMeta } from "./store/meta.js";

export type { ThreadSnapshot } from "./snapshot.js";
export type { RuntimeOptions } from "./options.js";

export type { Subscriber, TillerRuntime, WaitForRunOptions } from "./api.js";

/**
 * The runtime: one writer of one data directory. Commands go API -> thread/run/request
 * actors -> effects -> adapters; provider events come back adapter -> normalizer -> actors;
 * every decision an actor makes is committed to the log and folded into the projections.
 */
export class Runtime implements TillerRuntime {
  readonly dataDir: string;
  readonly ids: IdSource;
  readonly #d: Dispatcher;
  /** The read models `select` serves (src/runtime/readModels.ts), fed by every fold. */
  readonly #readModels: ReadModelStore;
  #pumps: Promise<void>[] = [];
  #closing: Promise<void> | undefined;
  /** Command ids and their durable receipts: each command runs once. */
  readonly #receipts: CommandReceipts;

  readonly #allowSessionStop: boolean;
  /** The live inspector this runtime started (`inspect: true`, a port or options), if any. */
  #inspector: RuntimeInspector | null = null;
  /** Projection snapshots beside the log (src/runtime/snapshots/): what makes the next open replay only a tail. */
  #snapshots: SnapshotWriter | undefined;
  /**
   * The background check of the snapshot this runtime was opened from (the log's prefix and the text file): resolves
   * with the corruption it found, or null. Reads of the history before the snapshot wait for it.
   */
  #prefixChecked: Promise<StoreCorruptError | null> = Promise.resolve(null);
  readonly #stopChecking = new AbortController();
  /** Set when the log or the snapshot was found corrupt after open: the runtime stops, the snapshot is removed. */
  #corruption: { error: StoreCorruptError; snapshotRemoved: Promise<void> } | undefined;

  private constructor(
    options: RuntimeOptions,
    dataDir: string,
    private readonly log: EventLog<DomainEvent>,
    private readonly lock: DataDirLock,
    private readonly meta: StateDocument<RuntimeMeta>,
    /** The host processes (internal, like `views`). */
    readonly hosts: HostRegistry,
  ) {
    this.dataDir = dataDir;
    this.#allowSessionStop = options.allowSessionStopInterrupt ?? false;
    this.ids = unusedIds(options.ids ?? randomIds(), (id) => this.#d.views.isKnownId(id));
    this.#d = new Dispatcher(log, {
      dataDir,
      checkpoints: options.checkpoints ?? false,
      sandbox: options.sandbox ?? "workspace-write",
      sessionIdleMs: options.sessionIdleMs === undefined ? 600_000 : options.sessionIdleMs,
      turnSilenceMs: options.turnSilenceMs === undefined ? 900_000 : options.turnSilenceMs,
      providers: options.providers,
      ids: this.ids,
      allowSessionStopInterrupt: options.allowSessionStopInterrupt ?? false,
      tools: options.tools ?? [],
      inspect: typeof options.inspect === "function" ? options.inspect : undefined,
      onEscaped: (error) => failureReporter(options.onFailure)({ kind: "internal_error", error }),
      onFolded: (record) => this.#readModels.apply(record),
    });
    this.#receipts = new CommandReceipts(this.#d, log, this.ids);
    this.#readModels = new ReadModelStore(this.#d.views, log, (error) =>
      failureReporter(options.onFailure)({ kind: "subscriber_threw", error }),
    );
  }

  /** The live inspector's page (token included), when the runtime started one. */
  get inspectorUrl(): string | null {
    return this.#inspector?.server.url ?? null;
  }

  get head(): number {
    return this.#d.views.head;
  }

  /**
   * Read models (internal, reached by tests through test/support/internals.ts; the API's readThread returns copies).
   */
  get views(): Projections {
    return this.#d.views;
  }

  /** The projection snapshots (internal, like `views`). */
  get snapshots(): SnapshotWriter | undefined {
    return this.#snapshots;
  }

  /**
   * The verdict of the background check of the snapshot this runtime opened from (internal, like `views`): the
   * corruption it found, or null (also when there was no snapshot to check).
   */
  get snapshotChecked(): Promise<StoreCorruptError | null> {
    return this.#prefixChecked;
  }

  /** Live actors by app id (internal, like `views`). */
  get actors(): Actors {
    return this.#d.actors;
  }

  get closed(): boolean {
    return this.#d.closed;
  }

  /**
   * What opening the log found: the records it kept, and the tail it cut (a torn write, or a last line that did not
   * parse), if any.
   */
  get recovery(): EventLog<DomainEvent>["recovery"] {
    return this.log.recovery;
  }

  static async open(options: RuntimeOptions): Promise<Runtime> {
    validateOptions(options);
    const dataDir = resolve(options.dataDir ?? ".tiller");
    const now = checkedClock(options.now);
    const report = failureReporter(options.onFailure);
    await prepareDataDir(dataDir);
    const lock = await acquireDataDirLock(dataDir).catch((error: unknown) => {
      throw isFileSystemError(error) ? StoreFailedError.from(error, `locking ${dataDir}`) : error;
    });
    let inspector: RuntimeInspector | null = null;
    let runtime: Runtime | undefined;
    let log: EventLog<DomainEvent> | undefined;
    let registry: HostRegistry | undefined;
    let failedEarly: StoreFailedError | undefined;
    let found: Awaited<ReturnType<typeof readSnapshot>> | undefined;
    try {
      const inspectOptions = inspectOptionsOf(options.inspect);
      if (inspectOptions) {
        inspector = await startRuntimeInspector(inspectOptions);
        options = { ...options, inspect: inspector.inspect };
      }
      const { doc } = await openRuntimeMeta(dataDir, now());
      const directory = doc.data.directoryId!;
      const logFile = join(dataDir, "events.jsonl");
      await removeStaleTemps(dataDir);
      // Read under the lock, checked against the log as it is now; one that does not hold is ignored (and said).
      found = await readSnapshot(dataDir, logFile, { fold: FOLD_VERSION, directory });
      log = await EventLog.open<DomainEvent>(logFile, {
        isUrgent: isUrgentEvent,
        coalesce: coalesceDeltas,
        groupWindowMs: options.groupCommitMs ?? 2,
        now,
        onListenerError: (error) => report({ kind: "subscriber_threw", error }),
        onFailed: (error) => {
          if (runtime) runtime.#d.failed(error);
          else failedEarly = error;
          report({ kind: "store_failed", error });
        },
        start: found.snapshot?.start,
      });
      // Hosts a crashed previous life left running are reaped before anything starts new ones, but for those recovery
      // may take up again (reaped once it is done, unless it did).
      const hosts = await HostRegistry.open(
        dataDir,
        typeof options.inspect === "function" ? options.inspect : undefined,
      );
      registry = hosts.registry;
      const { reaped } = hosts;
      for (const [target, adapter] of Object.entries(options.providers)) adapter.bindHosts?.(registry, target);
      // A record that only a handshake tells is negotiated before anything reads it.
      await negotiateRecords(options.providers);
      runtime = new Runtime(options, dataDir, log, lock, doc, registry);
      if (failedEarly) runtime.#d.failed(failedEarly);
      const ignored = await runtime.#restore(found.snapshot);
      reportReaped(runtime.#d, [...reaped, ...registry.endAdoption()]);
      reportCutTail(runtime.#d, log.recovery.cut);
      reportIgnoredSnapshot(runtime.#d, found.ignored ?? ignored);
      const opened = { snapshot: found.snapshot, used: !ignored };
      const onError = (error: unknown) => report({ kind: "snapshot_failed", error });
      const onCorrupt = runtime.#corrupt.bind(runtime);
      const views = runtime.#d.views;
      runtime.#snapshots = SnapshotWriter.start({
        dataDir,
        directory,
        logFile,
        log,
        views,
        opened,
        onError,
        onCorrupt,
      });
      if (found.snapshot && opened.used) runtime.#checkPrefix(logFile, found.snapshot);
      await log.whenDurable();
      if (inspector) {
        runtime.#inspector = inspector;
        inspector.attach(runtime, Object.keys(options.providers));
      }
      const running = runtime;
      startPrewarm(options, report, () => running.closed);
      return runtime;
    } catch (error) {
      // Whatever was opened is given back: the runtime closes its own; before it existed, the log and hosts.
      if (runtime) await runtime.close().catch(() => undefined);
      else {
        await registry?.close().catch(() => undefined);
        await log?.close().catch(() => undefined);
      }
      await inspector?.close();
      found?.snapshot?.texts.store.close(); // its text file, unless the snapshot writer took it (and closed it)
      await lock.release().catch(() => undefined);
      // A full or failing disk while opening is typed like one while running.
      throw isFileSystemError(error) ? StoreFailedError.from(error, `opening ${dataDir}`) : error;
    }
  }

  /**
   * Checks in the background what open took on trust from the snapshot: the log's whole blocks before it and its
   * text file. Catch-up reads of the records before it wait for the verdict.
   */
  #checkPrefix(logFile: string, snapshot: VerifiedSnapshot): void {
    const signal = this.#stopChecking.signal;
    this.#prefixChecked = checkPrefix(logFile, snapshot, signal).then(
      (why) => (why ? this.#corrupt(new StoreCorruptError(why, { file: logFile })) : null),
      (error: unknown) => this.#corrupt(new StoreCorruptError(`checking the snapshot failed: ${String(error)}`, {})),
    );
    this.log.holdReads(snapshot.start.seq, this.#prefixChecked);
  }

  /**
   * The log, or the snapshot the runtime was opened from, does not hold: what was served from the snapshot may not be
   * the log's. The log stops (nothing more is written to it, every command fails with this error) and the snapshot is
   * removed, so the next open replays the log (and says `store_corrupt` if the log itself is damaged).
   */
  #corrupt(error: StoreCorruptError): StoreCorruptError {
    if (this.#corruption) return this.#corruption.error;
    const why = new StoreCorruptError(
      `${error.message}; the projection snapshot was removed: the next open replays the log`,
      error.details,
    );
    const snapshotRemoved = (async () => {
      await this.#snapshots?.stop();
      await removeSnapshot(this.dataDir);
    })().catch(() => undefined); // a snapshot that cannot be removed is ignored at open anyway (its check fails)
    this.#corruption = { error: why, snapshotRemoved };
    this.log.fail(why);
    return why;
  }

  /** Fold the log, settle what the previous life left open, rebuild actors, then accept work. */
  async #restore(snapshot: VerifiedSnapshot | null): Promise<string | null> {
    const start = snapshot && { seq: snapshot.start.seq, state: snapshot.state };
    const restored = await restoreRuntime(this.#d, this.log, start ?? undefined);
    this.#pumps = restored.pumps;
    return restored.ignored;
  }

  // ---- public API: parsed here, run by src/runtime/commands/ under `#receipts` -----------
  async createThread(input: CreateThreadInput): Promise<CreateThreadReceipt> {
    const p = parseInput(CreateThreadInputSchema, input);
    return this.#receipts.run(p.commandId, "createThread", () => createThread(this.#d, p));
  }

  async sendMessage(input: SendMessageInput): Promise<SendMessageReceipt> {
    const p = parseInput(SendMessageInputSchema, input);
    return this.#receipts.run(p.commandId, "sendMessage", () => sendMessage(this.#d, p));
  }

  async interrupt(input: InterruptInput): Promise<InterruptReceipt> {
    const p = parseInput(InterruptInputSchema, input);
    return this.#receipts.run(p.commandId, "interrupt", () => interrupt(this.#d, p));
  }

  async respond(input: RespondInput): Promise<RespondReceipt> {
    const p = parseInput(RespondInputSchema, input);
    return this.#receipts.run(p.commandId, "respond", () => respond(this.#d, p));
  }

  async forkThread(input: ForkThreadInput): Promise<ForkReceipt> {
    const p = parseInput(ForkThreadInputSchema, input);
    return this.#receipts.run(p.commandId, "forkThread", () => forkThread(this.#d, p));
  }

  async rollback(input: RollbackInput): Promise<RollbackReceipt & { commandId: string }> {
    const p = parseInput(RollbackInputSchema, input);
    return this.#receipts.run(p.commandId, "rollback", () => rollback(this.#d, p));
  }

  async undoSubagent(input: UndoSubagentInput): Promise<UndoSubagentReceipt & { commandId: string }> {
    const p = parseInput(UndoSubagentInputSchema, input);
    return this.#receipts.run(p.commandId, "undoSubagent", () => undoSubagent(this.#d, p));
  }

  async implementPlan(input: ImplementPlanInput): Promise<SendMessageReceipt> {
    const p = parseInput(ImplementPlanInputSchema, input);
    return this.#receipts.run(p.commandId, "implementPlan", () => implementPlan(this.#d, p));
  }

  /** Resolves once the subagent has ended (the provider asked to wait for it). See TillerRuntime.waitForSubagent. */
  async waitForSubagent(input: WaitForSubagentInput): Promise<SubagentOutcome> {
    const p = parseInput(WaitForSubagentInputSchema, input);
    return waitForSubagent(this.#d, this.log, p);
  }

  async closeSubagent(input: CloseSubagentInput): Promise<CloseSubagentReceipt> {
    const p = parseInput(SubagentInputSchema, input);
    return this.#receipts.run(p.commandId, "closeSubagent", () => closeSubagent(this.#d, p));
  }

  /** What a client may offer for this thread now (fork, interrupt, rollback, approvals, panels), and why not. */
  affordances(threadId: string): Affordances {
    assertOpen(this.#d);
    findThread(this.#d, parseInput(ThreadIdSchema, threadId));
    return affordancesOf(this.#d, threadId, this.#allowSessionStop);
  }

  /** A consistent read model of one thread at `seq`, returned once `seq` is durable. */
  async readThread(threadId: string): Promise<ThreadSnapshot> {
    assertOpen(this.#d);
    const snapshot = threadSnapshot(this.#d, findThread(this.#d, parseInput(ThreadIdSchema, threadId)));
    await this.log.whenDurable(snapshot.seq);
    // What came from the snapshot is served once the log before it is proven the one it was taken of.
    const corrupt = await this.#prefixChecked;
    if (corrupt) throw corrupt;
    return snapshot;
  }

  listThreads(): Array<{ threadId: string; title: string; providerTarget: string; runs: number }> {
    assertOpen(this.#d);
    return [...this.#d.views.threads.values()].map((t) => ({
      threadId: t.threadId,
      title: t.title,
      providerTarget: t.providerTarget,
      runs: t.runs.length,
    }));
  }

  /** The capability record in force for a target (the live session's, else the adapter's declared one). */
  capabilities(providerTarget: string): ProviderCapabilities {
    assertOpen(this.#d);
    return structuredClone(findTarget(this.#d, providerTarget, "providerTarget").capabilities());
  }

  /**
   * The selected part of the UI read models, once and then on each change (never on a text
   * delta), as frozen copies once durable. See TillerRuntime.select.
   */
  select<T>(selector: ReadModelSelector<T>, listener: (value: T) => void, equal?: (a: T, b: T) => boolean): () => void {
    assertOpen(this.#d);
    if (typeof selector !== "function") throw new InvalidInputError("selector", "expected a function");
    if (typeof listener !== "function") throw new InvalidInputError("listener", "expected a function");
    if (equal !== undefined && typeof equal !== "function") throw new InvalidInputError("equal", "expected a function");
    return this.#readModels.select(selector, listener, equal);
  }

  /** Durable events after `afterSeq` (all threads, or one), then live ones, in order, once each. */
  subscribe(input: SubscribeInput, listener: Subscriber): () => void {
    assertOpen(this.#d);
    const p = parseInput(SubscribeInputSchema, input);
    if (typeof listener !== "function") throw new InvalidInputError("listener", "expected a function");
    if (p.threadId) findThread(this.#d, p.threadId);
    if (p.afterSeq > this.log.head) throw new InvalidInputError("afterSeq", `is beyond the log head ${this.log.head}`);
    const filter = p.threadId ? (r: LogRecord<DomainEvent>) => threadOf(r.event) === p.threadId : undefined;
    return this.log.subscribe(p.afterSeq, listener, filter);
  }

  /**
   * Resolves with the run once it is terminal and durable. `timeoutMs` rejects with `timeout`
   * and `signal` with its reason (the run itself goes on); a failed store rejects at once.
   */
  async waitForRun(runId: string, options: WaitForRunOptions = {}): Promise<RunView> {
    assertOpen(this.#d);
    const run = this.#d.views.runs.get(parseInput(RunIdSchema, runId));
    if (!run) throw new NotFoundError("run", runId);
    const wait = parseInput(WaitForRunOptionsSchema, options);
    if (!isTerminalRunStatus(run.status)) await runEndedWithin(this.#d, runId, wait);
    assertNotFailed(this.#d);
    await this.#d.checkpoints.settled(runId);
    await this.log.whenDurable();
    return structuredClone(this.#d.views.runs.get(runId)!);
  }

  /**
   * Stops providers, cancels what is still running (nothing is left "running"), flushes, unlocks
   * (src/runtime/shutdown.ts). A second call (while the first still closes, or after) resolves
   * when the directory is given back.
   */
  close(): Promise<void> {
    this.#closing ??= this.#close();
    return this.#closing;
  }

  #close(): Promise<void> {
    const { hosts, log, meta, lock } = this;
    const snapshots = this.#snapshots;
    this.#stopChecking.abort();
    const settled = async () => {
      await this.#prefixChecked;
      await this.#corruption?.snapshotRemoved;
    };
    const d = this.#d;
    return shutDown({ d, pumps: this.#pumps, inspector: this.#inspector, hosts, log, meta, lock, snapshots, settled });
  }
}
