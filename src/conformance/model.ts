import { and, setup, type AnyStateMachine } from "xstate";
import { getShortestPaths } from "xstate/graph";
import type { ProviderCapabilities } from "../index.js";
import { sessionAnsweredEvents, sessionGuards, sessionHoldingEvents, sessionStates } from "./sessions.js";
import { subagentGuards, subagentIdleEvents, subagentStates } from "./subagents.js";
import { switchingAnsweredEvents, switchingGuards, switchingStates } from "./switching.js";
import { toolIdleEvents, toolStates } from "./tools.js";
import type { ApprovalKind, BehaviourKind } from "./world.js";

/**
 * The conformance model: what the capability seed (`provider-capability-system.md`) says a user sees of a provider
 * that declares a record, as a state machine whose guards read the declared record. It is written from the seed, not
 * from the runtime: a model that imported the runtime's predicates could not catch them.
 *
 * Events are what a user (or the world) does: send a turn of some behaviour, steer, interrupt, queue, fork, roll back,
 * restart the runtime. A transition's guard picks the state the seed promises for the record: native steering where
 * the provider steers, the `steer_by_interrupt_restart` degradation where it only interrupts, a typed refusal where it
 * does neither. Every state names the fields it exercises (`meta.fields`): its check (`checks.ts`) gives each of them
 * a finding, and a path that fails before its check refutes them.
 */

export interface ModelContext {
  caps: ProviderCapabilities;
  scripts: ReadonlySet<BehaviourKind>;
}

export const APPROVAL_KINDS = ["command", "file_change", "file_read", "apply_patch"] as const satisfies ApprovalKind[];
const approvalField = {
  command: "approvals.supportsCommandApproval",
  file_change: "approvals.supportsFileChangeApproval",
  file_read: "approvals.supportsFileReadApproval",
  apply_patch: "approvals.supportsApplyPatchApproval",
} as const satisfies Record<ApprovalKind, string>;
export const APPROVAL_FIELD: Readonly<Record<ApprovalKind, string>> = approvalField;

/** Structured artifacts a turn can produce, with the field that promises each. */
export const ARTIFACTS = {
  plan: "planning.emitsPlanUpdated",
  todo: "planning.emitsTodoList",
  proposed_plan: "planning.emitsProposedPlan",
  question: "planning.supportsStructuredQuestions",
} as const;
export type ArtifactKind = keyof typeof ARTIFACTS;

type Args = { context: ModelContext };
const field = (path: string) => (c: ProviderCapabilities) => {
  const [group, name] = path.split(".") as [keyof ProviderCapabilities, string];
  return (c[group] as Record<string, unknown>)[name] === true;
};

const guards = {
  /** The world can script this behaviour (else the event is never offered: its fields are not exercisable). */
  scripts: ({ context }: Args, { kind }: { kind: string }) => context.scripts.has(kind as BehaviourKind),
  asks: ({ context }: Args, { kind }: { kind: string }) => field(APPROVAL_FIELD[kind as ApprovalKind])(context.caps),
  emits: ({ context }: Args, { kind }: { kind: string }) => field(ARTIFACTS[kind as ArtifactKind])(context.caps),
  /** `supportsActiveSteering`: the provider modifies the in-flight turn. */
  steersNatively: ({ context }: Args) => context.caps.turns.supportsActiveSteering,
  /** The seed: steering by interrupt-restart needs interruption and the declared degradation. */
  steersByRestart: ({ context }: Args) =>
    context.caps.turns.supportsSteeringByInterruptRestart && context.caps.turns.supportsInterrupt,
  interrupts: ({ context }: Args) => context.caps.turns.supportsInterrupt,
  queuesNatively: ({ context }: Args) => context.caps.turns.supportsQueuedMessages,
  forksNatively: ({ context }: Args) => context.caps.threads.canForkThread,
  /** A fork before the latest turn: native only where the provider forks from a turn. */
  forksFromTurnNatively: ({ context }: Args) =>
    context.caps.threads.canForkThread && context.caps.threads.canForkFromTurn,
  /** The seed names both: the thread can be rolled back and the provider rolls its conversation back. */
  rollsBack: ({ context }: Args) =>
    context.caps.threads.canRollbackThread && context.caps.checkpointing.providerCanRollbackConversation,
  /**
   * A fresh provider thread can be told the whole conversation (a synthetic fork, a rebuilt divergent thread): the
   * provider continues from a summary, takes a whole-conversation one, and accepts explicit context some way.
   */
  tellsConversation: ({ context }: Args) => {
    const c = context.caps.context;
    const delivered = c.acceptsSystemContext || c.acceptsDeveloperContext || c.acceptsSyntheticUserContext;
    return c.canConsumeHandoffSummaries && c.supportsFullThreadHandoff && delivered;
  },
  ...Object.fromEntries(
    Object.entries({ ...subagentGuards, ...sessionGuards, ...switchingGuards }).map(([name, guard]) => [
      name,
      ({ context }: Args) => guard(context.caps),
    ]),
  ),
  /** Rollback unsupported: restore files and mark the provider state divergent, when the app checkpoints files. */
  restoresFiles: ({ context }: Args) => context.caps.checkpointing.appCanCheckpointFilesystem,
  hasMcpTools: ({ context }: Args) => context.caps.tools.supportsMcpTools,
  callsBack: ({ context }: Args) => context.caps.tools.supportsDynamicToolCallbacks,
  readsSnapshots: ({ context }: Args) => context.caps.threads.canReadThreadSnapshot,
  requestsSurvive: ({ context }: Args) => context.caps.sessions.pendingRequestsSurviveRestart,
};

