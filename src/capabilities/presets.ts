import {
  CAPABILITY_RECORD_VERSION,
  parseCapabilities,
  type CapabilityGroup,
  type ProviderCapabilities,
} from "./schema.js";

/** Per-group partial overrides: `{ turns: { supportsActiveSteering: false } }`. */
export type CapabilityOverrides = {
  [G in CapabilityGroup]?: Partial<ProviderCapabilities[G]>;
};

/** A field's type once an override's is set over a base's (an override that may be unset keeps the base's too). */
type Overridden<Base, Value> = undefined extends Value ? Base | Exclude<Value, undefined> : Value;

/** A group's type with the fields its overrides set (a group that may be unset keeps every field's base type too). */
type GroupWith<Base, Group> = {
  [F in keyof Base]: F extends keyof NonNullable<Group>
    ? Overridden<Base[F], undefined extends Group ? NonNullable<Group>[F] | undefined : NonNullable<Group>[F]>
    : Base[F];
};

/**
 * The record type `defineCapabilities(overrides, base)` returns: `B` with the fields `O` sets. Where the overrides are
 * a literal (`defineCapabilities` takes them as a `const` type parameter), a field they set is its literal (`true`,
 * `false`), so an adapter declaring the record must serve what it claims (`defineAdapter`); a field they may leave
 * unset keeps the base's type as well.
 */
export type WithOverrides<B extends ProviderCapabilities, O extends CapabilityOverrides> = {
  [G in keyof B]: G extends keyof O ? GroupWith<B[G], O[G]> : B[G];
};

/**
 * Overrides (or a full record) naming only the record's fields: an excess field below a `const` type parameter's top
 * level is not refused by the compiler, so it is typed `never` here (and refused, typed, by `parseCapabilities`).
 */
export type KnownFields<O> = {
  [G in keyof O]: G extends CapabilityGroup ? KnownGroup<O[G], G> : G extends "version" ? O[G] : never;
};

type KnownGroup<V, G extends CapabilityGroup> = V extends object
  ? { [F in keyof V]: F extends keyof ProviderCapabilities[G] ? V[F] : never }
  : V;

/**
 * `fullCapabilities()`'s record type: each field `SERVED_BY` links to a method (kit/defineAdapter.ts) is literal, so
 * an adapter declaring this record (the scripted provider's default) must serve each it claims; the other fields are
 * the schema's.
 */
export type FullCapabilities = WithOverrides<
  ProviderCapabilities,
  {
    sessions: { pendingRequestsSurviveRestart: false };
    threads: { canReadThreadSnapshot: true; canRollbackThread: true; canForkThread: true };
    turns: { supportsActiveSteering: true };
    subagents: { canWaitForSubagents: true; canCloseSubagents: true };
    context: { canGenerateSummaries: true };
  }
>;

