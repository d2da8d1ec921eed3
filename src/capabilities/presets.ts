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

/** Everything a provider could offer, with strong identities. */
export function fullCapabilities(): ProviderCapabilities {
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
  const full = fullCapabilities();
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

/** A validated record built from a base and per-group overrides. */
export function defineCapabilities(
  overrides: CapabilityOverrides = {},
  base: ProviderCapabilities = fullCapabilities(),
): ProviderCapabilities {
  const merged: Record<string, unknown> = { ...base };
  for (const [group, fields] of Object.entries(overrides)) {
    merged[group] = { ...(base[group as CapabilityGroup] as object), ...fields };
  }
  return parseCapabilities(merged);
}
