import { resolve } from "node:path";
import { join } from "node:path";
import { createActor, type Actor, type InspectionEvent } from "xstate";
import { ProviderEventSchema, type ProviderAdapter } from "../adapters/contract.js";
import type { ProviderCapabilities } from "../capabilities/schema.js";
import {
  CreateThreadInputSchema,
  ForkThreadInputSchema,
  InterruptInputSchema,
  RespondInputSchema,
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
  type SendMessageInput,
  type SendMessageReceipt,
  type SubscribeInput,
} from "../domain/commands.js";
import {
  CapabilityUnsupportedError,
  ClosedError,
  ConflictError,
  InvalidInputError,
  NotFoundError,
  NotResumableError,
  StoreCorruptError,
  TillerError,
} from "../domain/errors.js";
import { DomainEventSchema, isUrgentEvent, threadOf, type DomainEvent } from "../domain/events.js";
import { randomIds, type IdSource } from "../domain/ids.js";
import type { MachineEmitted, Outcome } from "../machines/emitted.js";
import { requestMachine } from "../machines/request.js";
import { runMachine } from "../machines/run.js";
import { sessionMachine } from "../machines/session.js";
import { providerThreadMachine } from "../machines/providerThread.js";
import { threadMachine } from "../machines/thread.js";
import { Effects } from "./effects.js";
import { Projections, isTerminalRunStatus, type RequestView, type RunView, type ThreadView } from "./projections.js";
import { planRecovery } from "./recovery.js";
import { EventLog, type LogRecord } from "./store/eventLog.js";
import { acquireDataDirLock, type DataDirLock } from "./store/lock.js";
import { openRuntimeMeta } from "./store/meta.js";
import type { StateDocument } from "./store/documents.js";
import type { RuntimeMeta } from "./store/meta.js";
import { Target, type LiveSession } from "./targets.js";

export interface RuntimeOptions {
  /** Where the runtime keeps its log and state. Default: `.tiller` in the working directory. */
  dataDir?: string;
  /** Provider targets by id. */
  providers: Record<string, ProviderAdapter>;
  /** Id source (a boundary: inject a deterministic one in tests). */
  ids?: IdSource;
  /** Clock (a boundary). */
  now?: () => Date;
  /** Allow an interrupt to stop a provider session when the provider cannot interrupt (destructive). */
  allowSessionStopInterrupt?: boolean;
  /** Group-commit window of the event log, in ms. */
  groupCommitMs?: number;
  /** Receives XState inspection events of every actor (for the inspector). */
  inspect?: (event: InspectionEvent) => void;
}

export interface ThreadSnapshot {
  /** Log sequence the snapshot reflects; subscribe after it for what follows. */
  seq: number;
  thread: Omit<ThreadView, "runs" | "lastSeq"> & { status: "idle" | "active" };
  runs: RunView[];
  pendingRequests: Array<RequestView & { respondable: boolean }>;
}

export type Subscriber = (record: LogRecord<DomainEvent>) => void;

type RunActor = Actor<typeof runMachine>;
type ThreadActor = Actor<typeof threadMachine>;
type RequestActor = Actor<typeof requestMachine>;
type SessionActor = Actor<typeof sessionMachine>;
type ProviderThreadActor = Actor<typeof providerThreadMachine>;

/**
 * The runtime: one writer of one data directory. Commands go API -> thread/run/request
 * actors -> effects -> adapters; provider events come back adapter -> normalizer -> actors;
 * every decision an actor makes is committed to the log and folded into the projections.
 */
export class Runtime {
  readonly dataDir: string;
  readonly views = new Projections();
  readonly ids: IdSource;
  readonly targets = new Map<string, Target>();
  readonly runActors = new Map<string, RunActor>();
  readonly requestActors = new Map<string, RequestActor>();
  #threadActors = new Map<string, ThreadActor>();
  #sessionActors = new Map<string, SessionActor>();
  readonly providerThreadActors = new Map<string, ProviderThreadActor>();
  #effects: Effects;
  #outcomes: Outcome[] = [];
  #runWaiters = new Map<string, Array<() => void>>();
  #pumps: Promise<void>[] = [];
  #closed = false;

