import { join, resolve } from "node:path";
import { z } from "zod";
import type { ProviderCapabilities } from "../capabilities/schema.js";
import {
  CreateThreadInputSchema,
  ForkThreadInputSchema,
  InterruptInputSchema,
  RespondInputSchema,
  RollbackInputSchema,
  RunIdSchema,
  SendMessageInputSchema,
  SubscribeInputSchema,
  ThreadIdSchema,
  parseInput,
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
} from "../domain/commands.js";
import {
  ClosedError,
  ConflictError,
  InvalidInputError,
  NotFoundError,
  NotResumableError,
  StoreFailedError,
  TillerError,
  TimeoutError,
  isFileSystemError,
} from "../domain/errors.js";
import { isUrgentEvent, threadOf, type DomainEvent } from "../domain/events.js";
import { randomIds, unusedIds, type IdSource } from "../domain/ids.js";
import type { Actors } from "./actors.js";
import type { Subscriber, TillerRuntime, WaitForRunOptions } from "./api.js";
import { affordancesOf, type Affordances } from "./affordances.js";
import { Dispatcher } from "./dispatch.js";
import { planRollback, rollbackRequest, sharedDirectoryBusy, type RollbackReceipt } from "./rollback.js";
import { threadSnapshot, type ThreadSnapshot } from "./snapshot.js";

export type { ThreadSnapshot } from "./snapshot.js";
import { submitMessage } from "./submit.js";
import { expectOutcome, refusal } from "./outcomes.js";
import { Projections, isTerminalRunStatus, type RunView, type ThreadView } from "./projections.js";
import { ReadModelStore, type ReadModelSelector } from "./readModels.js";
import { HostRegistry } from "./hosts/registry.js";
import { failureReporter, validateOptions, type RuntimeOptions } from "./options.js";
import { inspectOptionsOf, startRuntimeInspector, type RuntimeInspector } from "./inspector.js";
import { reportCutTail, reportReaped, restoreRuntime } from "./recovery.js";
import { EventLog, type LogRecord } from "./store/eventLog.js";
import { acquireDataDirLock, type DataDirLock } from "./store/lock.js";
import { openRuntimeMeta } from "./store/meta.js";
import { assertDirectory, preparePrivateDir } from "./store/files.js";
import type { StateDocument } from "./store/documents.js";
import type { RuntimeMeta } from "./store/meta.js";
import type { Target } from "./targets.js";

export type { RuntimeOptions } from "./options.js";

export type { Subscriber, TillerRuntime, WaitForRunOptions } from "./api.js";

const WaitForRunOptionsSchema = z.strictObject({
  timeoutMs: z.number().int().positive().max(2_147_483_647).optional(),
  signal: z.custom<AbortSignal>((v) => v instanceof AbortSignal, "expected an AbortSignal").optional(),
});