const fields = (...names: string[]) => ({ fields: names });
/** A state the seed reaches by a typed refusal of the step's command (the only steps a refusal does not fail). */
const refused = (...names: string[]) => ({ fields: names, refusal: true });
const STEER = ["turns.supportsActiveSteering", "turns.supportsSteeringByInterruptRestart"];
const INTERRUPT = ["turns.supportsInterrupt"];
const QUEUE = ["turns.supportsQueuedMessages"];
const FORK = ["threads.canForkThread"];
const FORK_TURN = ["threads.canForkThread", "threads.canForkFromTurn"];
const ROLLBACK = ["threads.canRollbackThread", "checkpointing.providerCanRollbackConversation"];
const ROLLBACK_SNAPSHOT = "checkpointing.providerRollbackReturnsSnapshot";
const SNAPSHOT = ["threads.canReadThreadSnapshot", "checkpointing.providerCanReadConversationSnapshot"];
const PLAN_IDS = "planning.planDeltasHaveItemIds";
const PLAN_STREAM = ["streaming.streamsPlanText", PLAN_IDS];
const ACROSS_RESTART = ["sessions.pendingRequestsSurviveRestart", "approvals.approvalCallbacksAreLiveOnly"];
/** What telling a fresh provider thread the whole conversation exercises. */
const TOLD = [
  "context.canConsumeHandoffSummaries",
  "context.supportsFullThreadHandoff",
  "context.canGenerateSummaries",
  "context.acceptsSystemContext",
  "context.acceptsDeveloperContext",
  "context.acceptsSyntheticUserContext",
];
const TEXT_TURN = [
  "turns.emitsTurnStarted",
  "turns.emitsTurnCompleted",
  "turns.terminalStatusQuality",
  "turns.exposesNativeTurnId",
  "threads.exposesNativeThreadId",
  "threads.canCreateEmptyThread",
  "streaming.streamsAssistantText",
  "streaming.emitsMessageCompleted",
  "identity.nativeThreadIds",
  "identity.nativeTurnIds",
  "identity.nativeItemIds",
];