  private constructor(
    private readonly options: RuntimeOptions,
    dataDir: string,
    private readonly log: EventLog<DomainEvent>,
    private readonly lock: DataDirLock,
    private readonly meta: StateDocument<RuntimeMeta>,
  ) {
    this.dataDir = dataDir;
    this.ids = options.ids ?? randomIds();
    this.#effects = new Effects(this);
    for (const [id, adapter] of Object.entries(options.providers)) this.targets.set(id, new Target(id, adapter, this));
  }

  static async open(options: RuntimeOptions): Promise<Runtime> {
    validateOptions(options);
    const dataDir = resolve(options.dataDir ?? ".tiller");
    const now = options.now ?? (() => new Date());
    const lock = await acquireDataDirLock(dataDir);
    try {
      const { doc } = await openRuntimeMeta(dataDir, now());
      const log = await EventLog.open<DomainEvent>(join(dataDir, "events.jsonl"), {
        isUrgent: isUrgentEvent,
        groupWindowMs: options.groupCommitMs ?? 2,
        now,
      });
      const runtime = new Runtime(options, dataDir, log, lock, doc);
      await runtime.#restore();
      return runtime;
    } catch (error) {
      await lock.release();
      throw error;
    }
  }

  /** Fold the log, settle what the previous life left open, rebuild actors, then accept work. */
  async #restore(): Promise<void> {
    for await (const record of this.log.readAll()) {
      const parsed = DomainEventSchema.safeParse(record.event);
      if (!parsed.success) throw new StoreCorruptError(`event ${record.seq} does not match the schema`, { seq: record.seq });
      this.views.apply({ ...record, event: parsed.data });
    }
    const plan = planRecovery(this.views);
    this.#act(() => plan.events.forEach((e) => this.commit(e)));
    for (const thread of this.views.threads.values()) {
      const queue = thread.runs
        .filter((r) => r.status === "queued")
        .map((r) => ({ runId: r.runId, capabilities: this.#target(r.providerTarget).capabilities() }));
      this.#spawnThread(thread.threadId, thread.runs.length + 1, queue);
      for (const run of thread.runs.filter((r) => r.status === "queued")) this.#spawnRun(run.runId);
    }
    for (const target of this.targets.values()) this.#pumps.push(this.#pump(target));
    this.#act(() => {
      for (const actor of this.#threadActors.values()) actor.send({ type: "RESUME" });
    });
    await this.log.whenDurable();
  }

  // ---- public API --------------------------------------------------------------------

  async createThread(input: CreateThreadInput): Promise<CreateThreadReceipt> {
    const p = parseInput(CreateThreadInputSchema, input);
    return this.#command(p.commandId, "createThread", () => {
      this.#target(p.providerTarget, "providerTarget");
      const threadId = this.ids.next("thr");
      this.#act(() =>
        this.commit({
          type: "thread.created",
          threadId,
          title: p.title ?? "Untitled thread",
          cwd: resolve(p.cwd ?? process.cwd()),
          providerTarget: p.providerTarget,
          model: p.model ?? null,
          lineage: null,
        }),
      );
      this.#spawnThread(threadId, 1, []);
      return { threadId };
    });
  }

  async sendMessage(input: SendMessageInput): Promise<SendMessageReceipt> {
    const p = parseInput(SendMessageInputSchema, input);
    return this.#command(p.commandId, "sendMessage", () => {
      const thread = this.#thread(p.threadId);
      const providerTarget = p.providerTarget ?? thread.runs.at(-1)?.providerTarget ?? thread.providerTarget;
      const target = this.#target(providerTarget, "providerTarget");
      const runId = this.ids.next("run");
      const outcomes = this.#act(() =>
        this.#threadActors.get(thread.threadId)!.send({
          type: "SUBMIT",
          runId,
          messageId: this.ids.next("msg"),
          text: p.text,
          mode: p.mode,
          providerTarget,
          capabilities: target.capabilities(),
        }),
      );
      const submit = expectOutcome(outcomes, "submit");
      const base = { threadId: thread.threadId, via: null, queuePosition: 0 };
      if ("disposition" in submit) {
        if (submit.disposition === "started" || submit.disposition === "queued") {
          return { ...base, runId: submit.runId, disposition: submit.disposition, queuePosition: submit.queuePosition };
        }
        if (submit.disposition === "restart") return { ...base, runId: submit.runId, disposition: "restarting" as const };
      }
      const steer = expectOutcome(outcomes, "steer");
      if (!("via" in steer)) throw refusal(steer);
      return { ...base, runId: steer.runId, disposition: "steered" as const, via: steer.via };
    });
  }

  async interrupt(input: InterruptInput): Promise<InterruptReceipt> {
    const p = parseInput(InterruptInputSchema, input);
    return this.#command(p.commandId, "interrupt", () => {
      const actor = this.runActors.get(p.runId);
      if (!actor) throw this.#runGone(p.runId);
      const result = expectOutcome(this.#act(() => actor.send({ type: "INTERRUPT" })), "interrupt");
      if (!("via" in result)) throw refusal(result);
      return { runId: p.runId, via: result.via };
    });
  }

  async respond(input: RespondInput): Promise<RespondReceipt> {
    const p = parseInput(RespondInputSchema, input);
    return this.#command(p.commandId, "respond", () => {
      const actor = this.requestActors.get(p.requestId);
      const view = this.views.requests.get(p.requestId);
      if (!view) throw new NotFoundError("request", p.requestId);
      if (!actor) {
        if (view.status === "expired") throw new NotResumableError(`request ${p.requestId} expired (${view.closedReason})`, { requestId: p.requestId });
        throw new ConflictError(`request ${p.requestId} is already ${view.status}`, { requestId: p.requestId, status: view.status });
      }
      const result = expectOutcome(this.#act(() => actor.send({ type: "RESPOND", response: p.response, hostGeneration: this.#generationOf(view) })), "respond");
      if (!("accepted" in result)) throw refusal(result);
      return { requestId: p.requestId, status: "accepted" as const };
    });
  }

  /** Invariant 9: the fork's lineage is recorded now; native vs portable is decided at its first run. */
  async forkThread(input: ForkThreadInput): Promise<ForkReceipt> {
    const p = parseInput(ForkThreadInputSchema, input);
    return this.#command(p.commandId, "forkThread", () => {
      const parent = this.#thread(p.threadId);
      const from = p.afterRunId ? parent.runs.find((r) => r.runId === p.afterRunId) : parent.runs.at(-1);
      if (p.afterRunId && !from) throw new NotFoundError("run", p.afterRunId);
      if (from && !isTerminalRunStatus(from.status)) {
        throw new ConflictError(`run ${from.runId} is ${from.status}; forks start only from a finished run`, { runId: from.runId });
      }
      const providerTarget = p.providerTarget ?? from?.providerTarget ?? parent.providerTarget;
      this.#target(providerTarget, "providerTarget");
      const threadId = this.ids.next("thr");
      const transferId = this.ids.next("xfr");
      const forkedFromRunId = from?.runId ?? null;
      this.#act(() => {
        this.commit({
          type: "thread.created",
          threadId,
          title: p.title ?? `Fork of ${parent.title}`,
          cwd: parent.cwd,
          providerTarget,
          model: parent.model,
          lineage: { parentThreadId: parent.threadId, relation: "fork", forkedFromRunId },
        });
        this.commit({ type: "fork.recorded", threadId, parentThreadId: parent.threadId, forkedFromRunId, transferId });
      });
      this.#spawnThread(threadId, 1, []);
      return { threadId, parentThreadId: parent.threadId, transferId };
    });
  }

  /** A consistent read model of one thread at `seq`, returned once `seq` is durable. */
  async readThread(threadId: string): Promise<ThreadSnapshot> {
    this.#assertOpen();
    const thread = this.#thread(parseInput(ThreadIdSchema, threadId));
    const seq = this.views.head;
    const { runs, lastSeq: _l, ...fields } = thread;
    const pending = this.views.pendingRequests(thread.threadId).map((r) => ({ ...r, respondable: this.#generationOf(r) !== null }));
    const snapshot: ThreadSnapshot = structuredClone({
      seq,
      thread: { ...fields, status: runs.some((r) => !isTerminalRunStatus(r.status)) ? ("active" as const) : ("idle" as const) },
      runs,
      pendingRequests: pending,
    });
    await this.log.whenDurable(seq);
    return snapshot;
  }

  listThreads(): Array<{ threadId: string; title: string; providerTarget: string; runs: number }> {
    this.#assertOpen();
    return [...this.views.threads.values()].map((t) => ({ threadId: t.threadId, title: t.title, providerTarget: t.providerTarget, runs: t.runs.length }));
  }

  /** The capability record in force for a target (the live session's, else the adapter's declared one). */
  capabilities(providerTarget: string): ProviderCapabilities {
    this.#assertOpen();
    return structuredClone(this.#target(providerTarget, "providerTarget").capabilities());
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

  /** Resolves with the run once it is terminal and durable. */
  async waitForRun(runId: string): Promise<RunView> {
    this.#assertOpen();
    const run = this.views.runs.get(parseInput(RunIdSchema, runId));
    if (!run) throw new NotFoundError("run", runId);
    if (!isTerminalRunStatus(run.status)) {
      await new Promise<void>((done) => this.#runWaiters.set(runId, [...(this.#runWaiters.get(runId) ?? []), done]));
    }
    await this.log.whenDurable();
    return structuredClone(this.views.runs.get(runId)!);
  }

  /** Stops providers, cancels what is still running (nothing is left "running"), flushes, unlocks. */
  async close(): Promise<void> {
    if (this.#closed) return;
    // Queued runs first, so cancelling an active run does not start the next one.
    const byQueued = [...this.runActors.values()].sort((a, b) => Number(b.getSnapshot().matches("queued")) - Number(a.getSnapshot().matches("queued")));
    this.#act(() => {
      for (const actor of byQueued) actor.send({ type: "CANCEL", reason: "runtime_closed" });
    });
    this.#closed = true;
    await Promise.allSettled([...this.targets.values()].map((t) => t.adapter.close()));
    await this.#effects.settle();
    await Promise.allSettled(this.#pumps);
    await this.log.close();
    await this.meta.update((d) => void (d.closedCleanly = true));
    await this.lock.release();
    for (const waiters of this.#runWaiters.values()) waiters.forEach((w) => w());
  }

  // ---- dispatch ------------------------------------------------------------------------

  /** Append an event, fold it, and react to it (create request actors, wake waiters). */
  commit(event: DomainEvent): void {
    const record = this.log.append(event);
    this.views.apply(record);
    switch (event.type) {
      case "run.created":
        this.#spawnRun(event.runId);
        return;
      case "request.opened":
        this.#spawnRequest(event.requestId);
        return;
      case "provider_thread.bound":
        this.#bindProviderThread(event);
        return;
      case "run.terminal":
        this.#runEnded(event.runId);
        return;
      case "request.resolved":
      case "request.closed":
        this.requestActors.delete(event.requestId);
        return;
      default:
        return;
    }
  }

  /** Runs `fn` (which sends to actors), then performs the effects they asked for; returns their outcomes. */
  #act(fn: () => void): Outcome[] {
    const outer = this.#outcomes;
    const mine: Outcome[] = [];
    this.#outcomes = mine;
    try {
      fn();
      this.#effects.drain();
      return mine;
    } finally {
      this.#outcomes = outer;
    }
  }

  /** Entry point for asynchronous completions (provider replies, effect results). */
  act(fn: () => void): void {
    if (!this.#closed) this.#act(fn);
  }

  #onEmitted(emitted: MachineEmitted): void {
    switch (emitted.type) {
      case "record":
        return this.commit(emitted.event);
      case "settle":
        return this.#effects.settleAttempt(emitted);
      case "effect":
        return this.#effects.enqueue(emitted.effect);
      case "outcome":
        this.#outcomes.push(emitted.outcome);
        return;
    }
  }

  #wire<T extends Actor<any>>(actor: T): T {
    actor.on("*", (emitted: unknown) => this.#onEmitted(emitted as MachineEmitted));
    actor.start();
    return actor;
  }

  #inspect() {
    return this.options.inspect ? { inspect: this.options.inspect } : {};
  }

  #spawnThread(threadId: string, nextOrdinal: number, queue: Array<{ runId: string; capabilities: ProviderCapabilities }>): void {
    const input = { threadId, nextOrdinal, queue, allowSessionStopInterrupt: this.options.allowSessionStopInterrupt ?? false };
    this.#threadActors.set(threadId, this.#wire(createActor(threadMachine, { input, id: threadId, ...this.#inspect() })));
  }

  #spawnRun(runId: string): void {
    const run = this.views.runs.get(runId)!;
    const input = {
      threadId: run.threadId,
      runId,
      text: run.text,
      capabilities: this.#target(run.providerTarget).capabilities(),
      allowSessionStopInterrupt: this.options.allowSessionStopInterrupt ?? false,
    };
    this.runActors.set(runId, this.#wire(createActor(runMachine, { input, id: runId, ...this.#inspect() })));
  }

  #spawnRequest(requestId: string): void {
    const view = this.views.requests.get(requestId)!;
    const input = { threadId: view.threadId, runId: view.runId, requestId, kind: view.kind, responseCapability: view.responseCapability };
    this.requestActors.set(requestId, this.#wire(createActor(requestMachine, { input, id: requestId, ...this.#inspect() })));
  }

  /** A target's session announced its capability record: give it a session actor. */
  sessionStarted(target: string, session: LiveSession): void {
    const input = { sessionId: session.sessionId, providerTarget: target, provider: this.#target(target).adapter.provider };
    const actor = this.#wire(createActor(sessionMachine, { input, id: session.sessionId, ...this.#inspect() }));
    this.#sessionActors.set(session.sessionId, actor);
    this.act(() => actor.send({ type: "STARTED", capabilities: session.capabilities, hostGeneration: session.hostGeneration }));
  }

  /** A provider thread was created, resumed or forked into a session: its actor loads it. */
  #bindProviderThread(event: Extract<DomainEvent, { type: "provider_thread.bound" }>): void {
    let actor = this.providerThreadActors.get(event.providerThreadId);
    if (!actor || actor.getSnapshot().status !== "active") {
      const input = { providerThreadId: event.providerThreadId, appThreadId: event.threadId, providerTarget: event.providerTarget };
      actor = this.#wire(createActor(providerThreadMachine, { input, id: event.providerThreadId, ...this.#inspect() }));
      this.providerThreadActors.set(event.providerThreadId, actor);
    }
    const handle = { threadRef: event.nativeThreadRef, resumeCursor: event.resumeCursor };
    actor.send({ type: "LOAD" });
    actor.send({ type: "LOADED", sessionId: event.sessionId, handle });
  }

  sessionActor(sessionId: string): SessionActor | undefined {
    return this.#sessionActors.get(sessionId);
  }

  threadActor(threadId: string): ThreadActor | undefined {
    return this.#threadActors.get(threadId);
  }

  #runEnded(runId: string): void {
    const actor = this.runActors.get(runId);
    this.runActors.delete(runId);
    if (actor) this.#effects.releaseRun(actor.getSnapshot().context);
    const waiters = this.#runWaiters.get(runId);
    this.#runWaiters.delete(runId);
    waiters?.forEach((w) => w());
  }

  async #pump(target: Target): Promise<void> {
    try {
      for await (const { sessionId, event } of target.adapter.streamEvents()) {
        if (this.#closed) break;
        const parsed = ProviderEventSchema.safeParse(event);
        if (!parsed.success) {
          const message = `protocol_error: ${target.id} sent an invalid ${String((event as { type?: unknown }).type)} event: ${parsed.error.issues[0]?.message}`;
          this.act(() => this.commit({ type: "warning", threadId: null, runId: null, message }));
          continue;
        }
        this.act(() => this.#effects.route(target, sessionId, target.normalizer.ingest(sessionId, parsed.data)));
      }
    } catch (error) {
      this.act(() => this.commit({ type: "warning", threadId: null, runId: null, message: `${target.id} event stream failed: ${String(error)}` }));
    }
  }

  // ---- helpers -------------------------------------------------------------------------

  async #command<R extends object>(commandId: string | undefined, command: string, fn: () => R): Promise<R & { commandId: string }> {
    this.#assertOpen();
    if (commandId) {
      const prior = this.views.receipts.get(commandId);
      if (prior) {
        if (prior.command !== command) throw new ConflictError(`command id ${commandId} was used for ${prior.command}`, { commandId });
        return structuredClone(prior.receipt) as R & { commandId: string };
      }
    }
    const receipt = { commandId: commandId ?? this.ids.next("cmd"), ...fn() };
    if (commandId) this.#act(() => this.commit({ type: "command.receipt", commandId, command, receipt }));
    await this.log.whenDurable();
    return receipt;
  }

  #thread(threadId: string): ThreadView {
    const thread = this.views.threads.get(threadId);
    if (!thread) throw new NotFoundError("thread", threadId);
    return thread;
  }

  #target(id: string, field?: string): Target {
    const target = this.targets.get(id);
    if (target) return target;
    if (field) throw new InvalidInputError(field, `unknown provider target "${id}" (configured: ${[...this.targets.keys()].join(", ")})`);
    throw new NotFoundError("provider target", id);
  }

  #runGone(runId: string): TillerError {
    const run = this.views.runs.get(runId);
    return run ? new ConflictError(`run ${runId} is already ${run.status}`, { runId, status: run.status }) : new NotFoundError("run", runId);
  }

  /** The current host generation of the session a request was asked through; null if that session is gone. */
  #generationOf(view: RequestView): number | null {
    const cap = view.responseCapability;
    if (cap.kind !== "live" || view.status !== "pending") return null;
    for (const target of this.targets.values()) {
      const session = target.session(cap.sessionId);
      if (session) return session.hostGeneration;
    }
    return null;
  }

  #assertOpen(): void {
    if (this.#closed) throw new ClosedError();
  }

  get closed(): boolean {
    return this.#closed;
  }
}

