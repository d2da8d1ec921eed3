import type { InspectionEvent } from "xstate";
import type { DynamicToolDefinition, ProviderAdapter, SandboxPolicy } from "../adapters/contract.js";
import type { ProviderCapabilities } from "../capabilities/schema.js";
import type { QueuedRun } from "../machines/thread.js";
import { isTillerError } from "../domain/errors.js";
import type { DomainEvent } from "../domain/events.js";
import type { IdSource } from "../domain/ids.js";
import { isAnsweredByRuntime } from "../domain/items.js";
import { ProviderTextMasking } from "../domain/providerText.js";
import type { MachineEmitted, Outcome } from "../machines/emitted.js";
import { Actors } from "./actors.js";
import { Checkpoints } from "./checkpoints/checkpoints.js";
import { answerToolCall } from "./commands/respond.js";
import { Effects } from "./effects.js";
import { Inbound } from "./ingest/inbound.js";
import type { DynamicTool } from "./options.js";
import type { RollbackReceipt } from "./rollback.js";
import { Projections, type RequestView } from "./projections.js";
import type { EventLog, LogRecord } from "./store/eventLog.js";
import type { TargetHost } from "./targetTypes.js";
import { Target } from "./targets.js";

export interface DispatchOptions {
  dataDir: string;
  /** Capture filesystem checkpoints of each thread's working directory. */
  checkpoints: boolean;
  sandbox: SandboxPolicy;
  /** Stop a provider session after this long without a turn (null: never). */
  sessionIdleMs: number | null;
  /** Check a turn silent for this long (null: never). */
  turnSilenceMs: number | null;
  providers: Record<string, ProviderAdapter>;
  ids: IdSource;
  allowSessionStopInterrupt: boolean;
  /** The embedder's tools: offered to sessions that call tools back, run when one does. */
  tools: readonly DynamicTool[];
  inspect: ((event: InspectionEvent) => void) | undefined;
  /** Where an error goes that no caller's promise can carry (a bug, or a failure inside an asynchronous completion). */
  onEscaped?: (error: unknown) => void;
  /** Told each record right after the projections folded it (the runtime's `select` read models follow them). */
  onFolded?: (record: LogRecord<DomainEvent>) => void;
}

/**
 * The engine under the API: actors decide, this commits what they decided (append, fold,
 * react), performs the effects they asked for, and hands their outcomes back to the caller.
 * Everything here is synchronous except the provider calls Effects makes.
 */
export class Dispatcher implements TargetHost {
  readonly views = new Projections();
  readonly targets = new Map<string, Target>();
  readonly actors: Actors;
  readonly effects: Effects;
  readonly inbound: Inbound;
  readonly checkpoints: Checkpoints;
  /** The latest rollback started per thread (the API awaits its receipt). */
  readonly rollbacks = new Map<string, Promise<RollbackReceipt>>();
  #outcomes: Outcome[] = [];
  /** How deep inside `run` the dispatcher is (0: outside, where no fact may be committed). */
  #depth = 0;
  #runWaiters = new Map<string, Array<{ resolve: () => void; reject: (error: unknown) => void }>>();
  #closed = false;
  /** Set when a commit failed (the log broke): nothing can be recorded safely any more. */
  fault: unknown = undefined;
  /** Every event is stored through it: what a provider or a script said is masked before the log keeps it. */
  #masking = new ProviderTextMasking();
  /** A dynamic tool call's input as the provider sent it, until its handler is called. */
  #toolInputs = new Map<string, unknown>();

