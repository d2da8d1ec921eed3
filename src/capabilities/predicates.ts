import type { ApprovalKind } from "../domain/items.js";
import type { ProviderCapabilities } from "./schema.js";

/**
 * Questions the orchestration asks of a capability record. Machine guards wrap these, so
 * each degradation policy reads one named decision rather than raw flags.
 */
type Caps = ProviderCapabilities;

export const canSteerNatively = (c: Caps): boolean => c.turns.supportsActiveSteering;

/** App-level steering: interrupt the active turn and start a replacement attempt. */
export const canSteerByInterruptRestart = (c: Caps): boolean =>
  c.turns.supportsSteeringByInterruptRestart && c.turns.supportsInterrupt;

export const canInterrupt = (c: Caps): boolean => c.turns.supportsInterrupt;

/**
 * A provider that announces its turns cannot take an interrupt before it has announced the
 * turn (Codex answers "no active turn" between its turn/start reply and turn/started): the
 * runtime holds the interrupt until then. Without that event, the accepted turn is enough.
 */
export const interruptWaitsForTurnStart = (c: Caps): boolean => c.turns.emitsTurnStarted;

/** The provider queues follow-ups itself; otherwise the runtime holds the queue. */
export const canQueueNatively = (c: Caps): boolean => c.turns.supportsQueuedMessages;

export const canForkNatively = (c: Caps, fromInsideThread: boolean): boolean =>
  c.threads.canForkThread && (!fromInsideThread || c.threads.canForkFromTurn);

/** The thread allows a rollback and the provider rolls its conversation back (the seed names both). */
export const canRollbackProvider = (c: Caps): boolean =>
  c.threads.canRollbackThread && c.checkpointing.providerCanRollbackConversation;

export const canReadThreadSnapshot = (c: Caps): boolean => c.threads.canReadThreadSnapshot;

/** The runtime can read the provider's conversation (the thread offers snapshots, and they show the conversation). */
export const canReadConversation = (c: Caps): boolean =>
  c.checkpointing.providerCanReadConversationSnapshot && canReadThreadSnapshot(c);

/**
 * The runtime can check a provider rollback: against the snapshot the rollback returns, or
 * the conversation it reads afterwards; otherwise the rollback is trusted.
 */
export const canVerifyProviderRollback = (c: Caps): boolean =>
  c.checkpointing.providerRollbackReturnsSnapshot || canReadConversation(c);

/** The provider says when each turn ends (else the runtime infers it when the session goes idle). */
export const reportsTurnTerminals = (c: Caps): boolean => c.turns.emitsTurnCompleted;

/** The provider makes an empty thread on request; otherwise a thread is made with its first turn. */
export const createsEmptyThreads = (c: Caps): boolean => c.threads.canCreateEmptyThread;

/**
 * One session may host many provider threads only when their events can be told apart by
 * thread id, each turn reports its own terminal, and a thread exists before its first turn's
 * events (a thread made with its turn is known only once the provider names it); otherwise
 * each thread gets a session.
 */
export const sharesSessionAcrossThreads = (c: Caps): boolean =>
  c.sessions.supportsMultipleProviderThreadsPerSession &&
  c.threads.exposesNativeThreadId &&
  c.identity.nativeThreadIds !== "none" &&
  reportsTurnTerminals(c) &&
  createsEmptyThreads(c);

export const canSwitchModelInSession = (c: Caps): boolean => c.sessions.supportsModelSwitchInSession;

/** The runtime mode (plan mode, approval policy) can change per turn in a live session. */
export const canSwitchModeInSession = (c: Caps): boolean => c.sessions.supportsRuntimeModeSwitchInSession;

export const requestsSurviveRestart = (c: Caps): boolean => c.sessions.pendingRequestsSurviveRestart;

/**
 * A pending request can be answered through another connection than the one that asked: after a restart, a session
 * taken up again in a host that outlived the runtime can still answer it.
 */
export const approvalsOutliveConnection = (c: Caps): boolean => !c.approvals.approvalCallbacksAreLiveOnly;

/** The runtime must infer the turn terminal because the provider's is weak or missing. */
export const mustInferTurnTerminal = (c: Caps): boolean =>
  !c.turns.emitsTurnCompleted || c.turns.terminalStatusQuality !== "strong";

/** Without message-completed events, assistant messages close at the root terminal. */
export const closesMessagesAtRootTerminal = (c: Caps): boolean => !c.streaming.emitsMessageCompleted;

export const supportsApprovalFor = (c: Caps, kind: ApprovalKind): boolean => {
  switch (kind) {
    case "command":
      return c.approvals.supportsCommandApproval;
    case "file_read":
      return c.approvals.supportsFileReadApproval;
    case "file_change":
      return c.approvals.supportsFileChangeApproval;
    case "apply_patch":
      return c.approvals.supportsApplyPatchApproval;
  }
};

/** Some structured approval exists; without any, the configured sandbox policy governs. */
export const hasStructuredApprovals = (c: Caps): boolean =>
  c.approvals.supportsCommandApproval ||
  c.approvals.supportsFileReadApproval ||
  c.approvals.supportsFileChangeApproval ||
  c.approvals.supportsApplyPatchApproval;

/** The provider takes part in switching: a conversation may move to it from another provider, or away from it. */
export const switchesProvidersViaHandoff = (c: Caps): boolean => c.sessions.supportsProviderSwitchingViaHandoff;

/** The provider can continue a conversation from a summary of runs it did not see (else only from its own turns). */
export const consumesHandoffSummaries = (c: Caps): boolean => c.context.canConsumeHandoffSummaries;

/** The provider writes a handoff's summary itself (else the runtime's local summariser does). */
export const writesSummaries = (c: Caps): boolean => c.context.canGenerateSummaries;

/** A thread that saw part of the conversation can be told only what it missed. */
export const takesDeltaHandoff = (c: Caps): boolean => c.context.supportsDeltaHandoff;

/** A fresh thread can be told the whole conversation so far. */
export const takesFullThreadHandoff = (c: Caps): boolean => c.context.supportsFullThreadHandoff;