function validateOptions(options: RuntimeOptions): void {
  if (typeof options !== "object" || options === null) throw new InvalidInputError("options", "expected an object");
  if (typeof options.providers !== "object" || options.providers === null || Object.keys(options.providers).length === 0) {
    throw new InvalidInputError("providers", "configure at least one provider target");
  }
  for (const [id, adapter] of Object.entries(options.providers)) {
    if (!/^[A-Za-z0-9][A-Za-z0-9._-]*$/.test(id)) throw new InvalidInputError(`providers.${id}`, "target ids are letters, digits, . _ -");
    for (const method of ["getCapabilities", "startSession", "ensureProviderThread", "sendRun", "interrupt", "respondToRequest", "streamEvents"] as const) {
      if (typeof adapter?.[method] !== "function") throw new InvalidInputError(`providers.${id}.${method}`, "adapter method missing");
    }
  }
  if (options.dataDir !== undefined && (typeof options.dataDir !== "string" || options.dataDir.length === 0)) {
    throw new InvalidInputError("dataDir", "expected a non-empty path");
  }
}

type Refusal = Extract<Outcome, { refused: string }>;

function expectOutcome<C extends Outcome["command"]>(outcomes: Outcome[], command: C): Extract<Outcome, { command: C }> | Refusal {
  const found = outcomes.find((o) => o.command === command);
  if (!found) throw new ConflictError(`${command} was not accepted in the current state`);
  return found as Extract<Outcome, { command: C }> | Refusal;
}

function refusal(outcome: Outcome): TillerError {
  if ("refused" in outcome) {
    if (outcome.refused === "capability_unsupported") {
      return new CapabilityUnsupportedError(outcome.capability, outcome.detail, { fallback: "refused" });
    }
    if (outcome.refused === "not_resumable") return new NotResumableError(outcome.detail);
    return new ConflictError(outcome.detail);
  }
  return new ConflictError(`unexpected outcome for ${outcome.command}`);
}
