import { canSwitchModelInSession, parseCapabilities, sharesSessionAcrossThreads, type ProviderCapabilities } from "../capabilities/index.js";
import type { SandboxPolicy } from "../adapters/contract.js";
import { decide, forkPolicy, providerThreadPolicy, type ProviderThreadSituation } from "../machines/contextPolicy.js";
import { policyEvent } from "../machines/emitted.js";
import type { ProviderAdapter, ProviderThreadAddress, ProviderThreadHandle, RunContext } from "../adapters/contract.js";
import { HostUnavailableError, isTillerError } from "../domain/errors.js";
import type { DomainEvent, DomainEventOf } from "../domain/events.js";
import { redact } from "../domain/redact.js";
import type { IdSource } from "../domain/ids.js";
import { contextForNextTurn, forkSituation, historyRuns } from "./handoff.js";
import { Normalizer } from "./normalizer.js";
import { Projections, type Transfer } from "./projections.js";

/**
 * One configured provider target: its adapter, its normalizer, its live sessions and the
 * provider threads loaded in them. Sessions are shared by the target's threads when the
 * provider hosts many threads per session; otherwise each app thread gets its own.
 */

export interface LiveSession {
  sessionId: string;
  hostGeneration: number;
  capabilities: ProviderCapabilities;
}

export interface LoadedThread {
  providerThreadId: string;
  sessionId: string;
  /** What every call on this provider thread passes: its handle, with its app thread's cwd. */
  handle: ProviderThreadAddress;
}

/** What a target needs from the runtime: commit events, read the projection, track sessions. */
export interface TargetHost {
  readonly views: Projections;
  readonly sandbox: SandboxPolicy;
  readonly ids: IdSource;
  commit(event: DomainEvent): void;
  sessionStarting(target: string, sessionId: string): void;
  sessionStarted(target: string, session: LiveSession): void;
  sessionFailed(sessionId: string, message: string): void;
}

/** A cached start or load, keyed by the session it belongs to so a dead session drops it at once. */
interface Slot<T> {
  sessionId: string;
  promise: Promise<T>;
}

export class Target {
  readonly normalizer: Normalizer;
  readonly declared: ProviderCapabilities;
  #sessions = new Map<string, Slot<LiveSession>>();
  #live = new Map<string, LiveSession>();
  #threads = new Map<string, Slot<LoadedThread>>();
  #idleTimers = new Map<string, NodeJS.Timeout>();
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

  markUnavailable(reason: string): void {
    this.#unavailable = reason;
  }