function approvalStates() {
  const states: Record<string, object> = {};
  for (const kind of APPROVAL_KINDS) {
    const f = APPROVAL_FIELD[kind];
    states[`asked_${kind}`] = {
      meta: fields(f, "approvals.approvalsHaveNativeRequestIds", "identity.nativeRequestIds"),
      on: {
        ACCEPT: `approved_${kind}`,
        ASK_AGAIN: "askedAgain",
        RESTART_PENDING: [{ guard: "requestsSurvive", target: "requestSurvived" }, { target: "requestLost" }],
      },
    };
    states[`approved_${kind}`] = { type: "final", meta: fields(f) };
    states[`unasked_${kind}`] = { type: "final", meta: fields(f) };
  }
  for (const kind of Object.keys(ARTIFACTS) as ArtifactKind[]) {
    const f = ARTIFACTS[kind];
    const more = kind === "plan" ? PLAN_STREAM : kind === "todo" ? [PLAN_IDS] : [];
    states[`shown_${kind}`] =
      kind === "question"
        ? { meta: fields(f), on: { ANSWER: `answered_${kind}` } }
        : { type: "final", meta: fields(f, ...more) };
    states[`asText_${kind}`] = { type: "final", meta: fields(f) };
  }
  states["answered_question"] = { type: "final", meta: fields(ARTIFACTS.question) };
  // Two requests, one after the other: their native ids name one each.
  states["askedAgain"] = { type: "final", meta: fields("identity.nativeRequestIds") };
  // A runtime restart while a request waits: it is still answerable where the record says requests survive.
  states["requestSurvived"] = { meta: fields(...ACROSS_RESTART), on: { ACCEPT: "survivedAnswered" } };
  states["survivedAnswered"] = { type: "final", meta: fields(...ACROSS_RESTART) };
  states["requestLost"] = { type: "final", meta: fields(...ACROSS_RESTART) };
  return states;
}

function idleEvents() {
  const on: Record<string, unknown> = { TEXT: "answered", HOLD: "holding" };
  for (const kind of APPROVAL_KINDS) {
    const scripts = { type: "scripts", params: { kind: `approval:${kind}` } };
    on[`ASK_${kind}`] = [
      { guard: and([scripts, { type: "asks", params: { kind } }]), target: `asked_${kind}` },
      { guard: scripts, target: `unasked_${kind}` },
    ];
  }
  for (const kind of Object.keys(ARTIFACTS) as ArtifactKind[]) {
    const scripts = { type: "scripts", params: { kind } };
    on[`ARTIFACT_${kind}`] = [
      { guard: and([scripts, { type: "emits", params: { kind } }]), target: `shown_${kind}` },
      { guard: scripts, target: `asText_${kind}` },
    ];
  }
  return { ...on, ...subagentIdleEvents(and as (guards: unknown[]) => unknown), ...toolIdleEvents };
}

