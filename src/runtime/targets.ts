import { canForkNatively, parseCapabilities, sharesSessionAcrossThreads, type ProviderCapabilities } from "../capabilities/index.js";
import type { ProviderAdapter, ProviderThreadHandle, RunContext } from "../adapters/contract.js";
import { ResumeFailedError, TillerError } from "../domain/errors.js";
import type { DomainEvent } from "../domain/events.js";
import type { IdSource } from "../domain/ids.js";
import { contextDelivery, summarizeRuns } from "./handoff.js";
import { Normalizer } from "./normalizer.js";
import { Projections, type PendingTransfer, type RunView } from "./projections.js";

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
  handle: ProviderThreadHandle;
  /** Context to hand the provider with the next turn (handoff, portable fork, rebuild). */
  pendingContext: RunContext | null;
}

/** What a target needs from the runtime: commit events and read the projection. */
export interface TargetHost {
  readonly views: Projections;
  readonly ids: IdSource;
  commit(event: DomainEvent): void;
  sessionStarted(target: string, session: LiveSession): void;
}

export class Target {
  readonly normalizer: Normalizer;
  readonly declared: ProviderCapabilities;
  #sessions = new Map<string, Promise<LiveSession>>();
  #live = new Map<string, LiveSession>();
  #threads = new Map<string, Promise<LoadedThread>>();

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

  /** The capability record in force: the live session's if one announced it, else the declared one. */
  capabilities(): ProviderCapabilities {
    const [first] = this.#live.values();
    return first?.capabilities ?? this.declared;
  }

