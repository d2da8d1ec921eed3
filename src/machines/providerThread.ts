import { assign, enqueueActions, setup } from "xstate";
import { canForkNatively, createsEmptyThreads, type ProviderCapabilities } from "../capabilities/index.js";
import type { ProviderThreadHandle } from "../adapters/contract.js";
import type { DomainEventOf } from "../domain/events.js";
import { policyApplied, record, type MachineEmitted } from "./emitted.js";

/**
 * An app thread's provider thread on one target. Each time a turn needs it in a session, the
 * machine decides how it is loaded, as guarded transitions reading the capability record and
 * the thread's situation: resumed from its cursor, forked natively, created, refreshed with a
 * full handoff (a returning provider that takes no delta), realigned after a divergent
 * rollback, replaced when the provider reported it broken, rebuilt when a resume fails. The
 * target performs the provider call each loading state names (`meta.call`) and reports it
 * back; the machine records the binding. A session loss, a divergence or a fallen-behind copy
 * unloads it, so the next turn decides again.
 */

/** What a fork's first run needs to be realised natively (invariant 9). */
export interface ForkSituation {
  capabilities: ProviderCapabilities;
  /** The fork point is inside the parent's history (not its latest run). */
  fromInside: boolean;
  /** This provider holds a faithful copy of the parent up to the fork point. */
  parentRanHere: boolean;
  /** The adapter implements forkThread. */
  adapterForks: boolean;
  /** A point inside the thread needs the native turn id of the fork point. */
  hasForkPointRef: boolean;
  /** Why a portable fork, when it is one. */
  why: string;
  /** `threads.canForkFromTurn` or `threads.canForkThread`. */
  capability: string;
  /** The parent's provider thread on this target, if it has one. */
  parentProviderThreadId: string | null;
  /** How many runs of history the fork carries. */
  runCount: number;
  /** A fork of a subagent's child thread (its parent here is that thread). */
  fromSubagent?: boolean;
}

/**
 * A subagent's child thread forks natively where it is addressable, outlives its subagent as a conversation of its
 * own (`subagents.canForkSubagentThread`), and the provider's fork takes it as a source
 * (`threads.canForkFromSubagentThread`).
 */
export const forksSubagentThreads = (c: ProviderCapabilities): boolean =>
  c.subagents.exposesSubagentThreadIds && c.subagents.canForkSubagentThread && c.threads.canForkFromSubagentThread;

/** A native fork: the parent ran here, the provider forks from this point, and the point has a native turn id. */
export const forksNatively = (
  s: Pick<
    ForkSituation,
    "capabilities" | "fromInside" | "parentRanHere" | "adapterForks" | "hasForkPointRef" | "fromSubagent"
  >,
): boolean =>
  s.parentRanHere &&
  s.adapterForks &&
  canForkNatively(s.capabilities, s.fromInside) &&
  (!s.fromInside || s.hasForkPointRef) &&
  (!s.fromSubagent || forksSubagentThreads(s.capabilities));

export interface LoadSituation {
  sessionId: string;
  /** The record of the session the thread is loaded in. */
  capabilities: ProviderCapabilities;
  /** The provider thread stored for this app thread on this target, if any. */
  stored: { providerThreadId: string; resumeCursor: string } | null;
  /** A rollback could not reach the provider: the stored thread holds turns the app rolled back. */
  divergent: boolean;
  /** Runs happened elsewhere since the stored thread last took part. */
  missedRuns: boolean;
  /** The provider reported this app thread's last provider thread broken. */
  hadBroken: boolean;
  /** The app thread is a fork whose first run is still to be realised. */
  fork: (ForkSituation & { transferId: string }) | null;
}

export interface ProviderThreadContext {
  appThreadId: string;
  providerTarget: string;
  situation: LoadSituation | null;
  providerThreadId: string | null;
  sessionId: string | null;
  handle: ProviderThreadHandle | null;
  /** Why a native fork fell back to a portable one. */
  forkFailure: string | null;
}

export type ProviderThreadEvent =
  | { type: "LOAD"; situation: LoadSituation }
  /** The provider call of the loading state succeeded: `providerThreadId` is new unless the thread was resumed. */
  | { type: "BOUND"; providerThreadId: string; handle: ProviderThreadHandle; cwd: string }
  /** The stored thread could not be resumed (the provider said `resume_failed`). */
  | { type: "RESUME_FAILED"; message: string }
  | { type: "FORK_FAILED"; message: string }
  /** Any other failure: nothing is bound, the caller gets the error. */
  | { type: "LOAD_FAILED" }
  /** Recovery: the thread's turn outlived the runtime in this session, which the provider still holds. */
  | { type: "REATTACHED"; providerThreadId: string; sessionId: string; handle: ProviderThreadHandle }
  | { type: "TURN_BEGAN" }
  | { type: "TURN_ENDED" }
  /** Its session died, it fell behind another target, or it diverged: the next turn decides again. */
  | { type: "UNLOAD" };

