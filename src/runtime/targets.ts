import { fromPromise } from "xstate";
import { parseCapabilities, type ProviderCapabilities } from "../capabilities/index.js";
import type { HandoffContext, ProviderAdapter, ProviderThreadHandle, ReattachedSession } from "../adapters/contract.js";
import { describeUnserved, unservedCapabilities } from "../adapters/kit/defineAdapter.js";
import { DEFAULT_RUNTIME_MODE, type RuntimeMode } from "../domain/entities.js";
import { ClosedError, HostUnavailableError, isTillerError, ProtocolError } from "../domain/errors.js";
import { redact } from "../domain/redact.js";
import { pendingCall } from "../machines/providerThread.js";
import {
  sessionMachine,
  sessionSlot,
  type SessionInput,
  type StartedSession,
  type StartSessionInput,
} from "../machines/session.js";
import { Actors, type ProviderThreadActor, type SessionActor } from "./actors.js";
import { recordContext, type ContextPlan } from "./handoff.js";
import { Normalizer } from "./ingest/normalizer.js";
import type { Projections, ProviderThreadRecord } from "./projections.js";
import type { LiveSession, LoadedThread, TargetHost } from "./targetTypes.js";
import { loadSituation } from "./turnContext.js";

/**
 * One configured provider target: its adapter, its normalizer, and a registry of the live
 * handles of its sessions and provider threads. The decisions are the actors': a session
 * machine starts, idles out, retires and loses its session; a provider-thread machine decides
 * how an app thread's provider thread is loaded. The target looks handles up, performs the
 * provider calls those machines name, and reports the results back to them.
 */

interface SessionSlot {
  sessionId: string;
  actor: SessionActor;
  ready: Promise<LiveSession>;
}

/** A provider thread being loaded (or loaded) for one session. */
interface ThreadLoad {
  sessionId: string;
  promise: Promise<LoadedThread>;
}

/** The target a run is on. */
export function targetOfRun(
  host: { readonly views: Projections; readonly targets: ReadonlyMap<string, Target> },
  runId: string,
): Target {
  const run = host.views.runs.get(runId)!;
  return host.targets.get(run.providerTarget)!;
}

export class Target {
  readonly normalizer: Normalizer;
  readonly declared: ProviderCapabilities;
  readonly #sessionLogic;
  #slots = new Map<string, SessionSlot>();
  #live = new Map<string, LiveSession>();
  #loads = new Map<string, ThreadLoad>();
  /** Sessions the adapter took up again, until their actors read them (see `reattachSession`). */
  #reattached = new Map<string, ReattachedSession>();
  /** Set when the target's event stream ended: nothing it starts could ever report back. */
  #unavailable: string | null = null;

