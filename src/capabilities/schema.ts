import { z } from "zod";
import { InvalidInputError } from "../domain/errors.js";

/**
 * The provider capability record: the eleven groups of the capability-system seed, field
 * for field, plus a `version`. Adapters emit one at session start; guards read it.
 */
export const CAPABILITY_RECORD_VERSION = 1;

const strength = z.enum(["strong", "weak", "none"]);
export type Strength = z.infer<typeof strength>;

export const SessionCapabilitiesSchema = z.strictObject({
  supportsMultipleProviderThreadsPerSession: z.boolean(),
  supportsModelSwitchInSession: z.boolean(),
  supportsProviderSwitchingViaHandoff: z.boolean(),
  supportsRuntimeModeSwitchInSession: z.boolean(),
  pendingRequestsSurviveRestart: z.boolean(),
});

export const ThreadCapabilitiesSchema = z.strictObject({
  canCreateEmptyThread: z.boolean(),
  canReadThreadSnapshot: z.boolean(),
  canRollbackThread: z.boolean(),
  canForkThread: z.boolean(),
  canForkFromTurn: z.boolean(),
  canForkFromSubagentThread: z.boolean(),
  exposesNativeThreadId: z.boolean(),
});

export const TurnCapabilitiesSchema = z.strictObject({
  exposesNativeTurnId: z.boolean(),
  emitsTurnStarted: z.boolean(),
  emitsTurnCompleted: z.boolean(),
  supportsInterrupt: z.boolean(),
  supportsActiveSteering: z.boolean(),
  supportsSteeringByInterruptRestart: z.boolean(),
  supportsQueuedMessages: z.boolean(),
  terminalStatusQuality: strength,
});

export const StreamingCapabilitiesSchema = z.strictObject({
  streamsAssistantText: z.boolean(),
  streamsReasoning: z.boolean(),
  streamsToolOutput: z.boolean(),
  streamsPlanText: z.boolean(),
  emitsMessageCompleted: z.boolean(),
});

export const ToolCapabilitiesSchema = z.strictObject({
  exposesToolItemIds: z.boolean(),
  emitsToolStarted: z.boolean(),
  emitsToolCompleted: z.boolean(),
  emitsToolOutput: z.boolean(),
  supportsMcpTools: z.boolean(),
  supportsDynamicToolCallbacks: z.boolean(),
});

export const ApprovalCapabilitiesSchema = z.strictObject({
  supportsCommandApproval: z.boolean(),
  supportsFileReadApproval: z.boolean(),
  supportsFileChangeApproval: z.boolean(),
  supportsApplyPatchApproval: z.boolean(),
  approvalsHaveNativeRequestIds: z.boolean(),
  approvalCallbacksAreLiveOnly: z.boolean(),
  approvalsCanOriginateFromSubagents: z.boolean(),
});

export const PlanningCapabilitiesSchema = z.strictObject({
  emitsPlanUpdated: z.boolean(),
  emitsTodoList: z.boolean(),
  emitsProposedPlan: z.boolean(),
  supportsStructuredQuestions: z.boolean(),
  planDeltasHaveItemIds: z.boolean(),
});

export const SubagentCapabilitiesSchema = z.strictObject({
  supportsSubagents: z.boolean(),
  exposesSubagentThreadIds: z.boolean(),
  emitsSubagentLifecycle: z.boolean(),
  canWaitForSubagents: z.boolean(),
  canCloseSubagents: z.boolean(),
  canForkSubagentThread: z.boolean(),
});

export const ContextCapabilitiesSchema = z.strictObject({
  acceptsSystemContext: z.boolean(),
  acceptsDeveloperContext: z.boolean(),
  acceptsSyntheticUserContext: z.boolean(),
  canGenerateSummaries: z.boolean(),
  canConsumeHandoffSummaries: z.boolean(),
  supportsDeltaHandoff: z.boolean(),
  supportsFullThreadHandoff: z.boolean(),
  maxRecommendedHandoffChars: z.number().int().positive().nullable(),
});

export const CheckpointCapabilitiesSchema = z.strictObject({
  appCanCheckpointFilesystem: z.boolean(),
  supportsNestedCheckpointScopes: z.boolean(),
  providerCanRollbackConversation: z.boolean(),
  providerRollbackReturnsSnapshot: z.boolean(),
  providerCanReadConversationSnapshot: z.boolean(),
});

export const IdentityCapabilitiesSchema = z.strictObject({
  nativeThreadIds: strength,
  nativeTurnIds: strength,
  nativeItemIds: strength,
  nativeRequestIds: strength,
});

export const ProviderCapabilitiesSchema = z.strictObject({
  version: z.literal(CAPABILITY_RECORD_VERSION),
  sessions: SessionCapabilitiesSchema,
  threads: ThreadCapabilitiesSchema,
  turns: TurnCapabilitiesSchema,
  streaming: StreamingCapabilitiesSchema,
  tools: ToolCapabilitiesSchema,
  approvals: ApprovalCapabilitiesSchema,
  planning: PlanningCapabilitiesSchema,
  subagents: SubagentCapabilitiesSchema,
  context: ContextCapabilitiesSchema,
  checkpointing: CheckpointCapabilitiesSchema,
  identity: IdentityCapabilitiesSchema,
});

export type ProviderCapabilities = z.infer<typeof ProviderCapabilitiesSchema>;
export type CapabilityGroup = Exclude<keyof ProviderCapabilities, "version">;

/** Dotted path of a zod issue, e.g. `turns.supportsInterrupt`. */
export function issuePath(path: readonly PropertyKey[]): string {
  return path.map(String).join(".");
}

/**
 * Validate a capability record. A bad record is rejected with an `invalid_input` error
 * naming the first offending field (`turns.supportsInterrupt`, not "invalid object").
 */
export function parseCapabilities(value: unknown): ProviderCapabilities {
  const result = ProviderCapabilitiesSchema.safeParse(value);
  if (result.success) return result.data;
  const issue = result.error.issues[0]!;
  const keys = issue.code === "unrecognized_keys" ? issue.keys : [];
  const field = issuePath([...issue.path, ...keys.slice(0, 1)]);
  throw new InvalidInputError(field || "capabilities", issue.message, {
    issues: result.error.issues.map((i) => ({ path: issuePath(i.path), message: i.message })),
  });
}