  constructor(
    private readonly log: EventLog<DomainEvent>,
    private readonly options: DispatchOptions,
  ) {
    this.actors = new Actors((emitted) => this.#onEmitted(emitted), options.inspect);
    this.effects = new Effects(this);
    this.inbound = new Inbound(this, this.effects);
    this.checkpoints = new Checkpoints(options.dataDir, options.checkpoints, {
      views: this.views,
      ids: options.ids,
      commitLater: (event) => this.commitLate(event),
    });
    for (const [id, adapter] of Object.entries(options.providers)) this.targets.set(id, new Target(id, adapter, this));
  }

  get ids(): IdSource {
    return this.options.ids;
  }

  get sandbox(): SandboxPolicy {
    return this.options.sandbox;
  }

  get sessionIdleMs(): number | null {
    return this.options.sessionIdleMs;
  }

  /** The registered tools as a provider is told of them (their handlers stay here). */
  get tools(): DynamicToolDefinition[] {
    return this.options.tools.map(({ name, description, inputSchema }) => ({ name, description, inputSchema }));
  }

  get turnSilenceMs(): number | null {
    return this.options.turnSilenceMs;
  }

  get closed(): boolean {
    return this.#closed;
  }

  /** From now on asynchronous completions are ignored (the runtime is closing). */
  close(): void {
    this.#closed = true;
    this.effects.turns.close();
    this.effects.silentTurns.close();
    for (const waiters of this.#runWaiters.values()) waiters.forEach((w) => w.resolve());
  }

  /**
   * The log failed: nothing can be recorded any more. Every caller waiting on a run is
   * rejected at once with the typed failure (it could never be told the terminal).
   */
  failed(error: unknown): void {
    this.fault ??= error;
    const waiters = [...this.#runWaiters.values()].flat();
    this.#runWaiters.clear();
    for (const waiter of waiters) waiter.reject(this.fault);
  }

  /**
   * The one write path for facts no machine emits: only inside the dispatcher (`run`/`act`),
   * so what they cause (actors told, effects performed) happens in order, in one step.
   */
  commit(event: DomainEvent): void {
    if (this.#depth === 0) throw new Error(`internal: ${event.type} committed outside the dispatcher`);
    this.#append(event);
  }

  /**
   * Append an event, its provider text masked (a delta may store nothing yet, a completion what its deltas held back),
   * fold it, and react to it (spawn actors, settle requests, wake waiters).
   */
  #append(event: DomainEvent): void {
    // The embedder's tool is called with what the provider sent, not with what the log keeps of it.
    if (event.type === "request.opened" && event.payload.kind === "dynamic_tool")
      this.#toolInputs.set(event.requestId, event.payload.input);
    this.#masking.store(event, this.#store);
  }

  #store = (event: DomainEvent): void => {
    const record = this.log.append(event);
    this.views.apply(record);
    this.options.onFolded?.(record);
    switch (event.type) {
      case "run.created":
        return this.spawnRun(event.runId);
      case "request.opened": {
        const { threadId, runId, requestId, payload, responseCapability } = event;
        this.actors.request({ threadId, runId, requestId, kind: payload.kind, responseCapability });
        // The embedder's handler runs as a tracked call, like every provider call: close() waits for it.
        if (isAnsweredByRuntime(payload.kind)) {
          const input = this.#toolInputs.get(requestId);
          this.#toolInputs.delete(requestId);
          this.effects.trackCall(
            answerToolCall(this, this.options.tools, requestId, input).catch((error: unknown) => this.escaped(error)),
          );
        }
        return;
      }
      case "provider_thread.closed":
        return this.targets.get(event.providerTarget)?.forgetThread(event.threadId);
      case "run.terminal": {
        const caps = this.#capabilitiesOfRun(event.runId);
        if (caps) this.checkpoints.final(event.runId, caps);
        return this.#runEnded(event.runId);
      }
      case "attempt.turn_bound":
        // Every other target's copy of this conversation just fell behind: the next turn there re-decides how to catch
        // up.
        for (const target of this.targets.values())
          if (target.id !== this.views.runs.get(event.runId)?.providerTarget) target.forgetThread(event.threadId);
        return;
      case "rollback.applied":
        for (const id of event.divergentProviderThreadIds) {
          const record = this.views.providerThreadsById.get(id);
          if (record) this.targets.get(record.providerTarget)?.forgetThread(record.threadId);
        }
        return;
      case "node.completed": {
        const caps =
          this.views.item(event.nodeId)?.kind === "subagent" ? this.#capabilitiesOfRun(event.runId) : undefined;
        if (caps) this.checkpoints.nested(event.runId, event.nodeId, caps);
        return;
      }
      case "request.resolved":
      case "request.closed":
        this.actors.forgetRequest(event.requestId);
        return Actors.sendIfActive(this.actors.runs.get(event.runId), {
          type: "REQUEST_SETTLED",
          requestId: event.requestId,
        });
      default:
        return;
    }
  };

  /** Runs `fn` (which sends to actors), then performs the effects they asked for; returns their outcomes. */
  run(fn: () => void): Outcome[] {
    const outer = this.#outcomes;
    const mine: Outcome[] = [];
    this.#outcomes = mine;
    this.#depth += 1;
    try {
      fn();
      this.effects.drain();
      return mine;
    } finally {
      this.#depth -= 1;
      this.#outcomes = outer;
    }
  }

  /**
   * Records the outcome of work that already happened outside the runtime (a provider
   * rollback, a checkpoint written to disk) even while the runtime is closing: as long as the
   * log is open, it must not be lost. No actor is told (they are stopping).
   */
  commitLate(event: DomainEvent): void {
    if (this.fault !== undefined) return;
    try {
      this.#append(event);
    } catch {
      // The log is closed: recovery treats the work as unrecorded.
    }
  }

  /**
   * Entry point for asynchronous completions (provider replies, effect results). Nothing
   * thrown here may escape into a detached promise: a broken log stops the runtime (typed,
   * reported), anything else is reported as escaped.
   */
  act(fn: () => void): void {
    if (this.#closed) return;
    try {
      this.run(fn);
    } catch (error) {
      this.escaped(error);
    }
  }

  /** An error with no caller left to take it: a failed log stops the runtime, anything else is reported. */
  escaped(error: unknown): void {
    if (this.log.failure !== undefined) return this.failed(this.log.failure);
    // Work cut short by close() (a provider call, a rollback) ends `closed`: that is no failure.
    if (this.#closed && isTillerError(error) && error.code === "closed") return;
    this.options.onEscaped?.(error);
  }

  /** Resolves once everything committed up to `seq` (default: now) is on disk. */
  whenDurable(seq?: number): Promise<void> {
    return this.log.whenDurable(seq);
  }

  #onEmitted(emitted: MachineEmitted): void {
    try {
      switch (emitted.type) {
        case "record":
          // A machine's own record: inside the dispatcher, or the result of an actor it invoked.
          return this.#append(emitted.event);
        case "settle":
          return this.inbound.settleAttempt(emitted);
        case "effect":
          return this.effects.enqueue(emitted.effect);
        case "outcome":
          this.#outcomes.push(emitted.outcome);
          return;
      }
    } catch (error) {
      // Only a broken log gets here (inputs are validated before they reach a machine).
      // Refuse further commands rather than crash the embedding process.
      this.failed(error);
    }
  }

  spawnThread(threadId: string, nextOrdinal: number, queue: QueuedRun[]): void {
    this.actors.thread({
      threadId,
      nextOrdinal,
      queue,
      allowSessionStopInterrupt: this.options.allowSessionStopInterrupt,
    });
  }

  spawnRun(runId: string): void {
    const { threadId, text, providerTarget } = this.views.runs.get(runId)!;
    const capabilities = this.targets.get(providerTarget)!.capabilities();
    this.actors.run({
      threadId,
      runId,
      text,
      capabilities,
      allowSessionStopInterrupt: this.options.allowSessionStopInterrupt,
    });
  }

  /** Undefined when the run's target is no longer configured (recovery settles such runs). */
  #capabilitiesOfRun(runId: string): ProviderCapabilities | undefined {
    const run = this.views.runs.get(runId);
    return run ? this.targets.get(run.providerTarget)?.capabilities() : undefined;
  }

  #runEnded(runId: string): void {
    const actor = this.actors.runs.get(runId);
    this.actors.runs.delete(runId);
    if (actor) this.inbound.releaseRun(actor.getSnapshot().context);
    const waiters = this.#runWaiters.get(runId);
    this.#runWaiters.delete(runId);
    waiters?.forEach((w) => w.resolve());
  }

  /** The current host generation of the session a request was asked through; null if that session is gone. */
  generationOf(view: RequestView): number | null {
    const cap = view.responseCapability;
    if (cap.kind !== "live" || view.status !== "pending") return null;
    for (const target of this.targets.values()) {
      const session = target.session(cap.sessionId);
      if (session) return session.hostGeneration;
    }
    return null;
  }

  /**
   * Resolves when the run's terminal has been committed (or the runtime closes); rejects when
   * the log fails, or with `signal.reason` when the signal aborts (the waiter is then dropped).
   */
  runEnded(runId: string, signal?: AbortSignal): Promise<void> {
    if (this.fault !== undefined) return Promise.reject(this.fault);
    if (signal?.aborted) return Promise.reject(signal.reason);
    return new Promise((resolve, reject) => {
      const onAbort = () => {
        const left = (this.#runWaiters.get(runId) ?? []).filter((w) => w !== waiter);
        if (left.length > 0) this.#runWaiters.set(runId, left);
        else this.#runWaiters.delete(runId);
        reject(signal!.reason);
      };
      const settled = () => signal?.removeEventListener("abort", onAbort);
      const waiter = {
        resolve: () => (settled(), resolve()),
        reject: (error: unknown) => (settled(), reject(error)),
      };
      signal?.addEventListener("abort", onAbort, { once: true });
      this.#runWaiters.set(runId, [...(this.#runWaiters.get(runId) ?? []), waiter]);
    });
  }
}
