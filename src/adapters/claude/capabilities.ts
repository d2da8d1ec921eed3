import { defineCapabilities, type ProviderCapabilities } from "../../capabilities/index.js";

/**
 * What Claude Code does through the Agent SDK, as this adapter projects it and the real-binary
 * tests exercise it. Claude lacks what matters most for degradation: no turn ids (weak turn
 * identity), no mid-turn steering (steer = interrupt-restart), rollback only by resuming at an
 * earlier message. See GAP.md for the rest.
 */
export function claudeCapabilities(): ProviderCapabilities {
  return defineCapabilities({
    sessions: { supportsMultipleProviderThreadsPerSession: false, supportsModelSwitchInSession: false, supportsProviderSwitchingViaHandoff: true, supportsRuntimeModeSwitchInSession: false, pendingRequestsSurviveRestart: false },
    threads: { canCreateEmptyThread: true, canReadThreadSnapshot: false, canRollbackThread: true, canForkThread: true, canForkFromTurn: false, canForkFromSubagentThread: false, exposesNativeThreadId: true },
    turns: {
      exposesNativeTurnId: false,
      emitsTurnStarted: false,
      emitsTurnCompleted: true,
      supportsInterrupt: true,
      supportsActiveSteering: false,
      supportsSteeringByInterruptRestart: true,
      supportsQueuedMessages: false,
      terminalStatusQuality: "strong",
    },
    streaming: { streamsAssistantText: true, streamsReasoning: false, streamsToolOutput: false, streamsPlanText: false, emitsMessageCompleted: true },
    tools: { exposesToolItemIds: true, emitsToolStarted: true, emitsToolCompleted: true, emitsToolOutput: true, supportsMcpTools: false, supportsDynamicToolCallbacks: false },
    approvals: {
      supportsCommandApproval: true,
      supportsFileReadApproval: false,
      supportsFileChangeApproval: true, // Edit and Write ask
      supportsApplyPatchApproval: false,
      approvalsHaveNativeRequestIds: true,
      approvalCallbacksAreLiveOnly: true,
      approvalsCanOriginateFromSubagents: false,
    },
    planning: { emitsPlanUpdated: false, emitsTodoList: true, emitsProposedPlan: false, supportsStructuredQuestions: false, planDeltasHaveItemIds: false },
    subagents: { supportsSubagents: false, exposesSubagentThreadIds: false, emitsSubagentLifecycle: false, canWaitForSubagents: false, canCloseSubagents: false, canForkSubagentThread: false },
    context: {
      acceptsSystemContext: false,
      acceptsDeveloperContext: false,
      acceptsSyntheticUserContext: true,
      canGenerateSummaries: false,
      canConsumeHandoffSummaries: true,
      supportsDeltaHandoff: true,
      supportsFullThreadHandoff: true,
      maxRecommendedHandoffChars: 16_000,
    },
    checkpointing: { appCanCheckpointFilesystem: true, supportsNestedCheckpointScopes: false, providerCanRollbackConversation: true, providerRollbackReturnsSnapshot: false, providerCanReadConversationSnapshot: false },
    identity: { nativeThreadIds: "strong", nativeTurnIds: "none", nativeItemIds: "strong", nativeRequestIds: "strong" },
  });
}