type Via = DomainEventOf<"provider_thread.bound">["via"];
/** `withTurn`: no call now; the thread is made with the next turn, which binds it (no empty threads). */
type Call = "resume" | "create" | "fork" | "withTurn";

const situationOf = (context: ProviderThreadContext): LoadSituation => context.situation!;
/** A state waiting on the provider call it names; the call's success binds the thread as `via`. */
const loading = (call: Call, via: Via, failures: Record<string, unknown> = {}) => ({
  meta: { call, via },
  on: {
    BOUND: { target: "#providerThread.loaded", actions: [{ type: "recordBound" as const, params: { via } }] },
    LOAD_FAILED: { target: "#providerThread.unloaded" },
    ...failures,
  },
});

/**
 * A new provider thread: asked for now where the provider makes empty threads, else made by the
 * next turn (a named degradation), which binds it once the provider names it.
 */
const creating = (via: Via) => ({
  initial: "choosing" as const,
  states: {
    choosing: {
      always: [
        { guard: "createsWithFirstTurn" as const, target: "withFirstTurn", actions: "recordCreatedWithTurn" as const },
        { target: "calling" },
      ],
    },
    calling: loading("create", via),
    withFirstTurn: loading("withTurn", via),
  },
});

export const providerThreadMachine = setup({
  types: {
    context: {} as ProviderThreadContext,
    events: {} as ProviderThreadEvent,
    input: {} as { appThreadId: string; providerTarget: string },
    emitted: {} as MachineEmitted,
  },
  guards: {
    isDivergent: ({ context }) => situationOf(context).divergent,
    hasThread: ({ context }) => situationOf(context).stored !== null,
    missedRuns: ({ context }) => situationOf(context).missedRuns,
    supportsDeltaHandoff: ({ context }) => situationOf(context).capabilities.context.supportsDeltaHandoff,
    pendingFork: ({ context }) => situationOf(context).fork !== null,
    forksNatively: ({ context }) => forksNatively(situationOf(context).fork!),
    hadBroken: ({ context }) => situationOf(context).hadBroken,
    createsWithFirstTurn: ({ context }) => !createsEmptyThreads(situationOf(context).capabilities),
  },
  actions: {
    takeSituation: assign({
      situation: ({ event }) => (event.type === "LOAD" ? event.situation : null),
      forkFailure: null,
    }),
    recordBound: enqueueActions(({ context, event, enqueue }, params: { via: Via }) => {
      if (event.type !== "BOUND") return;
      const { sessionId } = situationOf(context);
      enqueue.assign({ providerThreadId: event.providerThreadId, sessionId, handle: event.handle });
      enqueue.emit(
        record({
          type: "provider_thread.bound",
          threadId: context.appThreadId,
          providerThreadId: event.providerThreadId,
          providerTarget: context.providerTarget,
          sessionId,
          nativeThreadRef: event.handle.threadRef,
          resumeCursor: event.handle.resumeCursor,
          via: params.via,
        }),
      );
    }),
    recordCreatedWithTurn: enqueueActions(({ context, enqueue }) => {
      const detail = `${context.providerTarget} makes no empty threads: the next turn makes its provider thread`;
      enqueue.emit(
        policyApplied({ threadId: context.appThreadId, runId: null }, "thread_created_with_first_turn", detail),
      );
    }),
    recordRefresh: enqueueActions(({ context, enqueue }) => {
      const detail =
        `provider thread ${situationOf(context).stored!.providerThreadId} missed runs ` +
        "and the provider takes no delta handoff; a fresh provider thread gets a full summary";
      enqueue.emit(policyApplied({ threadId: context.appThreadId, runId: null }, "handoff_fresh_thread", detail));
    }),
    recordRealign: enqueueActions(({ context, enqueue }) => {
      const detail =
        `provider thread ${situationOf(context).stored?.providerThreadId ?? "(none)"} diverged from the app ` +
        "after a rollback; a fresh provider thread gets the app's history";
      enqueue.emit(policyApplied({ threadId: context.appThreadId, runId: null }, "divergent_thread_rebuilt", detail));
    }),
    recordResumeFailed: enqueueActions(({ context, event, enqueue }) => {
      if (event.type !== "RESUME_FAILED") return;
      const message = `provider thread could not be resumed (${event.message}); rebuilding it from app context`;
      enqueue.emit(record({ type: "warning", threadId: context.appThreadId, runId: null, message }));
    }),
    noteForkFailure: assign({
      forkFailure: ({ event }) => (event.type === "FORK_FAILED" ? `native fork failed (${event.message})` : null),
    }),
    recordForkNative: enqueueActions(({ context, enqueue }) => {
      const fork = situationOf(context).fork!;
      const detail = `forked provider thread ${fork.parentProviderThreadId}`;
      enqueue.emit(
        record({
          type: "fork.resolved",
          threadId: context.appThreadId,
          transferId: fork.transferId,
          resolution: "native",
          detail,
        }),
      );
    }),
    recordForkPortable: enqueueActions(({ context, enqueue }) => {
      const fork = situationOf(context).fork!;
      const why = context.forkFailure ?? fork.why;
      const where = { threadId: context.appThreadId, runId: null };
      enqueue.emit(
        policyApplied(
          where,
          fork.fromSubagent ? "subagent_fork_synthetic" : "synthetic_fork",
          `${why}; portable context from ${fork.runCount} runs, lower fidelity`,
          fork.capability,
        ),
      );
      enqueue.emit(
        record({
          type: "fork.resolved",
          threadId: context.appThreadId,
          transferId: fork.transferId,
          resolution: "portable",
          detail: why,
        }),
      );
    }),
    forgetSession: assign({ sessionId: null, handle: null }),
    takeReattached: assign(({ event }) =>
      event.type === "REATTACHED"
        ? { providerThreadId: event.providerThreadId, sessionId: event.sessionId, handle: event.handle }
        : {},
    ),
  },
}).createMachine({
  id: "providerThread",
  context: ({ input }) => ({
    ...input,
    situation: null,
    providerThreadId: null,
    sessionId: null,
    handle: null,
    forkFailure: null,
  }),
  initial: "unloaded",
  states: {
    /** Not loaded in any live session: the next turn decides how. */
    unloaded: {
      on: {
        LOAD: { target: "deciding", actions: "takeSituation" },
        REATTACHED: { target: "loaded.active", actions: "takeReattached" },
      },
    },
    deciding: {
      always: [
        { guard: "isDivergent", target: "realigning", actions: "recordRealign" },
        { guard: "hasThread", target: "returning" },
        { guard: "pendingFork", target: "forking" },
        { guard: "hadBroken", target: "replacing" },
        { target: "creating" },
      ],
    },
    returning: {
      always: [{ guard: "missedRuns", target: "catchingUp" }, { target: "resuming" }],
    },
    /** It missed runs: resumed with a delta of them, or (no delta handoff) a fresh thread told the whole history. */
    catchingUp: {
      always: [
        { guard: "supportsDeltaHandoff", target: "resuming" },
        { target: "refreshing", actions: "recordRefresh" },
      ],
    },
    forking: {
      always: [
        { guard: "forksNatively", target: "forkingNatively" },
        { target: "forkingPortably", actions: "recordForkPortable" },
      ],
    },
    resuming: loading("resume", "resumed", { RESUME_FAILED: { target: "rebuilding", actions: "recordResumeFailed" } }),
    rebuilding: creating("rebuilt"),
    refreshing: creating("refreshed"),
    realigning: creating("realigned"),
    replacing: creating("replaced"),
    creating: creating("created"),
    forkingNatively: {
      meta: { call: "fork", via: "forked" },
      on: {
        BOUND: { target: "loaded", actions: ["recordForkNative", { type: "recordBound", params: { via: "forked" } }] },
        FORK_FAILED: { target: "forkingPortably", actions: ["noteForkFailure", "recordForkPortable"] },
        LOAD_FAILED: { target: "unloaded" },
      },
    },
    /** A fork realised from app context on a new provider thread (lower fidelity). */
    forkingPortably: creating("created"),
    loaded: {
      initial: "idle",
      states: {
        idle: { on: { TURN_BEGAN: "active" } },
        active: { on: { TURN_ENDED: "idle" } },
      },
      on: {
        // Loaded in a session that is gone, or behind: decided again for the new session.
        LOAD: { target: "deciding", actions: "takeSituation" },
        UNLOAD: { target: "unloaded", actions: "forgetSession" },
      },
    },
  },
});

/** The provider call a loading state asks for, and the binding it records; null when the machine is not loading. */
export function pendingCall(snapshot: { getMeta(): Record<string, unknown> }): { call: Call; via: Via } | null {
  const meta = Object.values(snapshot.getMeta()).find(
    (m): m is { call: Call; via: Via } => !!m && typeof m === "object" && "call" in m,
  );
  return meta ?? null;
}
