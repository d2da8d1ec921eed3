import { createActor, type Actor, type InspectionEvent } from "xstate";
import type { MachineEmitted } from "../machines/emitted.js";
import { providerThreadMachine } from "../machines/providerThread.js";
import { requestMachine, type RequestContext } from "../machines/request.js";
import { runMachine, type RunInput } from "../machines/run.js";
import { sessionMachine, type SessionInput } from "../machines/session.js";
import { threadMachine, type ThreadInput } from "../machines/thread.js";

export type RunActor = Actor<typeof runMachine>;
export type ThreadActor = Actor<typeof threadMachine>;
export type RequestActor = Actor<typeof requestMachine>;
export type SessionActor = Actor<typeof sessionMachine>;
export type ProviderThreadActor = Actor<typeof providerThreadMachine>;

/**
 * The live actors, by app id. Every actor is started with the same emit handler (so its
 * records, effects and outcomes reach the runtime) and the same inspection hook.
 */
export class Actors {
  readonly threads = new Map<string, ThreadActor>();
  readonly runs = new Map<string, RunActor>();
  /** Read freely; a request is forgotten through `forgetRequest` (it keeps the by-run index in step). */
  readonly requests = new Map<string, RequestActor>();
  /** Each run's live requests, in the order they opened: a run's end reads its own, never every run's. */
  readonly #requestsByRun = new Map<string, Set<string>>();
  readonly sessions = new Map<string, SessionActor>();
  readonly providerThreads = new Map<string, ProviderThreadActor>();

  constructor(
    private readonly onEmitted: (emitted: MachineEmitted) => void,
    private readonly inspect: ((event: InspectionEvent) => void) | undefined,
  ) {}

  #start<T extends Actor<any>>(actor: T): T {
    actor.on("*", (emitted: unknown) => this.onEmitted(emitted as MachineEmitted));
    actor.start();
    return actor;
  }

  #options<I>(id: string, input: I) {
    return { id, input, ...(this.inspect ? { inspect: this.inspect } : {}) };
  }

  thread(input: ThreadInput): ThreadActor {
    const actor = this.#start(createActor(threadMachine, this.#options(input.threadId, input)));
    this.threads.set(input.threadId, actor);
    return actor;
  }

  run(input: RunInput): RunActor {
    const actor = this.#start(createActor(runMachine, this.#options(input.runId, input)));
    this.runs.set(input.runId, actor);
    return actor;
  }

  request(input: Omit<RequestContext, "response">): RequestActor {
    const actor = this.#start(createActor(requestMachine, this.#options(input.requestId, input)));
    this.requests.set(input.requestId, actor);
    const ofRun = this.#requestsByRun.get(input.runId);
    if (ofRun) ofRun.add(input.requestId);
    else this.#requestsByRun.set(input.runId, new Set([input.requestId]));
    return actor;
  }

  /** The run's live request actors, in the order they opened (a copy: telling one may forget it). */
  requestsOfRun(runId: string): RequestActor[] {
    const ofRun = this.#requestsByRun.get(runId);
    if (!ofRun) return [];
    return [...ofRun].flatMap((requestId) => this.requests.get(requestId) ?? []);
  }

  forgetRequest(requestId: string): void {
    const actor = this.requests.get(requestId);
    if (!actor) return;
    this.requests.delete(requestId);
    const runId = actor.getSnapshot().context.runId;
    const ofRun = this.#requestsByRun.get(runId);
    ofRun?.delete(requestId);
    if (ofRun?.size === 0) this.#requestsByRun.delete(runId);
  }

  /** A session, started with its target's provider calls (`logic` is the session machine with them provided). */
  session(input: SessionInput, logic: typeof sessionMachine = sessionMachine): SessionActor {
    const actor = this.#start(createActor(logic, this.#options(input.sessionId, input)));
    this.sessions.set(input.sessionId, actor);
    // A session that ended (stopped, failed, or stopped at close) is let go: a long-lived runtime
    // starts many (the log and the read model keep what they were).
    actor.subscribe({
      complete: () => void (this.sessions.get(input.sessionId) === actor && this.sessions.delete(input.sessionId)),
    });
    return actor;
  }

  /** The actor of an app thread's provider thread on a target, spawned on first use. */
  providerThread(appThreadId: string, providerTarget: string): ProviderThreadActor {
    const key = Actors.providerThreadKey(appThreadId, providerTarget);
    let actor = this.providerThreads.get(key);
    if (!actor) {
      actor = this.#start(createActor(providerThreadMachine, this.#options(key, { appThreadId, providerTarget })));
      this.providerThreads.set(key, actor);
    }
    return actor;
  }

  /** The provider-thread actor's id: one per app thread and target. */
  static providerThreadKey(appThreadId: string, providerTarget: string): string {
    return `${providerTarget}/${appThreadId}`;
  }

  /** Sends only to an actor that is still running (a finished machine ignores events noisily). */
  static sendIfActive<T extends Actor<any>>(actor: T | undefined, event: Parameters<T["send"]>[0]): void {
    if (actor?.getSnapshot().status === "active") actor.send(event);
  }
}
