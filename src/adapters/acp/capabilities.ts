import { defineCapabilities, type ProviderCapabilities } from "../../capabilities/index.js";
import { ProtocolError } from "../../domain/errors.js";
import type { InitializeResponse } from "./protocol/sdk.js";

/**
 * The capability record of an ACP agent, negotiated from its `initialize` answer: what the agent advertises there
 * (`loadSession`, its session capabilities, the known `_meta` extensions) decides the fields that depend on it; what it
 * does not advertise is false, and takes its named degradation. What ACP itself fixes is the same for every agent:
 * no turn ids and no turn start (a turn is a `session/prompt`, its response the strong terminal), steering by
 * interrupt-restart where no steering extension is advertised, interrupt by `session/cancel`, approvals by
 * `session/request_permission` (live only: they die with the agent process), context as the user's text.
 *
 * A few things an agent does are in no handshake: whether it shares plans, whether it asks before reading a file.
 * They are the target's to say (`AcpBehaviour`), documented with each known agent's preset (agents.ts).
 */

/** What an agent does that its handshake does not say: the target's options say it (defaults: ACP's norm). */
export interface AcpBehaviour {
  /** It shares its plan as `plan` updates (default true: ACP's way of showing progress; the adapter projects it). */
  plans?: boolean;
  /** It asks permission before a read (`kind: "read"`); default false: agents read inside the project unasked. */
  asksBeforeReads?: boolean;
  /** Its tool calls' updates carry the tools' output (default true); an agent that sends none says so. */
  toolOutput?: boolean;
  /**
   * Its messages carry ids (`messageId`): every item then has a native ref (`nativeItemIds: "weak"`). Default false:
   * messages and thoughts go by their order in the turn, and so do tools (`nativeItemIds: "none"`).
   */
  messageIds?: boolean;
}

/** The protocol version this adapter speaks (the SDK's `PROTOCOL_VERSION`): an agent answering another is refused. */
export const ACP_PROTOCOL_VERSION = 1;

/**
 * Extensions an agent may advertise under `_meta`, that this adapter knows and serves: `_session/steering` (a
 * follow-up injected into the running turn; advertised as the initialize answer's `_meta.steering.supported`).
 */
export function steeringAdvertised(init: InitializeResponse): boolean {
  const steering = (init._meta as { steering?: { supported?: unknown } } | null | undefined)?.steering;
  return steering?.supported === true;
}

const advertised = (value: unknown): boolean => value !== undefined && value !== null && value !== false;

/** The record of an agent, from its `initialize` answer and what the target says it does. */
export function acpCapabilities(init: InitializeResponse, behaviour: AcpBehaviour = {}): ProviderCapabilities {
  if (init.protocolVersion !== ACP_PROTOCOL_VERSION)
    throw new ProtocolError(
      `the agent speaks ACP version ${String(init.protocolVersion)}; this adapter speaks ${ACP_PROTOCOL_VERSION}`,
      { protocolVersion: init.protocolVersion },
    );
  const agent = init.agentCapabilities ?? {};
  const sessions = agent.sessionCapabilities ?? {};
  const fork = advertised(sessions.fork);
  const steering = steeringAdvertised(init);
  return defineCapabilities({
    sessions: {
      // One agent process holds many ACP sessions, each a provider thread.
      supportsMultipleProviderThreadsPerSession: true,
      // ACP's model and mode selectors are per ACP session, and told only when one opens (GAP.md).
      supportsModelSwitchInSession: false,
      supportsProviderSwitchingViaHandoff: true,
      supportsRuntimeModeSwitchInSession: false,
      pendingRequestsSurviveRestart: false,
    },
    threads: {
      canCreateEmptyThread: true, // session/new
      canReadThreadSnapshot: false,
      canRollbackThread: false,
      canForkThread: fork, // session/fork
      canForkFromTurn: false, // a fork copies the whole session
      canForkFromSubagentThread: false,
      exposesNativeThreadId: true, // the session id
    },
    turns: {
      exposesNativeTurnId: false,
      emitsTurnStarted: false,
      emitsTurnCompleted: true, // the prompt's response
      supportsInterrupt: true, // session/cancel
      supportsActiveSteering: steering,
      supportsSteeringByInterruptRestart: !steering,
      supportsQueuedMessages: false,
      terminalStatusQuality: "strong",
    },
    streaming: {
      streamsAssistantText: true,
      streamsReasoning: true,
      streamsToolOutput: false, // a tool's content is replaced whole by each update, never appended to
      streamsPlanText: false,
      // A message has no end of its own: the next update, or the prompt's response, ends it (mapper.ts).
      emitsMessageCompleted: true,
    },
    tools: {
      exposesToolItemIds: true, // toolCallId
      emitsToolStarted: true,
      emitsToolCompleted: true,
      emitsToolOutput: behaviour.toolOutput ?? true,
      supportsMcpTools: false,
      supportsDynamicToolCallbacks: false,
    },
    approvals: {
      supportsCommandApproval: true, // kind execute
      supportsFileReadApproval: behaviour.asksBeforeReads ?? false,
      supportsFileChangeApproval: true, // kinds edit, delete, move
      supportsApplyPatchApproval: false,
      approvalsHaveNativeRequestIds: true, // the request's JSON-RPC id
      approvalCallbacksAreLiveOnly: true,
      approvalsCanOriginateFromSubagents: false,
    },
    planning: {
      emitsPlanUpdated: behaviour.plans ?? true,
      emitsTodoList: false,
      emitsProposedPlan: false,
      supportsStructuredQuestions: false,
      planDeltasHaveItemIds: false,
    },
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
      acceptsDeveloperContext: false,
      acceptsSyntheticUserContext: true, // a text block before the prompt's
      canGenerateSummaries: false,
      canConsumeHandoffSummaries: true,
      supportsDeltaHandoff: true,
      supportsFullThreadHandoff: true,
      maxRecommendedHandoffChars: 16_000,
    },
    checkpointing: {
      appCanCheckpointFilesystem: true,
      supportsNestedCheckpointScopes: false,
      providerCanRollbackConversation: false,
      providerRollbackReturnsSnapshot: false,
      providerCanReadConversationSnapshot: false,
    },
    // Session ids are the agent's own, unique; message and tool call ids are unique within their session only; request
    // ids are per-connection JSON-RPC ids.
    identity: {
      nativeThreadIds: "strong",
      nativeTurnIds: "none",
      nativeItemIds: behaviour.messageIds ? "weak" : "none",
      nativeRequestIds: "weak",
    },
  });
}

/**
 * How a thread is resumed in a new agent process: `session/resume` (no history replayed) where advertised, else
 * `session/load` (the history is replayed as updates, which the adapter drops), else none: the runtime opens a new
 * session and hands the conversation over (a degradation, `resume_failed`).
 */
export function resumeMethod(init: InitializeResponse): "session/resume" | "session/load" | null {
  const agent = init.agentCapabilities ?? {};
  if (advertised(agent.sessionCapabilities?.resume)) return "session/resume";
  return agent.loadSession ? "session/load" : null;
}