  /**
   * A session for this app thread: shared per target, or per thread, as the capabilities
   * say; and per model when the provider cannot switch models in a session (the thread's
   * session for its previous model is then stopped).
   */
  ensureSession(threadId: string, cwd: string, model: string | null): Promise<LiveSession> {
    if (this.#unavailable) return Promise.reject(new HostUnavailableError(`${this.id} is unavailable: ${this.#unavailable}`, { target: this.id }));
    const shared = sharesSessionAcrossThreads(this.declared);
    const owner = shared ? "" : threadId;
    const key = `${owner}\u0000${canSwitchModelInSession(this.declared) ? "" : (model ?? "")}`;
    const cached = this.#sessions.get(key);
    if (cached) return cached.promise;
    if (!shared) {
      for (const [other, slot] of this.#sessions) {
        if (other.startsWith(`${owner}\u0000`)) void this.#retire(other, slot);
      }
    }
    const sessionId = this.host.ids.next("ses");
    this.host.sessionStarting(this.id, sessionId);
    const promise = this.adapter.startSession({ sessionId, cwd, model, sandbox: this.host.sandbox }).then((info) => {
      const session: LiveSession = { sessionId, hostGeneration: info.hostGeneration, capabilities: parseCapabilities(info.capabilities) };
      this.#live.set(sessionId, session);
      this.host.sessionStarted(this.id, session);
      return session;
    });
    promise.catch((error: unknown) => {
      if (this.#sessions.get(key)?.promise === promise) this.#sessions.delete(key);
      this.host.sessionFailed(sessionId, redact(error instanceof Error ? error.message : String(error)));
    });
    this.#sessions.set(key, { sessionId, promise });
    return promise;
  }

  /** A thread's session replaced by one for another model: stopped once started (best effort). */
  async #retire(key: string, slot: Slot<LiveSession>): Promise<void> {
    this.#sessions.delete(key);
    const session = await slot.promise.catch(() => null);
    if (session) await this.adapter.stopSession({ sessionId: session.sessionId }).catch(() => undefined);
  }

  /** A provider thread was closed: the next turn of its app thread loads a replacement. */
  forgetThread(threadId: string): void {
    this.#threads.delete(threadId);
  }

  /**
   * A session with no turn for `ms` is stopped, so its host lease is given back (and an idle
   * host can be released). The next turn of its threads starts a new session and resumes them.
   */
  idleLater(sessionId: string, ms: number | null, stillIdle: () => boolean): void {
    this.cancelIdle(sessionId);
    if (ms === null) return;
    const timer = setTimeout(() => {
      this.#idleTimers.delete(sessionId);
      if (!stillIdle() || !this.#live.has(sessionId)) return;
      this.dropSession(sessionId);
      void this.adapter.stopSession({ sessionId }).catch(() => undefined);
    }, ms);
    timer.unref();
    this.#idleTimers.set(sessionId, timer);
  }

  cancelIdle(sessionId: string): void {
    clearTimeout(this.#idleTimers.get(sessionId));
    this.#idleTimers.delete(sessionId);
  }

  /** The runtime is closing: no idle timer may keep it (and its actors) alive after `close()`. */
  cancelAllIdle(): void {
    for (const sessionId of [...this.#idleTimers.keys()]) this.cancelIdle(sessionId);
  }

  /** The session died: forget it, and every provider thread loaded in it, right now. */
  dropSession(sessionId: string): void {
    this.cancelIdle(sessionId);
    this.#live.delete(sessionId);
    for (const [key, slot] of this.#sessions) if (slot.sessionId === sessionId) this.#sessions.delete(key);
    for (const [key, slot] of this.#threads) if (slot.sessionId === sessionId) this.#threads.delete(key);
  }

  /**
   * The provider thread for an app thread, loaded once per session: resumed from the stored
   * cursor (a required primitive), forked for a fork's first run, or created. A failed resume
   * is never silent: it is recorded, and the new thread is rebuilt from app context.
   */
  ensureThread(threadId: string, session: LiveSession): Promise<LoadedThread> {
    const cached = this.#threads.get(threadId);
    if (cached?.sessionId === session.sessionId) return cached.promise;
    const promise = this.#loadThread(threadId, session);
    promise.catch(() => {
      if (this.#threads.get(threadId)?.promise === promise) this.#threads.delete(threadId);
    });
    this.#threads.set(threadId, { sessionId: session.sessionId, promise });
    return promise;
  }

  async #loadThread(threadId: string, session: LiveSession): Promise<LoadedThread> {
    const { views } = this.host;
    const thread = views.threads.get(threadId)!;
    const stored = views.providerThreads.get(Projections.providerThreadKey(threadId, this.id));
    const { sessionId } = session;
    const transfer = views.pendingTransfer(threadId);
    const { decision, policy } = decide(providerThreadPolicy, {
      capabilities: session.capabilities,
      hasThread: !!stored,
      divergent: stored?.divergent ?? false,
      missedRuns: !!stored && historyRuns(views, threadId).some((r) => !stored.seenRunIds.has(r.runId)),
      pendingFork: !!transfer,
    } satisfies ProviderThreadSituation);
    const fresh = async () => this.adapter.ensureProviderThread({ sessionId, cwd: thread.cwd });
    if (policy && stored) {
      const detail =
        decision === "realign"
          ? `provider thread ${stored.providerThreadId} diverged from the app after a rollback; a fresh provider thread gets the app's history`
          : `provider thread ${stored.providerThreadId} missed runs and the provider takes no delta handoff; a fresh provider thread gets a full summary`;
      this.host.commit(policyEvent({ threadId, runId: null }, policy, detail));
    }
    switch (decision) {
      case "resume":
        try {
          const handle = await this.adapter.ensureProviderThread({ sessionId, cwd: thread.cwd, resume: { cursor: stored!.resumeCursor } });
          return this.#bind(threadId, session, handle, "resumed", stored!.providerThreadId);
        } catch (error) {
          // By code, not class: a host process reports it across JSON-RPC.
          if (!isTillerError(error) || error.code !== "resume_failed") throw error;
          const message = `provider thread could not be resumed (${redact(error.message)}); rebuilding it from app context`;
          this.host.commit({ type: "warning", threadId, runId: null, message });
          return this.#bind(threadId, session, await fresh(), "rebuilt");
        }
      case "realign":
        return this.#bind(threadId, session, await fresh(), "realigned");
      case "refresh":
        return this.#bind(threadId, session, await fresh(), "refreshed");
      case "fork":
        return this.#resolveFork(threadId, session, transfer!);
      default:
        return this.#bind(threadId, session, await fresh(), views.hadBrokenProviderThread(threadId, this.id) ? "replaced" : "created");
    }
  }

  /** What the next turn on this provider thread must carry (a recorded handoff, a portable fork), if anything. */
  contextForNextTurn(threadId: string, runId: string, loaded: LoadedThread, session: LiveSession): RunContext | null {
    return contextForNextTurn({
      views: this.host.views,
      threadId,
      runId,
      providerThread: this.host.views.providerThreadsById.get(loaded.providerThreadId)!,
      capabilities: session.capabilities,
      commit: (event) => this.host.commit(event),
      nextHandoffId: () => this.host.ids.next("hnd"),
    });
  }

  #bind(threadId: string, session: LiveSession, handle: ProviderThreadHandle, via: DomainEventOf<"provider_thread.bound">["via"], existingId?: string): LoadedThread {
    const providerThreadId = existingId ?? this.host.ids.next("pth");
    // The app thread's cwd, whatever the adapter echoed: the runtime knows where a thread lives.
    const cwd = this.host.views.threads.get(threadId)!.cwd;
    this.host.commit({
      type: "provider_thread.bound",
      threadId,
      providerThreadId,
      providerTarget: this.id,
      sessionId: session.sessionId,
      nativeThreadRef: handle.threadRef,
      resumeCursor: handle.resumeCursor,
      via,
    });
    return { providerThreadId, sessionId: session.sessionId, handle: { threadRef: handle.threadRef, resumeCursor: handle.resumeCursor, cwd } };
  }

  /**
   * Invariant 9: the fork's lineage was recorded at fork time; how it is realised is decided
   * now, at its first run. Natively only when this provider's parent thread executed every run
   * up to the fork point and can fork there; otherwise (or if the native fork fails) a portable,
   * lower-fidelity fork from app context, whose context the first turn carries.
   */
  async #resolveFork(threadId: string, session: LiveSession, transfer: Transfer): Promise<LoadedThread> {
    const { views } = this.host;
    const situation = forkSituation(views, this.id, transfer, session.capabilities, !!this.adapter.forkThread);
    const { parentThread, runs, fromInside } = situation;
    const capability = fromInside ? "threads.canForkFromTurn" : "threads.canForkThread";
    const resolved = (resolution: "native" | "portable", detail: string) =>
      this.host.commit({ type: "fork.resolved", threadId, transferId: transfer.transferId, resolution, detail });

    let why = situation.why;
    if (decide(forkPolicy, situation).decision === "native") {
      try {
        // Both from the log: after a restart the adapter has never seen the parent, and must not guess where it lives.
        const parent = { threadRef: parentThread!.nativeThreadRef, resumeCursor: parentThread!.resumeCursor, cwd: views.threads.get(parentThread!.threadId)!.cwd };
        const cwd = views.threads.get(threadId)!.cwd;
        const handle = await this.adapter.forkThread!({ sessionId: session.sessionId, thread: parent, cwd, afterTurnRef: situation.afterTurnRef });
        resolved("native", `forked provider thread ${parentThread!.providerThreadId}`);
        return this.#bind(threadId, session, handle, "forked");
      } catch (error) {
        why = `native fork failed (${redact(error instanceof Error ? error.message : String(error))})`;
      }
    }
    const detail = `${why}; portable context from ${runs.length} runs, lower fidelity`;
    this.host.commit(policyEvent({ threadId, runId: null }, "synthetic_fork", detail, capability));
    resolved("portable", why);
    const handle = await this.adapter.ensureProviderThread({ sessionId: session.sessionId, cwd: views.threads.get(threadId)!.cwd });
    return this.#bind(threadId, session, handle, "created");
  }
}