export const conformanceMachine: AnyStateMachine = setup({
  types: { context: {} as ModelContext, input: {} as ModelContext },
  guards,
}).createMachine({
  id: "conformance",
  context: ({ input }) => input,
  initial: "idle",
  states: {
    idle: { on: idleEvents() as never },
    answered: {
      meta: fields(...TEXT_TURN),
      on: {
        TEXT: "answeredTwice",
        FORK: [
          { guard: "forksNatively", target: "forkedNative" },
          { guard: "tellsConversation", target: "forkedSynthetic" },
          { target: "forkedUntold" },
        ],
        RESTART: "resumed",
        ...(sessionAnsweredEvents as object),
        ...(switchingAnsweredEvents as object),
      },
    },
    resumed: { type: "final", meta: fields("primitive.resume") },
    forkedNative: { meta: fields(...FORK), on: { FORK_TEXT: "forkNativeAnswered" } },
    forkNativeAnswered: { type: "final", meta: fields(...FORK) },
    forkedSynthetic: { meta: fields(...FORK), on: { FORK_TEXT: "forkSyntheticAnswered" } },
    forkSyntheticAnswered: { type: "final", meta: fields(...FORK, ...TOLD) },
    forkedUntold: { meta: fields(...FORK), on: { FORK_TEXT: "forkRefused" } },
    forkRefused: { type: "final", meta: refused(...FORK, ...TOLD) },
    answeredTwice: {
      on: {
        FORK_EARLIER: [
          { guard: "forksFromTurnNatively", target: "forkedEarlierNative" },
          { guard: "tellsConversation", target: "forkedEarlierSynthetic" },
          { target: "forkedEarlierUntold" },
        ],
        SNAPSHOT: [{ guard: "readsSnapshots", target: "snapshotRead" }],
        ROLLBACK: [
          { guard: "rollsBack", target: "rolledBack" },
          { guard: "restoresFiles", target: "rolledBackDivergent" },
          { target: "rollbackRefused" },
        ],
      },
    },
    forkedEarlierNative: { meta: fields(...FORK_TURN), on: { FORK_TEXT: "forkEarlierNativeAnswered" } },
    forkEarlierNativeAnswered: { type: "final", meta: fields(...FORK_TURN) },
    forkedEarlierSynthetic: { meta: fields(...FORK_TURN), on: { FORK_TEXT: "forkEarlierSyntheticAnswered" } },
    forkEarlierSyntheticAnswered: { type: "final", meta: fields(...FORK_TURN, ...TOLD) },
    forkedEarlierUntold: { meta: fields(...FORK_TURN), on: { FORK_TEXT: "forkEarlierRefused" } },
    forkEarlierRefused: { type: "final", meta: refused(...FORK_TURN, ...TOLD) },
    snapshotRead: { type: "final", meta: fields(...SNAPSHOT) },
    rolledBack: { meta: fields(...ROLLBACK, ROLLBACK_SNAPSHOT), on: { TEXT: "rolledBackAnswered" } },
    rolledBackAnswered: { type: "final", meta: fields(...ROLLBACK, ROLLBACK_SNAPSHOT) },
    rolledBackDivergent: {
      meta: fields(...ROLLBACK),
      on: { TEXT: [{ guard: "tellsConversation", target: "divergentRebuilt" }, { target: "rebuildRefused" }] },
    },
    divergentRebuilt: { type: "final", meta: fields(...ROLLBACK, ...TOLD) },
    rebuildRefused: { type: "final", meta: refused(...ROLLBACK, ...TOLD) },
    rollbackRefused: { type: "final", meta: refused(...ROLLBACK, "checkpointing.appCanCheckpointFilesystem") },
    holding: {
      on: {
        STEER: [
          { guard: "steersNatively", target: "steered" },
          { guard: "steersByRestart", target: "steerRestarted" },
          { target: "steerRefused" },
        ],
        INTERRUPT: [{ guard: "interrupts", target: "interrupted" }, { target: "interruptRefused" }],
        QUEUE: [{ guard: "queuesNatively", target: "queuedAtProvider" }, { target: "queuedByRuntime" }],
        ...(sessionHoldingEvents as object),
      },
    },
    steered: { meta: fields(...STEER), on: { RELEASE: "steeredDone" } },
    steeredDone: { type: "final", meta: fields(...STEER) },
    steerRestarted: { type: "final", meta: fields(...STEER, ...INTERRUPT) },
    steerRefused: { type: "final", meta: refused(...STEER) },
    // An interrupted turn's terminal says so: what a strong terminal promises.
    interrupted: { type: "final", meta: fields(...INTERRUPT, "turns.terminalStatusQuality") },
    interruptRefused: { type: "final", meta: refused(...INTERRUPT) },
    queuedAtProvider: { meta: fields(...QUEUE), on: { RELEASE: "queueDrained" } },
    queuedByRuntime: { meta: fields(...QUEUE), on: { RELEASE: "queueDrained" } },
    queueDrained: { type: "final", meta: fields(...QUEUE) },
    ...approvalStates(),
    ...(subagentStates as Record<string, object>),
    ...(sessionStates as Record<string, object>),
    ...(toolStates as Record<string, object>),
    ...(switchingStates as Record<string, object>),
  },
});

export const MODEL_EVENTS = [
  "TEXT",
  "HOLD",
  "STEER",
  "INTERRUPT",
  "QUEUE",
  "RELEASE",
  "FORK",
  "FORK_EARLIER",
  "FORK_TEXT",
  "ROLLBACK",
  "SNAPSHOT",
  "RESTART",
  "RESTART_PENDING",
  "ASK_AGAIN",
  "ACCEPT",
  "ANSWER",
  ...APPROVAL_KINDS.map((k) => `ASK_${k}`),
  ...Object.keys(ARTIFACTS).map((k) => `ARTIFACT_${k}`),
  "SUBAGENT",
  "ASK_SUBAGENT",
  "WAIT_SUBAGENT",
  "CLOSE_SUBAGENT",
  "FORK_SUBAGENT",
  "SWITCH_MODEL",
  "SWITCH_MODE",
  "OTHER_THREAD",
  "TOOL",
  "MCP_TOOL",
  "CALL_BACK",
  "SWITCH_PROVIDER",
  "SWITCH_BACK",
] as const;

