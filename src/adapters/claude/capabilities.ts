import { defineCapabilities } from "../../capabilities/index.js";

/**
 * What Claude Code does through the Agent SDK, as this adapter projects it and the real-binary
 * tests exercise it. Claude lacks what matters most for degradation: no turn ids (weak turn
 * identity), no mid-turn steering (steer = interrupt-restart), rollback only by resuming at an
 * earlier message, unchecked (no conversation snapshot). See GAP.md for the rest.
 *
 * The record is fixed, so it is typed as written (literal fields): the adapter must serve what it claims
 * (`defineAdapter`: `rollbackThread`, `forkThread`).
 */
export function claudeCapabilities() {
  return defineCapabilities({
    sessions: {
      supportsMultipleProviderThreadsPerSession: false,
      supportsModelSwitchInSession: true,
      supportsProviderSwitchingViaHandoff: true,
      // Each turn's mode is set on the live query before its prompt (`setPermissionMode`).
      supportsRuntimeModeSwitchInSession: true,
      pendingRequestsSurviveRestart: false,
    },
    threads: {
      canCreateEmptyThread: true,
      canReadThreadSnapshot: false,
      canRollbackThread: true,
      canForkThread: true,
      canForkFromTurn: false,
      canForkFromSubagentThread: false,
      exposesNativeThreadId: true,
    },
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
    streaming: {
      streamsAssistantText: true,
      streamsReasoning: true,
      streamsToolOutput: false,
      streamsPlanText: false,
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
      // Read asks outside the working directory (under read-only and workspace-write alike).
      supportsFileReadApproval: true,
      // Edit and Write ask: all under read-only, those outside the cwd under workspace-write.
      supportsFileChangeApproval: true,
      supportsApplyPatchApproval: false,
      approvalsHaveNativeRequestIds: true,
      approvalCallbacksAreLiveOnly: true,
      // A subagent's tools ask on their own; the prompt names the subagent (its agent id).
      approvalsCanOriginateFromSubagents: true,
    },
    // ExitPlanMode's plan is a proposed plan; AskUserQuestion a structured question.
    planning: {
      emitsPlanUpdated: false,
      emitsTodoList: true,
      emitsProposedPlan: true,
      supportsStructuredQuestions: true,
      planDeltasHaveItemIds: false,
    },
    // A subagent is the Agent tool's use: its start and end are seen, its messages nest under it; it has no thread of
    // its own.
    subagents: {
      supportsSubagents: true,
      exposesSubagentThreadIds: false,
      emitsSubagentLifecycle: true,
      canWaitForSubagents: false,
      canCloseSubagents: false,
      canForkSubagentThread: false,
    },
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
    checkpointing: {
      appCanCheckpointFilesystem: true,
      supportsNestedCheckpointScopes: false,
      providerCanRollbackConversation: true,
      providerRollbackReturnsSnapshot: false,
      providerCanReadConversationSnapshot: false,
    },
    identity: { nativeThreadIds: "strong", nativeTurnIds: "none", nativeItemIds: "strong", nativeRequestIds: "strong" },
  });
}

/** Claude's record, typed as it is declared. */
export type ClaudeCapabilities = ReturnType<typeof claudeCapabilities>;
