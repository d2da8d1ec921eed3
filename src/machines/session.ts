import { assign, emit, enqueueActions, fromPromise, setup } from "xstate";
import {
  canSwitchModeInSession,
  canSwitchModelInSession,
  hasStructuredApprovals,
  sharesSessionAcrossThreads,
  type ProviderCapabilities,
} from "../capabilities/index.js";
import type { DynamicToolDefinition, SandboxPolicy } from "../adapters/contract.js";
import { sameRuntimeMode, type RuntimeMode } from "../domain/entities.js";
import { redact } from "../domain/redact.js";
import { policyApplied, record, type MachineEmitted } from "./emitted.js";

/**
 * A provider session: started by an invoked actor (keyed in `setup({ actors })`, provided by
 * the target), ready with the capability record it announced, running while a turn (or a
 * rollback) uses it, stopped after an idle deadline kept in context, retired when a thread
 * asks for a model or runtime mode this provider cannot switch to in session, lost when the provider says it
 * stopped or failed. The machine holds no live resource: the target's registry listens to
 * what it emits (`ready`, `startFailed`, `stopping`) to keep its handles.
 */

export interface SessionInput {
  sessionId: string;
  providerTarget: string;
  provider: string;
  /** What governs the provider's actions when it asks for no approvals. */
  sandbox: SandboxPolicy;
  cwd: string;
  model: string | null;
  runtimeMode: RuntimeMode;
  /** The record the adapter declares, read until the session announces its own. */
  declared: ProviderCapabilities;
  /** Stop the session after this long without a turn (null: never). */
  idleMs: number | null;
  /** The embedder's registered tools: offered where the record says the provider calls tools back. */
  tools?: DynamicToolDefinition[];
  /** Recovery: a session a previous life of the runtime started, taken up in the host that outlived it. */
  reattach?: boolean;
}

export interface SessionContext extends SessionInput {
  capabilities: ProviderCapabilities | null;
  hostGeneration: number | null;
  /** Turns (and rollbacks) using the session now. */
  claims: number;
  /** When an idle session is stopped (ms since the epoch); null while in use or never. */
  deadline: number | null;
  /** A retirement asked for while the session was starting or in use: it retires once started, or once released. */
  retireRequested: boolean;
  lastError: string | null;
}

export type SessionEvent =
  /** A turn or a rollback is about to use the session. */
  | { type: "CLAIM" }
  | { type: "RELEASE" }
  /** The session's thread asks for a model and mode (per-thread sessions): kept, or retired for another. */
  | { type: "USE_SETTINGS"; model: string | null; runtimeMode: RuntimeMode }
  /** Restored from a persisted snapshot: delays are not persisted, so the idle deadline is armed again. */
  | { type: "RESTORED" }
  /** The provider said the session stopped or failed. */
  | { type: "STOPPED"; message: string | null }
  | { type: "FAILED"; message: string };

/** What the target's registry acts on. */
export type SessionSignal =
  | { type: "ready"; sessionId: string; capabilities: ProviderCapabilities; hostGeneration: number }
  /** The start failed: `error` is the provider's own (typed) error, for the callers waiting on the session. */
  | { type: "startFailed"; sessionId: string; error: unknown }
  | { type: "stopping"; sessionId: string; reason: "idle" | "retired" };

/** What starting a session takes. */
export interface StartSessionInput {
  sessionId: string;
  cwd: string;
  model: string | null;
  runtimeMode: RuntimeMode;
  sandbox: SandboxPolicy;
  tools?: DynamicToolDefinition[];
}

export interface StartedSession {
  capabilities: ProviderCapabilities;
  hostGeneration: number;
}

const now = () => Date.now();
const recordOf = (context: SessionContext): ProviderCapabilities => context.capabilities ?? context.declared;

/** The registered tools a session is told of: none where the record it declares says it calls no tools back. */
function offeredTools(context: SessionContext): { tools?: DynamicToolDefinition[] } {
  const tools = context.tools ?? [];
  return tools.length > 0 && context.declared.tools.supportsDynamicToolCallbacks ? { tools } : {};
}

/**
 * Which registry slot a thread's session lives in: one per target or per thread, and per model
 * and per runtime mode where the provider cannot switch them in session.
 */
export function sessionSlot(
  declared: ProviderCapabilities,
  threadId: string,
  model: string | null,
  runtimeMode: RuntimeMode,
): { owner: string; key: string } {
  const owner = sharesSessionAcrossThreads(declared) ? "" : threadId;
  const byModel = canSwitchModelInSession(declared) ? "" : (model ?? "");
  const byMode = canSwitchModeInSession(declared) ? "" : `${runtimeMode.interaction}/${runtimeMode.approvals}`;
  return { owner, key: [owner, byModel, byMode].join("\u0000") };
}