/** How long `close()` waits for provider calls that are still in flight. */
const CLOSE_GRACE_MS = 5_000;
/** `work`, or `fallback()` once `CLOSE_GRACE_MS` passed; the timer never outlives the race. */
async function withGrace<T>(work: Promise<T>, fallback: () => T): Promise<T> {
  let timer: NodeJS.Timeout | undefined;
  const grace = new Promise<T>((done) => (timer = setTimeout(() => done(fallback()), CLOSE_GRACE_MS)));
  try {
    return await Promise.race([work, grace]);
  } finally {
    clearTimeout(timer);
  }
}

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
  /** Commands in flight by id (their receipt is not committed yet). */
  readonly #inflight = new Map<string, { command: string; done: Promise<object> }>();

  readonly #allowSessionStop: boolean;
  /** The live inspector this runtime started (`inspect: true`, a port or options), if any. */
  #inspector: RuntimeInspector | null = null;

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
      inspect: typeof options.inspect === "function" ? options.inspect : undefined,
      onEscaped: (error) => failureReporter(options.onFailure)({ kind: "internal_error", error }),
      onFolded: (record) => this.#readModels.apply(record),
    });
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
    const now = options.now ?? (() => new Date());
    const report = failureReporter(options.onFailure);
    await preparePrivateDir(dataDir, "dataDir");
    const lock = await acquireDataDirLock(dataDir).catch((error: unknown) => {
      throw isFileSystemError(error) ? StoreFailedError.from(error, `locking ${dataDir}`) : error;
    });
    let inspector: RuntimeInspector | null = null;
    let runtime: Runtime | undefined;
    let log: EventLog<DomainEvent> | undefined;
    let registry: HostRegistry | undefined;
    let failedEarly: StoreFailedError | undefined;
    try {
      const inspectOptions = inspectOptionsOf(options.inspect);
      if (inspectOptions) {
        inspector = await startRuntimeInspector(inspectOptions);
        options = { ...options, inspect: inspector.inspect };
      }
      const { doc } = await openRuntimeMeta(dataDir, now());
      log = await EventLog.open<DomainEvent>(join(dataDir, "events.jsonl"), {
        isUrgent: isUrgentEvent,
        groupWindowMs: options.groupCommitMs ?? 2,
        now,
        onListenerError: (error) => report({ kind: "subscriber_threw", error }),
        onFailed: (error) => {
          if (runtime) runtime.#d.failed(error);
          else failedEarly = error;
          report({ kind: "store_failed", error });
        },
      });
      // Hosts a crashed previous life left running are reaped before anything starts new ones.
      const opened = await HostRegistry.open(
        dataDir,
        typeof options.inspect === "function" ? options.inspect : undefined,
      );
      registry = opened.registry;
      const { reaped } = opened;
      for (const [target, adapter] of Object.entries(options.providers)) adapter.bindHosts?.(registry, target);
      runtime = new Runtime(options, dataDir, log, lock, doc, registry);
      if (failedEarly) runtime.#d.failed(failedEarly);
      await runtime.#restore();
      reportReaped(runtime.#d, reaped);
      reportCutTail(runtime.#d, log.recovery.cut);
      await log.whenDurable();
      if (inspector) {
        runtime.#inspector = inspector;
        inspector.attach(runtime, Object.keys(options.providers));
      }
      return runtime;
    } catch (error) {
      // Whatever was opened is given back: the runtime closes its own; before it existed, the log and hosts.
      if (runtime) await runtime.close().catch(() => undefined);
      else {
        await registry?.close().catch(() => undefined);
        await log?.close().catch(() => undefined);
      }
      await inspector?.close();
      await lock.release().catch(() => undefined);
      // A full or failing disk while opening is typed like one while running.
      throw isFileSystemError(error) ? StoreFailedError.from(error, `opening ${dataDir}`) : error;
    }
  }

  /** Fold the log, settle what the previous life left open, rebuild actors, then accept work. */
  async #restore(): Promise<void> {
    this.#pumps = await restoreRuntime(this.#d, this.log);
  }

  // ---- public API --------------------------------------------------------------------
  async createThread(input: CreateThreadInput): Promise<CreateThreadReceipt> {
    const p = parseInput(CreateThreadInputSchema, input);
    return this.#command(p.commandId, "createThread", async () => {
      this.#target(p.providerTarget, "providerTarget");
      const cwd = resolve(p.cwd ?? process.cwd());
      await assertDirectory(cwd, "cwd");
      this.#assertOpen();
      const threadId = this.ids.next("thr");
      this.#d.run(() =>
        this.#d.commit({
          type: "thread.created",
          threadId,
          title: p.title ?? "Untitled thread",
          cwd,
          providerTarget: p.providerTarget,
          model: p.model ?? null,
          lineage: null,
        }),
      );
      this.#d.spawnThread(threadId, 1, []);
      return { threadId };
    });
  }

  async sendMessage(input: SendMessageInput): Promise<SendMessageReceipt> {
    const p = parseInput(SendMessageInputSchema, input);
    return this.#command(p.commandId, "sendMessage", () => {
      const thread = this.#thread(p.threadId);
      const providerTarget = p.providerTarget ?? thread.runs.at(-1)?.providerTarget ?? thread.providerTarget;
      const target = this.#target(providerTarget, "providerTarget");
      return submitMessage(this.#d, thread, target, p);
    });
  }

  async interrupt(input: InterruptInput): Promise<InterruptReceipt> {
    const p = parseInput(InterruptInputSchema, input);
    return this.#command(p.commandId, "interrupt", () => {
      const actor = this.#d.actors.runs.get(p.runId);
      if (!actor) throw this.#runGone(p.runId);
      const result = expectOutcome(
        this.#d.run(() => actor.send({ type: "INTERRUPT" })),
        "interrupt",
      );
      if (!("via" in result)) throw refusal(result);
      return { runId: p.runId, via: result.via };
    });
  }

  async respond(input: RespondInput): Promise<RespondReceipt> {
    const p = parseInput(RespondInputSchema, input);
    return this.#command(p.commandId, "respond", () => {
      const actor = this.#d.actors.requests.get(p.requestId);
      const view = this.#d.views.requests.get(p.requestId);
      if (!view) throw new NotFoundError("request", p.requestId);
      if (!actor) {
        if (view.status === "expired")
          throw new NotResumableError(`request ${p.requestId} expired (${view.closedReason})`, {
            requestId: p.requestId,
          });
        throw new ConflictError(`request ${p.requestId} is already ${view.status}`, {
          requestId: p.requestId,
          status: view.status,
        });
      }
      const result = expectOutcome(
        this.#d.run(() =>
          actor.send({ type: "RESPOND", response: p.response, hostGeneration: this.#d.generationOf(view) }),
        ),
        "respond",
      );
      if (!("accepted" in result)) throw refusal(result);
      return { requestId: p.requestId, status: "accepted" as const };
    });
  }

  /** Invariant 9: the fork's lineage is recorded now; native vs portable is decided at its first run. */
  async forkThread(input: ForkThreadInput): Promise<ForkReceipt> {
    const p = parseInput(ForkThreadInputSchema, input);
    return this.#command(p.commandId, "forkThread", () => {
      const parent = this.#thread(p.threadId);
      // By default the fork starts after the last run that still counts (rolled-back runs do not).
      const from = p.afterRunId
        ? parent.runs.find((r) => r.runId === p.afterRunId)
        : parent.runs.filter((r) => r.status !== "rolled_back").at(-1);
      if (p.afterRunId && !from) throw new NotFoundError("run", p.afterRunId);
      if (from && (!isTerminalRunStatus(from.status) || from.status === "rolled_back")) {
        throw new ConflictError(`run ${from.runId} is ${from.status}; forks start only from a finished run`, {
          runId: from.runId,
        });
      }
      const providerTarget = p.providerTarget ?? from?.providerTarget ?? parent.providerTarget;
      this.#target(providerTarget, "providerTarget");
      const threadId = this.ids.next("thr");
      const transferId = this.ids.next("xfr");
      const forkedFromRunId = from?.runId ?? null;
      this.#d.run(() => {
        this.#d.commit({
          type: "thread.created",
          threadId,
          title: p.title ?? `Fork of ${parent.title}`,
          cwd: parent.cwd,
          providerTarget,
          model: parent.model,
          lineage: { parentThreadId: parent.threadId, relation: "fork", forkedFromRunId },
        });
        this.#d.commit({
          type: "fork.recorded",
          threadId,
          parentThreadId: parent.threadId,
          forkedFromRunId,
          transferId,
        });
      });
      this.#d.spawnThread(threadId, 1, []);
      return { threadId, parentThreadId: parent.threadId, transferId };
    });
  }

  /**
   * Roll the thread back to the end of run `toRunId`: the provider's conversation first where
   * it can, then the run's filesystem checkpoint; later runs become `rolled_back`. Without
   * provider rollback the provider thread is marked divergent and rebuilt on the next run.
   */
  async rollback(input: RollbackInput): Promise<RollbackReceipt & { commandId: string }> {
    const p = parseInput(RollbackInputSchema, input);
    return this.#command(p.commandId, "rollback", async () => {
      this.#thread(p.threadId);
      // A run's final checkpoint is written just after its terminal: a rollback to it waits for it.
      await this.#d.checkpoints.settled();
      const busy = sharedDirectoryBusy(this.#d, p.threadId);
      if (busy)
        throw new ConflictError(
          `thread ${busy} is working in the same directory; restoring files now would rewrite its work`,
          { threadId: busy },
        );
      const request = rollbackRequest(this.#d, planRollback(this.#d, p.threadId, p.toRunId));
      const threadActor = this.#d.actors.threads.get(p.threadId)!;
      const result = expectOutcome(
        this.#d.run(() => threadActor.send({ type: "ROLLBACK", ...request })),
        "rollback",
      );
      if (!("via" in result)) throw refusal(result);
      return this.#d.rollbacks.get(p.threadId)!;
    });
  }

  /** What a client may offer for this thread now (fork, interrupt, rollback, approvals, panels), and why not. */
  affordances(threadId: string): Affordances {
    this.#assertOpen();
    this.#thread(parseInput(ThreadIdSchema, threadId));
    return affordancesOf(this.#d, threadId, this.#allowSessionStop);
  }

  /** A consistent read model of one thread at `seq`, returned once `seq` is durable. */
  async readThread(threadId: string): Promise<ThreadSnapshot> {
    this.#assertOpen();
    const snapshot = threadSnapshot(this.#d, this.#thread(parseInput(ThreadIdSchema, threadId)));
    await this.log.whenDurable(snapshot.seq);
    return snapshot;
  }

  listThreads(): Array<{ threadId: string; title: string; providerTarget: string; runs: number }> {
    this.#assertOpen();
    return [...this.#d.views.threads.values()].map((t) => ({
      threadId: t.threadId,
      title: t.title,
      providerTarget: t.providerTarget,
      runs: t.runs.length,
    }));
  }

  /** The capability record in force for a target (the live session's, else the adapter's declared one). */
  capabilities(providerTarget: string): ProviderCapabilities {
    this.#assertOpen();
    return structuredClone(this.#target(providerTarget, "providerTarget").capabilities());
  }

  /**
   * The selected part of the UI read models, once and then on each change (never on a text
   * delta), as frozen copies once durable. See TillerRuntime.select.
   */
  select<T>(selector: ReadModelSelector<T>, listener: (value: T) => void, equal?: (a: T, b: T) => boolean): () => void {
    this.#assertOpen();
    if (typeof selector !== "function") throw new InvalidInputError("selector", "expected a function");
    if (typeof listener !== "function") throw new InvalidInputError("listener", "expected a function");
    if (equal !== undefined && typeof equal !== "function") throw new InvalidInputError("equal", "expected a function");
    return this.#readModels.select(selector, listener, equal);
  }

  /** Durable events after `afterSeq` (all threads, or one), then live ones, in order, once each. */
  subscribe(input: SubscribeInput, listener: Subscriber): () => void {
    this.#assertOpen();
    const p = parseInput(SubscribeInputSchema, input);
    if (p.threadId) this.#thread(p.threadId);
    if (p.afterSeq > this.log.head) throw new InvalidInputError("afterSeq", `is beyond the log head ${this.log.head}`);
    const filter = p.threadId ? (r: LogRecord<DomainEvent>) => threadOf(r.event) === p.threadId : undefined;
    return this.log.subscribe(p.afterSeq, listener, filter);
  }

  /**
   * Resolves with the run once it is terminal and durable. `timeoutMs` rejects with `timeout`
   * and `signal` with its reason (the run itself goes on); a failed store rejects at once.
   */
  async waitForRun(runId: string, options: WaitForRunOptions = {}): Promise<RunView> {
    this.#assertOpen();
    const run = this.#d.views.runs.get(parseInput(RunIdSchema, runId));
    if (!run) throw new NotFoundError("run", runId);
    const { timeoutMs, signal } = parseInput(WaitForRunOptionsSchema, options);
    if (!isTerminalRunStatus(run.status)) {
      const stop = new AbortController();
      const onAbort = () => stop.abort(signal!.reason);
      signal?.addEventListener("abort", onAbort, { once: true });
      if (signal?.aborted) onAbort();
      const timer =
        timeoutMs === undefined
          ? undefined
          : setTimeout(
              () =>
                stop.abort(new TimeoutError(`run ${runId} did not end within ${timeoutMs} ms`, { runId, timeoutMs })),
              timeoutMs,
            );
      try {
        await this.#d.runEnded(runId, stop.signal);
      } finally {
        clearTimeout(timer);
        signal?.removeEventListener("abort", onAbort);
      }
    }
    this.#assertNotFailed();
    await this.#d.checkpoints.settled(runId);
    await this.log.whenDurable();
    return structuredClone(this.#d.views.runs.get(runId)!);
  }

  /** Stops providers, cancels what is still running (nothing is left "running"), flushes, unlocks. */
  /** A second call (while the first still closes, or after) resolves when the directory is given back. */
  close(): Promise<void> {
    this.#closing ??= this.#close();
    return this.#closing;
  }

  async #close(): Promise<void> {
    // Queued runs first, so cancelling an active run does not start the next one.
    const byQueued = [...this.#d.actors.runs.values()].sort(
      (a, b) => Number(b.getSnapshot().matches("queued")) - Number(a.getSnapshot().matches("queued")),
    );
    this.#d.run(() => {
      for (const actor of byQueued) actor.send({ type: "CANCEL", reason: "runtime_closed" });
    });
    this.#d.close();
    for (const target of this.#d.targets.values()) target.stopSessions();
    // A failed store already told its failure (onFailure); closing still gives everything back.
    const failed = () => this.#d.fault !== undefined;
    try {
      // An adapter whose host hangs cannot hold the directory: its close gets the same grace.
      const closes = await withGrace(
        Promise.allSettled([...this.#d.targets.values()].map(async (t) => t.adapter.close())),
        () => [...this.#d.targets.values()].map(() => ({ status: "rejected" as const, reason: "timeout" })),
      );
      // Provider calls still in flight get a grace period; a call that never settles cannot hold the directory.
      await withGrace(this.#d.effects.settle(), () => undefined);
      // An adapter that failed to close may never end its event stream: do not wait for it.
      await Promise.allSettled(this.#pumps.filter((_, i) => closes[i]?.status === "fulfilled"));
      await this.#d.checkpoints.close().finally(() => this.hosts.close());
      await this.log.close().catch((error: unknown) => {
        if (!failed()) throw error;
      });
      if (!failed()) await this.meta.update((d) => void (d.closedCleanly = true));
    } finally {
      await this.#inspector?.close();
      await this.lock.release().catch((error: unknown) => {
        if (!failed()) throw error;
      });
    }
  }

  // ---- helpers -------------------------------------------------------------------------

  /**
   * Every command gets an id and a durable receipt: repeating the id returns the receipt and
   * nothing runs twice. A command still in flight is known by its id too: a second caller with
   * the same id (even inside one `Promise.all`) awaits the first one's receipt or error.
   */
  async #command<R extends object>(
    commandId: string | undefined,
    command: string,
    fn: () => R | Promise<R>,
  ): Promise<R & { commandId: string }> {
    this.#assertOpen();
    if (commandId) {
      const running = this.#inflight.get(commandId) ?? this.#d.views.receipts.get(commandId);
      if (running) {
        if (running.command !== command)
          throw new ConflictError(`command id ${commandId} was used for ${running.command}`, { commandId });
        const receipt = "done" in running ? await running.done : running.receipt;
        await this.log.whenDurable();
        return structuredClone(receipt) as R & { commandId: string };
      }
    }
    const id = commandId ?? this.ids.next("cmd");
    const done = (async () => {
      const receipt = { commandId: id, ...(await fn()) };
      this.#assertOpen();
      this.#d.run(() => this.#d.commit({ type: "command.receipt", commandId: id, command, receipt }));
      await this.log.whenDurable();
      return receipt;
    })();
    // Registered before the first await of `fn`, so a concurrent caller always finds it.
    this.#inflight.set(id, { command, done });
    try {
      return await done;
    } finally {
      this.#inflight.delete(id);
    }
  }

  #thread(threadId: string): ThreadView {
    const thread = this.#d.views.threads.get(threadId);
    if (!thread) throw new NotFoundError("thread", threadId);
    return thread;
  }

  #target(id: string, field?: string): Target {
    const target = this.#d.targets.get(id);
    if (target) return target;
    if (field)
      throw new InvalidInputError(
        field,
        `unknown provider target "${id}" (configured: ${[...this.#d.targets.keys()].join(", ")})`,
      );
    throw new NotFoundError("provider target", id);
  }

  #runGone(runId: string): TillerError {
    const run = this.#d.views.runs.get(runId);
    return run
      ? new ConflictError(`run ${runId} is already ${run.status}`, { runId, status: run.status })
      : new NotFoundError("run", runId);
  }

  #assertOpen(): void {
    this.#assertNotFailed();
    if (this.#d.closed) throw new ClosedError();
  }

  #assertNotFailed(): void {
    if (this.#d.fault !== undefined) throw StoreFailedError.from(this.#d.fault, "writing the event log");
  }
}
