import { defineCapabilities, type ProviderCapabilities } from "../../capabilities/index.js";
import { ProtocolError } from "../../domain/errors.js";
import type { RuntimeMode } from "../../domain/entities.js";

/**
 * What `codex app-server` can do, by binary version (read from the `initialize` handshake's
 * user agent), and only what this adapter projects faithfully and the tests exercise
 * (see GAP.md for what the binary has and the adapter does not project).
 */

/** A runtime mode's interaction names its Codex collaboration mode (`default`, `plan`: mapper.ts). */
export type CodexCollaborationMode = RuntimeMode["interaction"];

/** The versions this adapter was built and tested against. */
export const SUPPORTED_CODEX = { major: 0, minMinor: 171 } as const;

export function codexVersion(userAgent: string): string {
  const match = /\/(\d+\.\d+\.\d+)/.exec(userAgent);
  if (!match) throw new ProtocolError(`codex initialize: no version in user agent "${userAgent}"`);
  return match[1]!;
}

/**
 * The record of a version, for the collaboration mode a session runs its turns in (planning differs). Every supported
 * version declares the same fields a method serves (`SERVED_BY`), so the record is typed as written (literal fields,
 * the mode's planning group as the schema's): the adapter must serve what it claims (`defineAdapter`: `steerRun`,
 * `readThreadSnapshot`, `rollbackThread`, `forkThread`).
 */
export function codexCapabilities(version: string, mode: CodexCollaborationMode = "default") {
  const [major, minor] = version.split(".").map(Number);
  if (major !== SUPPORTED_CODEX.major || (minor ?? 0) < SUPPORTED_CODEX.minMinor) {
    throw new ProtocolError(
      `codex ${version} is not supported (needs ${SUPPORTED_CODEX.major}.${SUPPORTED_CODEX.minMinor}+)`,
      { version },
    );
  }
  return defineCapabilities({
    sessions: {
      supportsMultipleProviderThreadsPerSession: true,
      supportsModelSwitchInSession: true, // turn/start takes a model
      supportsProviderSwitchingViaHandoff: true,
      // Codex takes a mode per turn, but the planning record differs by mode (planningIn): a session
      // keeps the mode it started in, and a mode change gets a new session (on the same app-server).
      supportsRuntimeModeSwitchInSession: false,
      pendingRequestsSurviveRestart: false,
    },
    threads: {
      canCreateEmptyThread: true,
      canReadThreadSnapshot: true, // thread/read
      canRollbackThread: true, // thread/revert
      canForkThread: true,
      canForkFromTurn: true, // thread/fork lastTurnId
      canForkFromSubagentThread: false,
      exposesNativeThreadId: true,
    },
    turns: {
      exposesNativeTurnId: true,
      emitsTurnStarted: true,
      emitsTurnCompleted: true,
      supportsInterrupt: true,
      supportsActiveSteering: true, // turn/steer
      supportsSteeringByInterruptRestart: false, // native steering always applies
      supportsQueuedMessages: false,
      terminalStatusQuality: "strong",
    },
    // Command output arrives whole at the item's completion, not streamed; a proposed plan's
    // `item/plan/delta`s are not projected (no plan delta in the contract): it arrives whole.
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
      supportsDynamicToolCallbacks: true, // dynamic tools (thread/start), called back as item/tool/call
    },
    approvals: {
      supportsCommandApproval: true,
      supportsFileReadApproval: false,
      supportsFileChangeApproval: true,
      supportsApplyPatchApproval: false,
      approvalsHaveNativeRequestIds: true,
      approvalCallbacksAreLiveOnly: true,
      approvalsCanOriginateFromSubagents: false,
    },
    planning: planningIn(mode),
    subagents: {
      supportsSubagents: false,
      exposesSubagentThreadIds: false,
      emitsSubagentLifecycle: false,
      canWaitForSubagents: false,
      canCloseSubagents: false,
      canForkSubagentThread: false,
    },
    context: {
      acceptsSystemContext: false,
      acceptsDeveloperContext: false, // only at thread start/resume, not per turn
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
      providerCanReadConversationSnapshot: true,
    },
    // Server request ids are per-connection integers: evidence, correlated with the item id.
    identity: { nativeThreadIds: "strong", nativeTurnIds: "strong", nativeItemIds: "strong", nativeRequestIds: "weak" },
  });
}

/** Codex's record, typed as it is declared (the same type for every supported version and mode). */
export type CodexCapabilities = ReturnType<typeof codexCapabilities>;

/** The planning capabilities of a mode, as the real-binary tests (test/codex/planning.test.ts) show them. */
function planningIn(mode: CodexCollaborationMode): ProviderCapabilities["planning"] {
  const plan = mode === "plan";
  return {
    // update_plan: refused in Plan mode.
    emitsPlanUpdated: !plan,
    // Codex's one checklist is update_plan, projected as the plan (it carries an explanation too).
    emitsTodoList: false,
    emitsProposedPlan: plan,
    supportsStructuredQuestions: plan,
    // Plan items (and their deltas) carry the item's id; update_plan's plans have none and never need one.
    planDeltasHaveItemIds: plan,
  };
}