/** Everything a provider could offer, with strong identities. */
export function fullCapabilities(): FullCapabilities {
  return {
    version: CAPABILITY_RECORD_VERSION,
    sessions: {
      supportsMultipleProviderThreadsPerSession: true,
      supportsModelSwitchInSession: true,
      supportsProviderSwitchingViaHandoff: true,
      supportsRuntimeModeSwitchInSession: true,
      pendingRequestsSurviveRestart: false,
    },
    threads: {
      canCreateEmptyThread: true,
      canReadThreadSnapshot: true,
      canRollbackThread: true,
      canForkThread: true,
      canForkFromTurn: true,
      canForkFromSubagentThread: true,
      exposesNativeThreadId: true,
    },
    turns: {
      exposesNativeTurnId: true,
      emitsTurnStarted: true,
      emitsTurnCompleted: true,
      supportsInterrupt: true,
      supportsActiveSteering: true,
      supportsSteeringByInterruptRestart: true,
      supportsQueuedMessages: false,
      terminalStatusQuality: "strong",
    },
    streaming: {
      streamsAssistantText: true,
      streamsReasoning: true,
      streamsToolOutput: true,
      streamsPlanText: true,
      emitsMessageCompleted: true,
    },
    tools: {
      exposesToolItemIds: true,
      emitsToolStarted: true,
      emitsToolCompleted: true,
      emitsToolOutput: true,
      supportsMcpTools: false,
      supportsDynamicToolCallbacks: false,
    },
    approvals: {
      supportsCommandApproval: true,
      supportsFileReadApproval: false,
      supportsFileChangeApproval: true,
      supportsApplyPatchApproval: true,
      approvalsHaveNativeRequestIds: true,
      approvalCallbacksAreLiveOnly: true,
      approvalsCanOriginateFromSubagents: true,
    },
    planning: {
      emitsPlanUpdated: true,
      emitsTodoList: true,
      emitsProposedPlan: true,
      supportsStructuredQuestions: true,
      planDeltasHaveItemIds: true,
    },
    subagents: {
      supportsSubagents: true,
      exposesSubagentThreadIds: true,
      emitsSubagentLifecycle: true,
      canWaitForSubagents: true,
      canCloseSubagents: true,
      canForkSubagentThread: true,
    },
    context: {
      acceptsSystemContext: true,
      acceptsDeveloperContext: true,
      acceptsSyntheticUserContext: true,
      canGenerateSummaries: true,
      canConsumeHandoffSummaries: true,
      supportsDeltaHandoff: true,
      supportsFullThreadHandoff: true,
      maxRecommendedHandoffChars: 16_000,
    },
    checkpointing: {
      appCanCheckpointFilesystem: true,
      supportsNestedCheckpointScopes: false,
      providerCanRollbackConversation: true,
      providerRollbackReturnsSnapshot: true,
      providerCanReadConversationSnapshot: true,
    },
    identity: {
      nativeThreadIds: "strong",
      nativeTurnIds: "strong",
      nativeItemIds: "strong",
      nativeRequestIds: "strong",
    },
  };
}

/** A provider that can only run a turn and stream text back: no ids, no control. */
export function minimalCapabilities(): ProviderCapabilities {
  const full: ProviderCapabilities = fullCapabilities();
  const off = <T extends object>(group: T): T =>
    Object.fromEntries(Object.entries(group).map(([k, v]) => [k, typeof v === "boolean" ? false : v])) as T;
  return {
    version: CAPABILITY_RECORD_VERSION,
    sessions: off(full.sessions),
    threads: off(full.threads),
    turns: { ...off(full.turns), emitsTurnCompleted: true, terminalStatusQuality: "weak" },
    streaming: { ...off(full.streaming), streamsAssistantText: true },
    tools: off(full.tools),
    approvals: off(full.approvals),
    planning: off(full.planning),
    subagents: off(full.subagents),
    context: { ...off(full.context), acceptsSyntheticUserContext: true, maxRecommendedHandoffChars: 8_000 },
    checkpointing: { ...off(full.checkpointing), appCanCheckpointFilesystem: true },
    identity: { nativeThreadIds: "none", nativeTurnIds: "none", nativeItemIds: "none", nativeRequestIds: "none" },
  };
}

/**
 * A validated record built from a base (`fullCapabilities()` when none is given) and per-group overrides, typed with
 * the fields the overrides set (`WithOverrides`): literal where they are.
 */
export function defineCapabilities<const O extends CapabilityOverrides = {}>(
  overrides?: O & KnownFields<O>,
): WithOverrides<FullCapabilities, O>;
export function defineCapabilities<const O extends CapabilityOverrides, B extends ProviderCapabilities>(
  overrides: O & KnownFields<O>,
  base: B,
): WithOverrides<B, O>;
// The overloads give the type; `parseCapabilities` checks the value against the schema.
export function defineCapabilities(
  overrides: CapabilityOverrides = {},
  base: ProviderCapabilities = fullCapabilities(),
): unknown {
  const merged: Record<string, unknown> = { ...base };
  for (const [group, fields] of Object.entries(overrides)) {
    merged[group] = { ...(base[group as CapabilityGroup] as object), ...fields };
  }
  return parseCapabilities(merged);
}
