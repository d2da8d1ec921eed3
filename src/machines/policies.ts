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
  synthetic_fork: {
    capability: "threads.canForkThread",
    outcome: "fallback",
    summary: "no native fork for this source: a new provider thread gets portable context (lower fidelity)",
  },
  rollback_by_resume: {
    capability: "checkpointing.providerCanReadConversationSnapshot",
    outcome: "fallback",
    summary:
      "no conversation snapshot: the provider rolls back by resuming at the last kept message, " +
      "trusted rather than checked",
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
    summary: "no nested scopes: only the root run is checkpointed; child filesystem activity is uncheckpointed",
  },
  handoff_fresh_thread: {
    capability: "context.supportsDeltaHandoff",
    outcome: "fallback",
    summary: "returning to a provider without delta handoff: a fresh provider thread with a full summary",
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
  requests_expire_on_restart: {
    capability: "sessions.pendingRequestsSurviveRestart",
    outcome: "fallback",
    summary: "requests pending when their session restarts expire as not_resumable",
  },
} as const satisfies Record<string, { capability: string; outcome: "fallback" | "refused"; summary: string }>;

export type PolicyName = keyof typeof DEGRADATIONS;

export const POLICY_NAMES = Object.keys(DEGRADATIONS) as PolicyName[];