export interface ModelStep {
  event: string;
  /** The state the event leads to (a key of `checks`), and the fields it exercises. */
  state: string;
  fields: string[];
  /** The state is reached by a typed refusal of the step's command. */
  refusal: boolean;
  /**
   * The fields a failure of this step is blamed on when neither its check nor the runtime's evidence names one (the
   * state's `meta.blame`, else its fields).
   */
  blame: string[];
}

/** One generated path: from idle to a final state, the shortest way there. */
export interface ModelPath {
  steps: ModelStep[];
  /** The fields the path exercises (every step's). */
  fields: string[];
  /**
   * A narrowed path: the runtime is shown this record instead of the declared one (less than it claims), so that it
   * takes the way the declared record never lets it take: a delivery of context after the one it prefers, steering by
   * interrupt-restart where native steering is there too. Its steps give findings to `fields` alone.
   */
  narrowed?: ProviderCapabilities;
}

/** The paths the declared record reaches only narrowed: each field, when it applies, the record shown, the end. */
const NARROWINGS: Array<{
  field: string;
  applies: (c: ProviderCapabilities) => boolean;
  narrow: (c: ProviderCapabilities) => ProviderCapabilities;
  end: string;
  /** Fields the narrowing leaves as declared that the path also speaks for. */
  also?: string[];
}> = [
  {
    field: "turns.supportsSteeringByInterruptRestart",
    applies: (c) =>
      c.turns.supportsActiveSteering && c.turns.supportsSteeringByInterruptRestart && c.turns.supportsInterrupt,
    narrow: (c) => ({ ...c, turns: { ...c.turns, supportsActiveSteering: false } }),
    end: "steerRestarted",
    also: ["turns.supportsInterrupt"],
  },
  ...(["acceptsSystemContext", "acceptsDeveloperContext", "acceptsSyntheticUserContext"] as const).map((name) => ({
    field: `context.${name}`,
    applies: (c: ProviderCapabilities) =>
      c.context[name] && c.context.canConsumeHandoffSummaries && c.context.supportsFullThreadHandoff,
    // A synthetic fork, told the conversation the one way left open.
    narrow: (c: ProviderCapabilities): ProviderCapabilities => ({
      ...c,
      threads: { ...c.threads, canForkThread: false, canForkFromTurn: false },
      context: {
        ...c.context,
        acceptsSystemContext: name === "acceptsSystemContext",
        acceptsDeveloperContext: name === "acceptsDeveloperContext",
        acceptsSyntheticUserContext: name === "acceptsSyntheticUserContext",
      },
    }),
    end: "forkSyntheticAnswered",
  })),
];

/** The shortest path to every final state the declared record and the world can reach. */
export function generatePaths(context: ModelContext): ModelPath[] {
  const narrowed = NARROWINGS.filter((n) => n.applies(context.caps)).flatMap((n) => {
    const record = n.narrow(context.caps);
    const path = shortestPaths({ ...context, caps: record }).find((p) => p.steps.at(-1)?.state === n.end);
    if (!path) return [];
    const own = [n.field, ...(n.also ?? [])];
    const steps = path.steps.map((s) => ({ ...s, fields: s.fields.filter((f) => own.includes(f)), blame: [n.field] }));
    return [{ steps, fields: own, narrowed: record }];
  });
  return [...shortestPaths(context), ...narrowed];
}

function shortestPaths(context: ModelContext): ModelPath[] {
  const paths = getShortestPaths(conformanceMachine, {
    input: context,
    events: MODEL_EVENTS.map((type) => ({ type })),
  });
  return paths
    .filter((p) => p.state.status === "done")
    .map((p) => {
      const steps = p.steps
        .filter((s) => !s.event.type.startsWith("xstate."))
        .map((s) => {
          const state = String(s.state.value);
          type Meta = { fields?: string[]; refusal?: true; blame?: string[] } | undefined;
          const meta = s.state.getMeta()[`conformance.${state}`] as Meta;
          const fields = meta?.fields ?? [];
          return { event: s.event.type, state, fields, refusal: meta?.refusal === true, blame: meta?.blame ?? fields };
        });
      return { steps, fields: [...new Set(steps.flatMap((s) => s.fields))] };
    });
}