  constructor(
    readonly id: string,
    readonly adapter: ProviderAdapter,
    private readonly host: TargetHost,
  ) {
    this.declared = parseCapabilities(adapter.getCapabilities());
    this.normalizer = new Normalizer(id, (sessionId) => {
      const live = this.#live.get(sessionId);
      return live ?? { capabilities: this.declared, hostGeneration: 0 };
    });
    this.#sessionLogic = sessionMachine.provide({
      actors: {
        startSession: fromPromise<StartedSession, StartSessionInput>(async ({ input }) => {
          const info = await adapter.startSession(input);
          const capabilities = parseCapabilities(info.capabilities);
          servedOrProtocolError(adapter, capabilities);
          return { capabilities, hostGeneration: info.hostGeneration };
        }),
        reattachSession: fromPromise<StartedSession, { sessionId: string }>(async ({ input }) => {
          const info = this.#reattached.get(input.sessionId)!;
          this.#reattached.delete(input.sessionId);
          const capabilities = parseCapabilities(info.capabilities);
          servedOrProtocolError(adapter, capabilities);
          return { capabilities, hostGeneration: info.hostGeneration };
        }),
        stopSession: fromPromise<void, { sessionId: string }>(({ input }) => adapter.stopSession(input)),
      },
    });
  }

  session(sessionId: string): LiveSession | undefined {
    return this.#live.get(sessionId);
  }

  liveSessions(): LiveSession[] {
    return [...this.#live.values()];
  }

  /** The capability record in force: the live session's if one announced it, else the declared one. */
  capabilities(): ProviderCapabilities {
    const [first] = this.#live.values();
    return first?.capabilities ?? this.declared;
  }

  /** The record in force for an attempt's turn: its session's, else the target's. */
  capabilitiesOfAttempt(attemptId: string): ProviderCapabilities {
    const binding = this.normalizer.binding(attemptId);
    return (binding && this.session(binding.sessionId)?.capabilities) ?? this.capabilities();
  }

  markUnavailable(reason: string): void {
    this.#unavailable = reason;
  }

  /**
   * The session this app thread's turn runs in (see `sessionSlot`). The thread's sessions are
   * told the model and runtime mode first: one that cannot switch to them retires (its own
   * transition), and the thread gets a session started for them. Without a mode, the thread's.
   */
  ensureSession(
    threadId: string,
    cwd: string,
    model: string | null,
    mode: RuntimeMode = this.host.views.threads.get(threadId)?.runtimeMode ?? DEFAULT_RUNTIME_MODE,
  ): Promise<LiveSession> {
    if (this.#unavailable)
      return Promise.reject(
        new HostUnavailableError(`${this.id} is unavailable: ${this.#unavailable}`, { target: this.id }),
      );
    const { owner, key } = sessionSlot(this.declared, threadId, model, mode);
    if (owner !== "") {
      const mine = [...this.#slots].filter(([other]) => other.startsWith(`${owner}\u0000`));
      this.host.act(() =>
        mine.forEach(([, slot]) => Actors.sendIfActive(slot.actor, { type: "USE_SETTINGS", model, runtimeMode: mode })),
      );
    }
    const cached = this.#slots.get(key);
    if (cached) return cached.ready;
    const slot = this.#startSession(this.#sessionInput(this.host.ids.next("ses"), cwd, model, mode));
    this.#slots.set(key, slot);
    return slot.ready;
  }

  #sessionInput(sessionId: string, cwd: string, model: string | null, runtimeMode: RuntimeMode): SessionInput {
    const { sandbox, sessionIdleMs: idleMs, tools } = this.host;
    const { id: providerTarget, declared } = this;
    return {
      sessionId,
      providerTarget,
      provider: this.adapter.provider,
      sandbox,
      cwd,
      model,
      runtimeMode,
      declared,
      idleMs,
      tools,
    };
  }

  #startSession(input: SessionInput): SessionSlot {
    const { sessionId } = input;
    const actor = this.host.actors.session(input, this.#sessionLogic);
    const forget = () => {
      for (const [key, slot] of this.#slots) if (slot.sessionId === sessionId) this.#slots.delete(key);
    };
    const ready = new Promise<LiveSession>((resolve, reject) => {
      actor.on("ready", ({ capabilities, hostGeneration }) => {
        const session: LiveSession = { sessionId, hostGeneration, capabilities };
        this.#live.set(sessionId, session);
        resolve(session);
      });
      actor.on("startFailed", ({ error }) => {
        forget();
        reject(error);
      });
      actor.on("stopping", ({ reason }) => (reason === "idle" ? this.dropSession(sessionId) : forget()));
      // Stopped before it ever started (the runtime closed): nobody may wait forever.
      actor.subscribe({ complete: () => reject(new ClosedError(`session ${sessionId}`)) });
    });
    ready.catch(() => undefined);
    return { sessionId, actor, ready };
  }

  /**
   * Recovery: takes up a session a previous life of the runtime started, in a host that outlived it, into the slot the
   * thread's turns use. Null where the adapter cannot, or the provider no longer holds the session.
   */
  async reattachSession(
    sessionId: string,
    slot: { threadId: string; cwd: string; model: string | null; runtimeMode: RuntimeMode },
  ): Promise<ReattachedSession | null> {
    const info = await this.adapter.reattachSession?.({ sessionId }).catch(() => null);
    if (!info) return null;
    this.#reattached.set(sessionId, info);
    const input = this.#sessionInput(sessionId, slot.cwd, slot.model, slot.runtimeMode);
    const started = this.#startSession({ ...input, reattach: true });
    this.#slots.set(sessionSlot(this.declared, slot.threadId, slot.model, slot.runtimeMode).key, started);
    return (await started.ready.then(() => info).catch(() => null)) ?? null;
  }

  /** Recovery: the app thread's provider thread is loaded in this session, its turn running there (re-attached). */
  reattachThread(threadId: string, sessionId: string, record: ProviderThreadRecord): LoadedThread {
    const handle = { threadRef: record.nativeThreadRef, resumeCursor: record.resumeCursor };
    const cwd = this.host.views.threads.get(threadId)!.cwd;
    const loaded = { providerThreadId: record.providerThreadId, sessionId, handle: { ...handle, cwd } };
    this.#loads.set(threadId, { sessionId, promise: Promise.resolve(loaded) });
    const event = { type: "REATTACHED" as const, providerThreadId: record.providerThreadId, sessionId, handle };
    this.host.act(() => this.#threadActor(threadId).send(event));
    return loaded;
  }

  /** A turn (or a rollback) uses the session: it is not stopped for idleness meanwhile (inside the dispatcher). */
  claim(sessionId: string): void {
    Actors.sendIfActive(this.host.actors.sessions.get(sessionId), { type: "CLAIM" });
  }

  release(sessionId: string): void {
    Actors.sendIfActive(this.host.actors.sessions.get(sessionId), { type: "RELEASE" });
  }

  /**
   * The runtime is closing: every session actor of this target stops (no idle deadline, no start or stop outlives
   * `close()`).
   */
  stopSessions(): void {
    for (const actor of this.host.actors.sessions.values()) {
      if (actor.getSnapshot().context.providerTarget === this.id) actor.stop();
    }
  }

  /** The session died: forget it, and every provider thread loaded in it, right now. */
  dropSession(sessionId: string): void {
    this.#live.delete(sessionId);
    for (const [key, slot] of this.#slots) if (slot.sessionId === sessionId) this.#slots.delete(key);
    for (const [threadId, load] of this.#loads) {
      if (load.sessionId !== sessionId) continue;
      this.#loads.delete(threadId);
      Actors.sendIfActive(this.#threadActor(threadId), { type: "UNLOAD" });
    }
  }

  /**
   * The app thread's provider thread here is stale (broken, behind, divergent): the next turn decides again how to load
   * it.
   */
  forgetThread(threadId: string): void {
    this.#loads.delete(threadId);
    Actors.sendIfActive(this.host.actors.providerThreads.get(Actors.providerThreadKey(threadId, this.id)), {
      type: "UNLOAD",
    });
  }

  /** The provider-thread actor of an app thread on this target (spawned on first use). */
  #threadActor(threadId: string): ProviderThreadActor {
    return this.host.actors.providerThread(threadId, this.id);
  }

  /** The provider thread for an app thread in this session, loaded once per session (its machine decides how). */
  ensureThread(threadId: string, session: LiveSession): Promise<LoadedThread> {
    const current = this.#loads.get(threadId);
    if (current?.sessionId === session.sessionId) return current.promise;
    // One load at a time per thread: a load for another session finishes first (then this one decides again).
    const before = current?.promise.catch(() => undefined);
    const promise = (before ?? Promise.resolve()).then(() => this.#load(threadId, session));
    promise.catch(() => {
      if (this.#loads.get(threadId)?.promise === promise) this.#loads.delete(threadId);
    });
    this.#loads.set(threadId, { sessionId: session.sessionId, promise });
    return promise;
  }

  async #load(threadId: string, session: LiveSession): Promise<LoadedThread> {
    const { views } = this.host;
    const actor = this.#threadActor(threadId);
    const cwd = views.threads.get(threadId)!.cwd;
    const { situation, fork } = loadSituation(views, this, threadId, session);
    this.host.act(() => actor.send({ type: "LOAD", situation }));
    for (
      let step = actor.getSnapshot(), call = pendingCall(step);
      call;
      step = actor.getSnapshot(), call = pendingCall(step)
    ) {
      // No empty threads: nothing to call now; the turn makes the thread (see bindMadeThread).
      if (call.call === "withTurn") {
        const handle = { threadRef: null, resumeCursor: "", cwd };
        const unmade = { via: call.via };
        return { providerThreadId: this.host.ids.next("pth"), sessionId: session.sessionId, handle, unmade };
      }
      let handle: ProviderThreadHandle;
      try {
        handle =
          call.call === "resume"
            ? await this.adapter.ensureProviderThread({
                sessionId: session.sessionId,
                cwd,
                resume: { cursor: situation.stored!.resumeCursor },
              })
            : call.call === "fork"
              ? await this.adapter.forkThread!({
                  sessionId: session.sessionId,
                  thread: fork!.parent,
                  cwd,
                  afterTurnRef: fork!.afterTurnRef,
                })
              : await this.adapter.ensureProviderThread({ sessionId: session.sessionId, cwd });
      } catch (error) {
        const message = redact(error instanceof Error ? error.message : String(error));
        // By code, not class: a host process reports it across JSON-RPC.
        if (call.call === "resume" && isTillerError(error) && error.code === "resume_failed")
          this.host.act(() => actor.send({ type: "RESUME_FAILED", message }));
        else if (call.call === "fork") this.host.act(() => actor.send({ type: "FORK_FAILED", message }));
        else {
          this.host.act(() => actor.send({ type: "LOAD_FAILED" }));
          throw error;
        }
        if (actor.getSnapshot() === step) throw new ClosedError();
        continue;
      }
      const providerThreadId = call.via === "resumed" ? situation.stored!.providerThreadId : this.host.ids.next("pth");
      this.host.act(() => actor.send({ type: "BOUND", providerThreadId, handle, cwd }));
      if (actor.getSnapshot() === step) throw new ClosedError();
    }
    const { context } = actor.getSnapshot();
    if (!actor.getSnapshot().matches("loaded") || context.sessionId !== session.sessionId) throw new ClosedError();
    // The app thread's cwd, whatever the adapter echoed: the runtime knows where a thread lives.
    return {
      providerThreadId: context.providerThreadId!,
      sessionId: session.sessionId,
      handle: { threadRef: context.handle!.threadRef, resumeCursor: context.handle!.resumeCursor, cwd },
    };
  }

  /**
   * The thread a turn made (`newThread`), as the provider named it: bound, recorded, and the
   * turn's events routed by it. Before it is bound the thread is not this target's for any other call.
   */
  bindMadeThread(threadId: string, loaded: LoadedThread, handle: ProviderThreadHandle, attemptId: string): void {
    const actor = this.#threadActor(threadId);
    const { cwd } = loaded.handle;
    this.host.act(() => actor.send({ type: "BOUND", providerThreadId: loaded.providerThreadId, handle, cwd }));
    this.normalizer.threadNamed(attemptId, handle.threadRef);
    // Loaded in this session from now on, as if it had been created empty.
    const bound: LoadedThread = {
      providerThreadId: loaded.providerThreadId,
      sessionId: loaded.sessionId,
      handle: { ...handle, cwd },
    };
    this.#loads.set(threadId, { sessionId: loaded.sessionId, promise: Promise.resolve(bound) });
  }

  /** A turn that was to make the thread failed before the provider named one: the next turn decides again. */
  madeThreadFailed(threadId: string): void {
    const actor = this.#threadActor(threadId);
    this.host.act(() => actor.send({ type: "LOAD_FAILED" }));
    this.#loads.delete(threadId);
  }

  /** Records what the plan decided (inside the dispatcher): the context the turn carries. */
  recordContext(plan: ContextPlan, written: { text: string } | { failed: string } | null): HandoffContext {
    return recordContext(
      plan,
      written,
      (event) => this.host.commit(event),
      () => this.host.ids.next("hnd"),
    );
  }
}

/** A session's record (its handshake's word) declaring what the adapter cannot serve: the session fails, typed. */
function servedOrProtocolError(adapter: ProviderAdapter, capabilities: ProviderCapabilities): void {
  const missing = unservedCapabilities(adapter, capabilities);
  if (missing.length === 0) return;
  throw new ProtocolError(
    `the session's capability record declares what the ${adapter.provider} adapter cannot serve: ` +
      describeUnserved(missing),
  );
}