export const sessionMachine = setup({
  types: {
    context: {} as SessionContext,
    events: {} as SessionEvent,
    input: {} as SessionInput,
    emitted: {} as MachineEmitted | SessionSignal,
  },
  actors: {
    /** Starts the provider session (rejects with the provider's typed error). */
    startSession: fromPromise<StartedSession, StartSessionInput>(async () => {
      throw new Error("startSession is provided by the provider target");
    }),
    /** Takes up a session that outlived the runtime (rejects when the provider no longer holds it). */
    reattachSession: fromPromise<StartedSession, { sessionId: string }>(async () => {
      throw new Error("reattachSession is provided by the provider target");
    }),
    /** Asks the provider to stop the session; the provider's own `stopped` ends it. */
    stopSession: fromPromise<void, { sessionId: string }>(async () => {
      throw new Error("stopSession is provided by the provider target");
    }),
  },
  delays: {
    untilDeadline: ({ context }) => Math.max(0, (context.deadline ?? now()) - now()),
  },
  guards: {
    reattaches: ({ context }) => context.reattach === true,
    isLastClaim: ({ context }) => context.claims <= 1,
    releasesWhenIdle: ({ context }) => context.idleMs !== null,
    retireRequested: ({ context }) => context.retireRequested,
    isLastClaimOfRetiring: ({ context }) => context.retireRequested && context.claims <= 1,
    /**
     * A per-thread session asked for another model or runtime mode that the provider cannot
     * switch to in session: a new session is started for it, this one retires.
     */
    settingsNeedNewSession: ({ context, event }) =>
      event.type === "USE_SETTINGS" &&
      !sharesSessionAcrossThreads(context.declared) &&
      ((event.model !== context.model && !canSwitchModelInSession(recordOf(context))) ||
        (!sameRuntimeMode(event.runtimeMode, context.runtimeMode) && !canSwitchModeInSession(recordOf(context)))),
  },
  actions: {
    recordStarted: enqueueActions(({ context, event, enqueue }) => {
      const started = (event as unknown as { output: StartedSession }).output;
      enqueue.assign({ capabilities: started.capabilities, hostGeneration: started.hostGeneration });
      const { sessionId, providerTarget, provider } = context;
      enqueue.emit(
        record({
          type: "session.started",
          sessionId,
          providerTarget,
          provider,
          hostGeneration: started.hostGeneration,
          capabilities: started.capabilities,
        }),
      );
    }),
    /** The log has its start and its degradations: only that it is ready again, and in which host generation. */
    recordReattached: enqueueActions(({ context, event, enqueue }) => {
      const started = (event as unknown as { output: StartedSession }).output;
      enqueue.assign({ capabilities: started.capabilities, hostGeneration: started.hostGeneration });
      const { sessionId, providerTarget } = context;
      const message = `re-attached after a runtime restart (host generation ${started.hostGeneration})`;
      enqueue.emit(record({ type: "session.state", sessionId, providerTarget, status: "ready", message }));
    }),
    /** Session-wide degradations, announced once with the capability record they follow from. */
    recordSessionPolicies: enqueueActions(({ context, event, enqueue }) => {
      const caps = (event as unknown as { output: StartedSession }).output.capabilities;
      const where = { threadId: null, runId: null };
      const session = `session ${context.sessionId} (${context.providerTarget})`;
      if (!hasStructuredApprovals(caps)) {
        enqueue.emit(
          policyApplied(
            where,
            "approvals_by_sandbox",
            `${session} asks for no approvals: it runs under the ${context.sandbox} sandbox policy`,
          ),
        );
      }
      if (!caps.planning.emitsPlanUpdated)
        enqueue.emit(policyApplied(where, "no_plan_artifacts", `${session} emits no plan updates`));
      if (!caps.planning.emitsTodoList)
        enqueue.emit(policyApplied(where, "no_todo_artifacts", `${session} emits no todo lists`));
      if (!caps.planning.emitsProposedPlan)
        enqueue.emit(policyApplied(where, "no_proposed_plans", `${session} proposes no plans to accept`));
      if (!caps.planning.supportsStructuredQuestions)
        enqueue.emit(policyApplied(where, "questions_as_text", `${session} asks its questions in text`));
      const tools = context.tools ?? [];
      if (tools.length > 0 && !caps.tools.supportsDynamicToolCallbacks) {
        const names = tools.map((t) => t.name).join(", ");
        enqueue.emit(
          policyApplied(where, "dynamic_tools_unsupported", `${session} calls no tools back: not offered ${names}`),
        );
      }
    }),
    announceReady: emit(({ context }) => ({
      type: "ready" as const,
      sessionId: context.sessionId,
      capabilities: context.capabilities!,
      hostGeneration: context.hostGeneration!,
    })),
    announceStartFailed: enqueueActions(({ context, event, enqueue }) => {
      const error = (event as unknown as { error: unknown }).error;
      const message = redact(error instanceof Error ? error.message : String(error));
      enqueue.assign({ lastError: message });
      enqueue.emit({ type: "startFailed", sessionId: context.sessionId, error });
      const { sessionId, providerTarget } = context;
      enqueue.emit(record({ type: "session.state", sessionId, providerTarget, status: "error", message }));
    }),
    announceStopping: emit(({ context }, params: { reason: "idle" | "retired" }) => ({
      type: "stopping" as const,
      sessionId: context.sessionId,
      reason: params.reason,
    })),
    recordStatus: enqueueActions(
      ({ context, event, enqueue }, params: { status: "ready" | "running" | "stopped" | "error" }) => {
        const message = "message" in event ? event.message : null;
        if (params.status === "error") enqueue.assign({ lastError: message });
        const { sessionId, providerTarget } = context;
        enqueue.emit(record({ type: "session.state", sessionId, providerTarget, status: params.status, message }));
      },
    ),
    claim: assign({ claims: ({ context }) => context.claims + 1, deadline: null }),
    release: assign({ claims: ({ context }) => Math.max(0, context.claims - 1) }),
    armIdleDeadline: assign({ deadline: ({ context }) => now() + (context.idleMs ?? 0) }),
    askToRetire: assign({ retireRequested: true }),
  },
}).createMachine({
  id: "session",
  context: ({ input }) => ({
    ...input,
    capabilities: null,
    hostGeneration: null,
    claims: 0,
    deadline: null,
    retireRequested: false,
    lastError: null,
  }),
  initial: "opening",
  states: {
    opening: { always: [{ guard: "reattaches", target: "reattaching" }, { target: "starting" }] },
    /** Recovery: the provider still holds the session in a host that outlived the runtime. */
    reattaching: {
      invoke: {
        src: "reattachSession",
        input: ({ context }) => ({ sessionId: context.sessionId }),
        onDone: { target: "ready", actions: ["recordReattached", "announceReady"] },
        onError: { target: "error", actions: "announceStartFailed" },
      },
    },
    starting: {
      invoke: {
        src: "startSession",
        input: ({ context }) => ({
          sessionId: context.sessionId,
          cwd: context.cwd,
          model: context.model,
          runtimeMode: context.runtimeMode,
          sandbox: context.sandbox,
          ...offeredTools(context),
        }),
        onDone: [
          {
            guard: "retireRequested",
            target: "retiring",
            actions: ["recordStarted", "recordSessionPolicies", "announceReady"],
          },
          { target: "ready", actions: ["recordStarted", "recordSessionPolicies", "announceReady"] },
        ],
        onError: { target: "error", actions: "announceStartFailed" },
      },
      on: {
        USE_SETTINGS: { guard: "settingsNeedNewSession", actions: "askToRetire" },
      },
    },
    /** Started, no turn: stopped once the idle deadline passes, unless claimed first. */
    ready: {
      initial: "deciding",
      states: {
        deciding: {
          always: [
            { guard: "releasesWhenIdle", target: "countingDown", actions: "armIdleDeadline" },
            { target: "held" },
          ],
        },
        held: {},
        countingDown: {
          after: { untilDeadline: { target: "#session.idleStopping" } },
        },
      },
      on: {
        CLAIM: { target: "running", actions: ["claim", { type: "recordStatus", params: { status: "running" } }] },
        USE_SETTINGS: { guard: "settingsNeedNewSession", target: "retiring" },
        RESTORED: { guard: "releasesWhenIdle", target: ".countingDown", reenter: true },
      },
    },
    running: {
      on: {
        CLAIM: { actions: "claim" },
        RELEASE: [
          // The turn using it finishes first; the thread's next turn already has its new session.
          { guard: "isLastClaimOfRetiring", target: "retiring", actions: "release" },
          {
            guard: "isLastClaim",
            target: "ready",
            actions: ["release", { type: "recordStatus", params: { status: "ready" } }],
          },
          { actions: "release" },
        ],
        USE_SETTINGS: { guard: "settingsNeedNewSession", actions: "askToRetire" },
      },
    },
    /**
     * Idle past its deadline: its host lease is given back; the next turn starts a new session and resumes its threads.
     */
    idleStopping: {
      entry: { type: "announceStopping", params: { reason: "idle" } },
      invoke: { src: "stopSession", input: ({ context }) => ({ sessionId: context.sessionId }), onError: {} },
    },
    /** Replaced by a session for another model or runtime mode. */
    retiring: {
      entry: { type: "announceStopping", params: { reason: "retired" } },
      invoke: { src: "stopSession", input: ({ context }) => ({ sessionId: context.sessionId }), onError: {} },
    },
    stopped: { type: "final" },
    error: { type: "final" },
  },
  on: {
    STOPPED: { target: ".stopped", actions: { type: "recordStatus", params: { status: "stopped" } } },
    FAILED: { target: ".error", actions: { type: "recordStatus", params: { status: "error" } } },
  },
});