  /** A session for this app thread: shared per target, or per thread, as the capabilities say. */
  ensureSession(threadId: string, cwd: string, model: string | null): Promise<LiveSession> {
    const key = sharesSessionAcrossThreads(this.declared) ? "" : threadId;
    let pending = this.#sessions.get(key);
    if (!pending) {
      const sessionId = this.host.ids.next("ses");
      pending = this.adapter.startSession({ sessionId, cwd, model }).then((info) => {
        const session: LiveSession = {
          sessionId,
          hostGeneration: info.hostGeneration,
          capabilities: parseCapabilities(info.capabilities),
        };
        this.#live.set(sessionId, session);
        this.host.sessionStarted(this.id, session);
        return session;
      });
      pending.catch(() => this.#sessions.delete(key));
      this.#sessions.set(key, pending);
    }
    return pending;
  }

  /** The session died: forget it and every provider thread loaded in it. */
  dropSession(sessionId: string): void {
    this.#live.delete(sessionId);
    for (const [key, pending] of this.#sessions) {
      void pending.then((s) => s.sessionId === sessionId && this.#sessions.delete(key), () => undefined);
    }
    for (const [key, pending] of this.#threads) {
      void pending.then((t) => t.sessionId === sessionId && this.#threads.delete(key), () => undefined);
    }
  }

  /**
   * The provider thread for an app thread, loaded once per session: resumed from the stored
   * cursor (a required primitive), forked for a fork's first run, or created. A failed resume
   * is never silent: it is recorded, and the new thread is rebuilt from app context.
   */
  ensureThread(threadId: string, session: LiveSession): Promise<LoadedThread> {
    let pending = this.#threads.get(threadId);
    if (!pending) {
      pending = this.#loadThread(threadId, session);
      pending.catch(() => this.#threads.delete(threadId));
      this.#threads.set(threadId, pending);
    }
    return pending;
  }

  async #loadThread(threadId: string, session: LiveSession): Promise<LoadedThread> {
    const { views } = this.host;
    const thread = views.threads.get(threadId)!;
    const stored = views.providerThreads.get(Projections.providerThreadKey(threadId, this.id));
    const priorRuns = thread.runs.filter((r) => r.status !== "queued" && r.status !== "starting" && r.attempts.length > 0);
    if (stored) {
      try {
        const handle = await this.adapter.ensureProviderThread({ sessionId: session.sessionId, cwd: thread.cwd, resume: { cursor: stored.resumeCursor } });
        return this.#bind(threadId, session, handle, "resumed", null, stored.providerThreadId);
      } catch (error) {
        if (!(error instanceof ResumeFailedError)) throw error;
        this.host.commit({ type: "warning", threadId, runId: null, message: `provider thread could not be resumed (${error.message}); rebuilding it from app context` });
        const context = this.#handoff(threadId, session, "resume_failed", priorRuns);
        const fresh = await this.adapter.ensureProviderThread({ sessionId: session.sessionId, cwd: thread.cwd });
        return this.#bind(threadId, session, fresh, "created", context);
      }
    }
    const transfer = views.pendingTransfer(threadId);
    if (transfer) return this.#resolveFork(threadId, session, transfer);
    const handle = await this.adapter.ensureProviderThread({ sessionId: session.sessionId, cwd: thread.cwd });
    // Runs this provider never saw (another provider's) travel as an explicit handoff record.
    const context = priorRuns.length > 0 ? this.#handoff(threadId, session, "provider_switch", priorRuns) : null;
    return this.#bind(threadId, session, handle, "created", context);
  }

  #bind(threadId: string, session: LiveSession, handle: ProviderThreadHandle, via: "created" | "resumed" | "forked", pendingContext: RunContext | null, existingId?: string): LoadedThread {
    const providerThreadId = existingId ?? this.host.ids.next("pth");
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
    return { providerThreadId, sessionId: session.sessionId, handle, pendingContext };
  }

  /**
   * Invariant 9: the fork's lineage was recorded at fork time; how it is realised is decided
   * now, at its first run: natively when this provider holds the parent thread and can fork
   * from that point, else as a portable (synthetic, lower-fidelity) fork from app context.
   */
  async #resolveFork(threadId: string, session: LiveSession, transfer: PendingTransfer): Promise<LoadedThread> {
    const { views } = this.host;
    const parent = views.threads.get(transfer.parentThreadId)!;
    const parentThread = views.providerThreads.get(Projections.providerThreadKey(parent.threadId, this.id));
    const cut = transfer.forkedFromRunId ? parent.runs.findIndex((r) => r.runId === transfer.forkedFromRunId) + 1 : parent.runs.length;
    const runs = parent.runs.slice(0, cut);
    const fromInside = cut < parent.runs.length;
    const resolved = (resolution: "native" | "portable", detail: string) =>
      this.host.commit({ type: "fork.resolved", threadId, transferId: transfer.transferId, resolution, detail });

    if (parentThread && this.adapter.forkThread && canForkNatively(session.capabilities, fromInside)) {
      const afterTurnRef = fromInside ? (runs.at(-1)?.attempts.at(-1)?.nativeTurnRef ?? null) : null;
      if (!fromInside || afterTurnRef) {
        const handle = await this.adapter.forkThread({ sessionId: session.sessionId, thread: { threadRef: parentThread.nativeThreadRef, resumeCursor: parentThread.resumeCursor }, afterTurnRef });
        resolved("native", `forked provider thread ${parentThread.providerThreadId}`);
        return this.#bind(threadId, session, handle, "forked", null);
      }
    }
    const capability = fromInside ? "threads.canForkFromTurn" : "threads.canForkThread";
    const why = parentThread ? `provider cannot fork natively (${capability})` : "parent has no thread on this provider";
    this.host.commit({ type: "policy.applied", threadId, runId: null, policy: "synthetic_fork", capability, outcome: "fallback", detail: `${why}; portable context from ${runs.length} runs, lower fidelity` });
    resolved("portable", why);
    const delivery = contextDelivery(session.capabilities);
    if (!delivery) throw new TillerError("capability_unsupported", "provider accepts no context for a portable fork", { capability: "context.acceptsSyntheticUserContext" });
    const handle = await this.adapter.ensureProviderThread({ sessionId: session.sessionId, cwd: parent.cwd });
    const text = summarizeRuns(runs, session.capabilities.context.maxRecommendedHandoffChars);
    return this.#bind(threadId, session, handle, "created", { kind: "fork", text, delivery });
  }

  /** Invariant 8: context crossing to this provider is an explicit, recorded handoff. */
  #handoff(threadId: string, session: LiveSession, reason: "provider_switch" | "resume_failed", runs: RunView[]): RunContext {
    const delivery = contextDelivery(session.capabilities);
    if (!delivery) {
      throw new TillerError("capability_unsupported", "provider accepts no explicit or synthetic context for a handoff", {
        capability: "context.acceptsSyntheticUserContext",
      });
    }
    const text = summarizeRuns(runs, session.capabilities.context.maxRecommendedHandoffChars);
    const lastTarget = runs.at(-1)?.providerTarget ?? null;
    this.host.commit({
      type: "handoff.created",
      threadId,
      handoffId: this.host.ids.next("hnd"),
      fromTarget: lastTarget === this.id ? null : lastTarget,
      toTarget: this.id,
      reason,
      strategy: "full_thread_summary",
      coveredRunOrdinals: runs.map((r) => r.ordinal),
      text,
    });
    return { kind: reason === "resume_failed" ? "rebuild" : "handoff", text, delivery };
  }
}
