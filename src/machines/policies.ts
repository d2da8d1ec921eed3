/**
 * Every degradation the runtime knows: what a missing capability makes it do instead
 * (`fallback`) or refuse with a typed `capability_unsupported` (`refused`). Each entry is
 * recorded as a `policy.applied` event by the transition that takes it, so the log, the
 * inspector and the model-based tests all speak of the same named transitions.
 */
export const DEGRADATIONS = {
  interrupt_by_session_stop: {
    capability: "turns.supportsInterrupt",
    outcome: "fallback",
    summary: "no native interrupt: stop the provider session (destructive, allowed by option)",
  },
  session_stop_refused_shared: {
    capability: "turns.supportsInterrupt",
    outcome: "refused",
    summary: "no native interrupt, and stopping the session would also end other threads' runs in it: refused",
  },
  interrupt_unsupported: {
    capability: "turns.supportsInterrupt",
    outcome: "refused",
    summary: "no native interrupt and stopping the session is not allowed",
  },
  steer_by_interrupt_restart: {
    capability: "turns.supportsActiveSteering",
    outcome: "fallback",
    summary: "no native steer: supersede the attempt, interrupt it, restart the run with the steer text",
  },
  steer_unsupported: {
    capability: "turns.supportsActiveSteering",
    outcome: "refused",
    summary: "neither native steering nor interrupt-restart",
  },
  queue_held_by_runtime: {
    capability: "turns.supportsQueuedMessages",
    outcome: "fallback",
    summary: "the provider cannot queue: the runtime holds the message until the turn boundary",
  },
  thread_created_with_first_turn: {
    capability: "threads.canCreateEmptyThread",
    outcome: "fallback",
    summary: "no empty threads: a provider thread is made with its first turn, and bound once the provider names it",
  },
  synthetic_fork: {
    capability: "threads.canForkThread",
    outcome: "fallback",
    summary: "no native fork for this source: a new provider thread gets portable context (lower fidelity)",
  },
  rollback_by_resume: {
    capability: "checkpointing.providerCanReadConversationSnapshot",
    outcome: "fallback",
    summary:
      "no conversation snapshot to read: the provider's cut is trusted rather than counted " +
      "(a snapshot its rollback returns is still checked for the dropped turns)",
  },
  rollback_divergent: {
    capability: "threads.canRollbackThread",
    outcome: "fallback",
    summary: "no provider rollback: restore files, mark the provider thread divergent",
  },
  divergent_thread_rebuilt: {
    capability: "threads.canRollbackThread",
    outcome: "fallback",
    summary: "the next run after a divergent rollback rebuilds provider context on a fresh provider thread",
  },
  rollback_unsupported: {
    capability: "checkpointing.appCanCheckpointFilesystem",
    outcome: "refused",
    summary: "no app checkpoint to restore and no provider rollback",
  },
  root_checkpoint_only: {
    capability: "checkpointing.supportsNestedCheckpointScopes",
    outcome: "fallback",
    summary:
      "the provider checkpoints only its root conversation: undoing a subagent restores its files " +
      "from the app's nested checkpoints and leaves the provider's conversation as it is",
  },
  handoff_fresh_thread: {
    capability: "context.supportsDeltaHandoff",
    outcome: "fallback",
    summary: "returning to a provider without delta handoff: a fresh provider thread with a full summary",
  },
  summary_by_local_summariser: {
    capability: "context.canGenerateSummaries",
    outcome: "fallback",
    summary: "the provider writes no summaries: the runtime's local summariser writes the handoff (bounded)",
  },
  handoff_runs_omitted: {
    capability: "context.maxRecommendedHandoffChars",
    outcome: "fallback",
    summary: "the summary is over the provider's recommended size: its oldest runs are left out, recorded as omitted",
  },
  handoff_as_user_context: {
    capability: "context.acceptsDeveloperContext",
    outcome: "fallback",
    summary: "no system or developer context: the handoff is sent as synthetic user context",
  },
  handoff_unsupported: {
    capability: "context.acceptsSyntheticUserContext",
    outcome: "refused",
    summary: "the provider accepts no explicit context: switching to it would lose the conversation",
  },
  approvals_by_sandbox: {
    capability: "approvals.supportsCommandApproval",
    outcome: "fallback",
    summary: "no structured approvals: the provider runs under the configured sandbox policy, no approval is shown",
  },
  no_plan_artifacts: {
    capability: "planning.emitsPlanUpdated",
    outcome: "fallback",
    summary: "no plan updates: no plan panel, rely on assistant messages",
  },
  no_proposed_plans: {
    capability: "planning.emitsProposedPlan",
    outcome: "fallback",
    summary: "no proposed plans: a plan stays in the assistant's text, with nothing to accept or implement",
  },
  questions_as_text: {
    capability: "planning.supportsStructuredQuestions",
    outcome: "fallback",
    summary: "no structured questions: the provider asks in its text, answered with the next message",
  },
  no_todo_artifacts: {
    capability: "planning.emitsTodoList",
    outcome: "fallback",
    summary: "no todo lists: no todo panel, rely on assistant messages",
  },
  terminal_inferred_from_idle: {
    capability: "turns.emitsTurnCompleted",
    outcome: "fallback",
    summary: "no turn terminal: the terminal is inferred when the session goes idle (weak correlation)",
  },
  terminal_weak_correlation: {
    capability: "turns.terminalStatusQuality",
    outcome: "fallback",
    summary: "the provider's terminal status is weak: accepted, marked with its correlation strength",
  },
  messages_closed_at_terminal: {
    capability: "streaming.emitsMessageCompleted",
    outcome: "fallback",
    summary: "no message-completed events: assistant messages close at the root terminal",
  },
  model_switch_new_session: {
    capability: "sessions.supportsModelSwitchInSession",
    outcome: "fallback",
    summary: "no model switch in session: a model change starts a new provider session",
  },
  mode_switch_new_session: {
    capability: "sessions.supportsRuntimeModeSwitchInSession",
    outcome: "fallback",
    summary:
      "no runtime mode switch in session: a mode change (plan mode, approval policy) starts a new provider session",
  },
  requests_expire_on_restart: {
    capability: "sessions.pendingRequestsSurviveRestart",
    outcome: "fallback",
    summary: "requests pending when their session restarts expire as not_resumable",
  },
  requests_expire_with_connection: {
    capability: "approvals.approvalCallbacksAreLiveOnly",
    outcome: "fallback",
    summary:
      "approval callbacks live only on the connection that asked: a session whose host outlived the runtime " +
      "cannot answer them on a new one; they expire as not_resumable",
  },
  provider_switch_unsupported: {
    capability: "sessions.supportsProviderSwitchingViaHandoff",
    outcome: "refused",
    summary: "a provider that takes no part in switching: the conversation cannot move to it or away from it",
  },
  handoff_summary_unsupported: {
    capability: "context.canConsumeHandoffSummaries",
    outcome: "refused",
    summary: "the provider cannot continue from a summary: it cannot be handed a conversation it has not seen",
  },
  full_handoff_unsupported: {
    capability: "context.supportsFullThreadHandoff",
    outcome: "refused",
    summary: "the provider takes no whole-conversation summary: a fresh thread there cannot be told the conversation",
  },
  assistant_text_at_completion: {
    capability: "streaming.streamsAssistantText",
    outcome: "fallback",
    summary: "no streamed assistant text: the message arrives whole at its completion, as one delta",
  },
  reasoning_at_completion: {
    capability: "streaming.streamsReasoning",
    outcome: "fallback",
    summary: "no streamed reasoning: the reasoning arrives whole at its completion, as one delta",
  },
  tool_output_at_completion: {
    capability: "streaming.streamsToolOutput",
    outcome: "fallback",
    summary: "no streamed tool output: a tool's output arrives whole at its completion",
  },
  plan_text_at_completion: {
    capability: "streaming.streamsPlanText",
    outcome: "fallback",
    summary: "no streamed plan text: a plan arrives whole when it is updated",
  },
  tool_ids_by_ordinal: {
    capability: "tools.exposesToolItemIds",
    outcome: "fallback",
    summary: "no tool item ids: tool calls are correlated by their ordinal in the turn",
  },
  tool_start_synthesised: {
    capability: "tools.emitsToolStarted",
    outcome: "fallback",
    summary: "no tool-started events: the normalizer starts a tool item when its first event or completion arrives",
  },
  tools_closed_at_terminal: {
    capability: "tools.emitsToolCompleted",
    outcome: "fallback",
    summary: "no tool-completed events: tool items close at the root terminal",
  },
  no_tool_output: {
    capability: "tools.emitsToolOutput",
    outcome: "fallback",
    summary: "no tool output events: tool items carry no output",
  },
  mcp_tools_unavailable: {
    capability: "tools.supportsMcpTools",
    outcome: "refused",
    summary:
      "no MCP tools: a tool item tagged with an MCP server and tool is a protocol warning, shown as a plain tool",
  },
  dynamic_tools_unsupported: {
    capability: "tools.supportsDynamicToolCallbacks",
    outcome: "refused",
    summary: "no dynamic tool callbacks: registered tools are not offered to the session (said once, at its start)",
  },
  undeclared_request_declined: {
    capability: "approvals.supportsCommandApproval",
    outcome: "refused",
    summary: "a request of a kind the record does not declare: a protocol warning, declined, never shown",
  },
  requests_by_turn_ordinal: {
    capability: "approvals.approvalsHaveNativeRequestIds",
    outcome: "fallback",
    summary: "no native request ids: requests are correlated by their turn and ordinal",
  },
  subagent_request_at_root: {
    capability: "approvals.approvalsCanOriginateFromSubagents",
    outcome: "fallback",
    summary:
      "the record says requests never come from subagents: one that does is a protocol warning, hung at the root",
  },
  turn_refs_as_evidence: {
    capability: "identity.nativeTurnIds",
    outcome: "fallback",
    summary:
      "weak or no native turn ids: a turn ref is evidence, never trusted alone; a finished turn's ref does not " +
      "fence the current turn named alike, and events naming it before the current turn's reply wait for that reply",
  },
  plan_deltas_by_ordinal: {
    capability: "planning.planDeltasHaveItemIds",
    outcome: "fallback",
    summary: "plan and todo updates carry no item ids: each goes to the turn's one node of its kind",
  },
  subagent_undo_unsupported: {
    capability: "checkpointing.appCanCheckpointFilesystem",
    outcome: "refused",
    summary: "no app checkpoints of the subagent's run: its edits cannot be undone on their own",
  },
  subagent_shown_inline: {
    capability: "subagents.supportsSubagents",
    outcome: "fallback",
    summary:
      "the record says the provider has no subagents: one it reports anyway is a protocol warning, no subagent node " +
      "is made and its work is shown in its turn",
  },
  subagent_lifecycle_inferred: {
    capability: "subagents.emitsSubagentLifecycle",
    outcome: "fallback",
    summary:
      "no subagent lifecycle events: a subagent node is made from its child thread's first event, and closed when " +
      "its child turn ends (else at the root terminal)",
  },
  subagent_not_addressable: {
    capability: "subagents.exposesSubagentThreadIds",
    outcome: "fallback",
    summary:
      "no subagent thread ids: subagents are nested nodes only, their child threads no provider threads the app " +
      "can address (no wait, close or native fork)",
  },
  subagent_wait_unsupported: {
    capability: "subagents.canWaitForSubagents",
    outcome: "refused",
    summary: "the provider cannot be asked to wait for a subagent (or the subagent is not addressable): refused",
  },
  subagent_close_unsupported: {
    capability: "subagents.canCloseSubagents",
    outcome: "refused",
    summary: "the provider cannot close a subagent on its own (or the subagent is not addressable): refused",
  },
  subagent_fork_synthetic: {
    capability: "subagents.canForkSubagentThread",
    outcome: "fallback",
    summary:
      "a subagent's child thread forks natively only where it outlives its subagent as a conversation of its own " +
      "(subagents.canForkSubagentThread) and the provider's fork takes a subagent thread as its source " +
      "(threads.canForkFromSubagentThread); otherwise the fork gets portable context from the subagent's items " +
      "(its prompt, its children's items, its result), lower fidelity",
  },
  subagent_fork_unsupported: {
    capability: "subagents.canForkSubagentThread",
    outcome: "refused",
    summary:
      "the subagent's thread cannot be forked natively and the fork's provider takes no portable context: refused",
  },
} as const satisfies Record<string, { capability: string; outcome: "fallback" | "refused"; summary: string }>;

export type PolicyName = keyof typeof DEGRADATIONS;

export const POLICY_NAMES = Object.keys(DEGRADATIONS) as PolicyName[];
