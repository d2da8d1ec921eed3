import type { Flags } from "./world.js";

/**
 * What the capability seed (`../shared/seeds/provider-capability-system.md`) and Tiller's
 * degradation table (docs/degradations.md) say a record makes the runtime do, written here
 * from those texts and never imported from `src/`: a predicate that goes wrong in the runtime
 * then disagrees with the model instead of moving the expectation along with the behaviour.
 *
 * A record is read from the path's flags: `<target>.<group>.<field>`, and where a path does not
 * set a field, the value the model world's base record gives it (`BASE`, below; the same
 * values as the scripted provider's full record, restated here so they are the model's own).
 */

type Value = boolean | string | number | null;

/** The base record of a model world, per field (the full record: everything a provider could offer). */
const BASE: Record<string, Value> = {
  "sessions.supportsMultipleProviderThreadsPerSession": true,
  "sessions.supportsModelSwitchInSession": true,
  "sessions.supportsProviderSwitchingViaHandoff": true,
  "sessions.supportsRuntimeModeSwitchInSession": true,
  "sessions.pendingRequestsSurviveRestart": false,
  "threads.canCreateEmptyThread": true,
  "threads.canReadThreadSnapshot": true,
  "threads.canRollbackThread": true,
  "threads.canForkThread": true,
  "threads.canForkFromTurn": true,
  "threads.canForkFromSubagentThread": true,
  "threads.exposesNativeThreadId": true,
  "turns.exposesNativeTurnId": true,
  "turns.emitsTurnStarted": true,
  "turns.emitsTurnCompleted": true,
  "turns.supportsInterrupt": true,
  "turns.supportsActiveSteering": true,
  "turns.supportsSteeringByInterruptRestart": true,
  "turns.supportsQueuedMessages": false,
  "turns.terminalStatusQuality": "strong",
  "streaming.streamsAssistantText": true,
  "streaming.streamsReasoning": true,
  "streaming.streamsToolOutput": true,
  "streaming.streamsPlanText": true,
  "streaming.emitsMessageCompleted": true,
  "tools.exposesToolItemIds": true,
  "tools.emitsToolStarted": true,
  "tools.emitsToolCompleted": true,
  "tools.emitsToolOutput": true,
  "tools.supportsMcpTools": false,
  "tools.supportsDynamicToolCallbacks": false,
  "approvals.supportsCommandApproval": true,
  "approvals.supportsFileReadApproval": false,
  "approvals.supportsFileChangeApproval": true,
  "approvals.supportsApplyPatchApproval": true,
  "approvals.approvalsHaveNativeRequestIds": true,
  "approvals.approvalCallbacksAreLiveOnly": true,
  "approvals.approvalsCanOriginateFromSubagents": true,
  "planning.emitsPlanUpdated": true,
  "planning.emitsTodoList": true,
  "planning.emitsProposedPlan": true,
  "planning.supportsStructuredQuestions": true,
  "planning.planDeltasHaveItemIds": true,
  "subagents.supportsSubagents": true,
  "subagents.exposesSubagentThreadIds": true,
  "subagents.emitsSubagentLifecycle": true,
  "subagents.canWaitForSubagents": true,
  "subagents.canCloseSubagents": true,
  "subagents.canForkSubagentThread": true,
  "context.acceptsSystemContext": true,
  "context.acceptsDeveloperContext": true,
  "context.acceptsSyntheticUserContext": true,
  "context.canGenerateSummaries": true,
  "context.canConsumeHandoffSummaries": true,
  "context.supportsDeltaHandoff": true,
  "context.supportsFullThreadHandoff": true,
  "context.maxRecommendedHandoffChars": 16_000,
  "checkpointing.appCanCheckpointFilesystem": true,
  "checkpointing.supportsNestedCheckpointScopes": false,
  "checkpointing.providerCanRollbackConversation": true,
  "checkpointing.providerRollbackReturnsSnapshot": true,
  "checkpointing.providerCanReadConversationSnapshot": true,
  "identity.nativeThreadIds": "strong",
  "identity.nativeTurnIds": "strong",
  "identity.nativeItemIds": "strong",
  "identity.nativeRequestIds": "strong",
};

/** Every field of the seed's record, as `group.field` (66 of them). */
export const SEED_FIELDS = Object.keys(BASE);

/** One target's record as the seed's fields, read from a path's flags. */
export class SeedRecord {
  constructor(
    private readonly flags: Flags,
    private readonly target = "main",
  ) {}

  get(field: string): Value {
    const key = `${this.target}.${field}`;
    if (key in this.flags) return this.flags[key]!;
    if (!(field in BASE)) throw new Error(`the seed has no field ${field}`);
    return BASE[field]!;
  }

  on(field: string): boolean {
    return this.get(field) === true;
  }
}

export const record = (flags: Flags, target = "main") => new SeedRecord(flags, target);

/**
 * The seed's policies, one function per decision. Each cites the sentence of the seed (or
 * the degradation table) it encodes.
 */
export const seed = {
  /** "interrupt unsupported -> stop session if allowed, otherwise mark unsupported". */
  interrupt(r: SeedRecord, stopAllowed: boolean): "native" | "stop_session" | "unsupported" {
    if (r.on("turns.supportsInterrupt")) return "native";
    return stopAllowed ? "stop_session" : "unsupported";
  },

  /** "canCreateEmptyThread": false, a provider thread is made with its first turn, never asked for empty. */
  makesThreadsWithTurns(r: SeedRecord): boolean {
    return !r.on("threads.canCreateEmptyThread");
  },

  /**
   * A provider that announces its turns (turn started) knows no turn to stop before it announced
   * it: an interrupt is held until then. Without announcements, an accepted turn can be stopped.
   */
  holdsInterruptUntilAnnounced(r: SeedRecord): boolean {
    return r.on("turns.emitsTurnStarted");
  },

  /**
   * "supportsActiveSteering means the provider can modify an in-flight turn directly";
   * "active steering unsupported -> interrupt active turn and restart the run as a steering
   * replacement attempt" — which needs an interrupt, and the provider's consent to it.
   */
  steer(r: SeedRecord): "native" | "interrupt_restart" | "unsupported" {
    if (r.on("turns.supportsActiveSteering")) return "native";
    if (r.on("turns.supportsSteeringByInterruptRestart") && r.on("turns.supportsInterrupt")) return "interrupt_restart";
    return "unsupported";
  },

  /** A provider that queues follow-ups takes them itself; otherwise the runtime holds them to the turn boundary. */
  queue(r: SeedRecord): "provider" | "runtime" {
    return r.on("turns.supportsQueuedMessages") ? "provider" : "runtime";
  },

  /**
   * "If terminalStatusQuality is weak, ... use adapter policy to infer terminal state, but
   * still mark correlation strength accordingly"; with no turn terminal at all the runtime infers it.
   */
  terminal(r: SeedRecord): "strong" | "weak" | "inferred" {
    if (!r.on("turns.emitsTurnCompleted")) return "inferred";
    return r.get("turns.terminalStatusQuality") === "strong" ? "strong" : "weak";
  },

  /** "If message completion is not emitted, the normalizer closes assistant messages at root run terminal." */
  closesMessagesAtTerminal(r: SeedRecord): boolean {
    return !r.on("streaming.emitsMessageCompleted") && r.on("streaming.streamsAssistantText");
  },

  /** "structured approvals unsupported -> provider runs under configured sandbox policy; no approval UI". */
  approvals(r: SeedRecord): "structured" | "sandbox_only" {
    const kinds = ["Command", "FileRead", "FileChange", "ApplyPatch"];
    return kinds.some((k) => r.on(`approvals.supports${k}Approval`)) ? "structured" : "sandbox_only";
  },

  /**
   * Identity: "strong: use native id as scoped provider ref; weak: use native id plus
   * ordinal/fingerprint; none: allocate by scoped ordinal" — a turn ref alone decides where an
   * event goes only when the provider exposes turn ids and they are strong.
   */
  trustsTurnRefs(r: SeedRecord): boolean {
    return r.on("turns.exposesNativeTurnId") && r.get("identity.nativeTurnIds") === "strong";
  },

  /**
   * Items: "strong: use native id as scoped provider ref; weak: use native id plus
   * ordinal/fingerprint; none: allocate by scoped ordinal" — an open item started again under its
   * id is the same item where ids exist; without ids every start is a new item.
   */
  repeatedStartIsSameItem(r: SeedRecord): boolean {
    return r.get("identity.nativeItemIds") !== "none";
  },

  /** A request's native id is its key only where the approvals and the identity both say requests have ids. */
  requestsByOrdinal(r: SeedRecord): boolean {
    return !(r.on("approvals.approvalsHaveNativeRequestIds") && r.get("identity.nativeRequestIds") !== "none");
  },

  /**
   * The approvals' own fallback (named): without native request ids there. With no request ids
   * at all, allocating by ordinal is the identity's plain rule ("none: allocate by scoped ordinal").
   */
  approvalsByOrdinal(r: SeedRecord): boolean {
    return !r.on("approvals.approvalsHaveNativeRequestIds");
  },

  /** "The UI should show pending approvals from any execution node, including subagents": where they can ask. */
  subagentRequestsHangUnderSubagent(r: SeedRecord): boolean {
    return r.on("approvals.approvalsCanOriginateFromSubagents");
  },

  /** Asks before a command runs. */
  asksForCommands(r: SeedRecord): boolean {
    return r.on("approvals.supportsCommandApproval");
  },

  /**
   * One provider session hosts many threads only when the record says so and their events can
   * be told apart (native thread ids) and each turn ends with its own terminal.
   */
  sharesSessions(r: SeedRecord): boolean {
    return (
      r.on("sessions.supportsMultipleProviderThreadsPerSession") &&
      r.on("threads.exposesNativeThreadId") &&
      r.get("identity.nativeThreadIds") !== "none" &&
      r.on("turns.emitsTurnCompleted") &&
      // A thread made with its first turn is known only once the provider names it.
      r.on("threads.canCreateEmptyThread")
    );
  },

  /** A runtime mode (plan mode, approval policy) switches in session where the provider can, else by a new session. */
  modeSwitch(r: SeedRecord): "in_session" | "new_session" {
    return r.on("sessions.supportsRuntimeModeSwitchInSession") ? "in_session" : "new_session";
  },

  /**
   * What a UI can expect of a turn's items, from the streaming and tool fields: text and
   * reasoning streamed or whole at completion; a tool's output streamed, whole at its completion
   * or none; tool starts and completions the provider's own or made by the runtime; tool items
   * by their ids or their order.
   */
  itemLifecycle(r: SeedRecord) {
    const delivery = (field: string) => (r.on(field) ? "streamed" : "at_completion");
    return {
      assistantText: delivery("streaming.streamsAssistantText"),
      reasoning: delivery("streaming.streamsReasoning"),
      toolOutput: r.on("tools.emitsToolOutput") ? delivery("streaming.streamsToolOutput") : "none",
      toolStarted: r.on("tools.emitsToolStarted") ? "native" : "synthesised",
      toolCompleted: r.on("tools.emitsToolCompleted") ? "native" : "at_terminal",
      toolIds: r.on("tools.exposesToolItemIds") && r.get("identity.nativeItemIds") !== "none" ? "native" : "ordinal",
    };
  },

  /**
   * The degradations one tool call takes, where the provider reports it at all (it sends a
   * start, streamed output or a completion): "Weak providers may produce only textual tool
   * summaries. The adapter can still create ordered turnItems and execution nodes by scoped ordinal."
   */
  toolDegradations(r: SeedRecord): string[] {
    const streamsOutput = r.on("tools.emitsToolOutput") && r.on("streaming.streamsToolOutput");
    const reported = r.on("tools.emitsToolStarted") || streamsOutput || r.on("tools.emitsToolCompleted");
    if (!reported) return [];
    return [
      ...(r.on("tools.emitsToolStarted") ? [] : ["tool_start_synthesised"]),
      ...(r.on("tools.exposesToolItemIds") ? [] : ["tool_ids_by_ordinal"]),
      ...(r.on("tools.emitsToolOutput") ? [] : ["no_tool_output"]),
      // Output that does not stream comes with the completion: none without one.
      ...(r.on("tools.emitsToolOutput") && !streamsOutput && r.on("tools.emitsToolCompleted")
        ? ["tool_output_at_completion"]
        : []),
      ...(r.on("tools.emitsToolCompleted") ? [] : ["tools_closed_at_terminal"]),
    ];
  },

  /**
   * Subagents: "When exposesSubagentThreadIds is true, subagent provider threads become
   * addressable ProviderThread records. When false, subagents can still be shown as nested
   * execution nodes if the provider exposes enough lifecycle information." A provider whose
   * record says it has none shows the work in its turn; operations need an addressable subagent.
   */
  subagentShown(r: SeedRecord): "addressable" | "nested" | "inline" {
    if (!r.on("subagents.supportsSubagents")) return "inline";
    return r.on("subagents.exposesSubagentThreadIds") && r.get("identity.nativeThreadIds") !== "none"
      ? "addressable"
      : "nested";
  },

  /** Whether a subagent gets a node of its own: announced, or made from its children's events. */
  subagentVisible(r: SeedRecord): boolean {
    return seed.subagentShown(r) !== "inline";
  },

  subagentDegradations(r: SeedRecord): string[] {
    const shown = seed.subagentShown(r);
    if (shown === "inline") return ["subagent_shown_inline"];
    return [
      ...(shown === "nested" ? ["subagent_not_addressable"] : []),
      ...(r.on("subagents.emitsSubagentLifecycle") ? [] : ["subagent_lifecycle_inferred"]),
    ];
  },

  /** Wait for a subagent / close it: where it is addressable and the record says the provider can. */
  subagentOperation(r: SeedRecord, operation: "wait" | "close"): boolean {
    const field = operation === "wait" ? "subagents.canWaitForSubagents" : "subagents.canCloseSubagents";
    return seed.subagentShown(r) === "addressable" && r.on(field);
  },

  /**
   * A fork of a subagent: native where its thread is addressable, outlives it as a conversation
   * of its own (canForkSubagentThread) and the provider forks from a subagent thread
   * (canForkFromSubagentThread); else "synthetic fork from app projection" of the subagent's items.
   */
  forksSubagentNatively(r: SeedRecord): boolean {
    return (
      seed.subagentShown(r) === "addressable" &&
      r.on("subagents.canForkSubagentThread") &&
      r.on("threads.canForkFromSubagentThread") &&
      r.on("threads.canForkThread")
    );
  },

  /** "supportsDynamicToolCallbacks": the embedder's tools are offered, and called back through the runtime. */
  callsToolsBack(r: SeedRecord): boolean {
    return r.on("tools.supportsDynamicToolCallbacks");
  },

  /** "supportsMcpTools": MCP tool calls are items with their server and tool names. */
  namesMcpTools(r: SeedRecord): boolean {
    return r.on("tools.supportsMcpTools");
  },

  /** "emitsProposedPlan: create accept/implementable plan artifacts"; otherwise the plan is the assistant's text. */
  proposesPlans(r: SeedRecord): boolean {
    return r.on("planning.emitsProposedPlan");
  },

  /** "supportsStructuredQuestions: create respondable user-input requests"; otherwise questions are text. */
  asksStructured(r: SeedRecord): boolean {
    return r.on("planning.supportsStructuredQuestions");
  },

  /**
   * Planning: "plan_updated unsupported -> no live todo UI; rely on assistant messages" (named at
   * session start, for plans and todo lists alike); plan updates without item ids go to the turn's
   * one plan (or todo list) by order; a plan that does not stream arrives whole with each update.
   */
  artifactDegradations(r: SeedRecord): string[] {
    const plans = r.on("planning.emitsPlanUpdated");
    const todos = r.on("planning.emitsTodoList");
    return [
      ...(plans ? [] : ["no_plan_artifacts"]),
      ...(todos ? [] : ["no_todo_artifacts"]),
      ...((plans || todos) && !r.on("planning.planDeltasHaveItemIds") ? ["plan_deltas_by_ordinal"] : []),
      ...(plans && !r.on("streaming.streamsPlanText") ? ["plan_text_at_completion"] : []),
    ];
  },

  /** "If model switching is unsupported, start a new provider session." */
  modelSwitch(r: SeedRecord): "in_session" | "new_session" {
    return r.on("sessions.supportsModelSwitchInSession") ? "in_session" : "new_session";
  },

  /** "fork unsupported -> synthetic fork from app projection"; a fork from inside a thread needs fork-from-turn. */
  forksNatively(r: SeedRecord, fromInside: boolean): boolean {
    return r.on("threads.canForkThread") && (!fromInside || r.on("threads.canForkFromTurn"));
  },

  /**
   * "If provider rollback is unsupported, filesystem rollback can still happen, but provider
   * conversation state must be restarted or marked divergent." The provider rolls back when the
   * thread allows it and the provider rolls its conversation back; the rollback is checked against
   * the snapshot it returns, or the conversation read afterwards; otherwise it is trusted.
   */
  rollback(r: SeedRecord, hasCheckpoint: boolean): "verified" | "trusted" | "divergent" | "unsupported" {
    if (r.on("threads.canRollbackThread") && r.on("checkpointing.providerCanRollbackConversation")) {
      const readable =
        r.on("threads.canReadThreadSnapshot") && r.on("checkpointing.providerCanReadConversationSnapshot");
      return readable || r.on("checkpointing.providerRollbackReturnsSnapshot") ? "verified" : "trusted";
    }
    return hasCheckpoint ? "divergent" : "unsupported";
  },

  /**
   * "nested checkpoint unsupported -> capture only root-run checkpoint and record child filesystem
   * activity as uncheckpointed".
   */
  nestedCheckpoints(r: SeedRecord): boolean {
    return r.on("checkpointing.supportsNestedCheckpointScopes");
  },

  /**
   * How a handoff reaches a provider: developer context first (the instructions channel a
   * coding agent reads as the app's), then system context, then — "provider switching should
   * require synthetic user context or be marked unsupported" — a user message, else refused.
   */
  delivery(r: SeedRecord): "developer" | "system" | "synthetic_user" | "refused" {
    if (r.on("context.acceptsDeveloperContext")) return "developer";
    if (r.on("context.acceptsSystemContext")) return "system";
    if (r.on("context.acceptsSyntheticUserContext")) return "synthetic_user";
    return "refused";
  },

  /**
   * "If supportsDeltaHandoff is available, return to a previous provider thread with a summary
   * of only off-provider runs. If delta handoff is unsupported ..., create a new provider thread
   * with a full thread summary."
   */
  returnsWithDelta(r: SeedRecord): boolean {
    return r.on("context.supportsDeltaHandoff");
  },

  /**
   * "If no provider can generate summaries, use the app's configured summarization provider or a
   * local summarizer capability": the receiving provider writes it where it can.
   */
  summaryWriter(r: SeedRecord): "provider" | "local" {
    return r.on("context.canGenerateSummaries") ? "provider" : "local";
  },

  /** A handoff summary is at most the receiving provider's recommended size (8,000 characters when it names none). */
  handoffBound(r: SeedRecord): number {
    return (r.get("context.maxRecommendedHandoffChars") as number | null) ?? 8_000;
  },

  /** "If pending requests do not survive restart, mark old requests not_resumable." */
  requestsSurviveRestart(r: SeedRecord): boolean {
    return r.on("sessions.pendingRequestsSurviveRestart");
  },

  /**
   * `approvalCallbacksAreLiveOnly`: an approval can be answered only through the live callback that asked. A runtime
   * that restarts answers through a new connection: only a provider whose callbacks are not live-only can take it.
   */
  approvalsOutliveConnection(r: SeedRecord): boolean {
    return !r.on("approvals.approvalCallbacksAreLiveOnly");
  },

  /**
   * Provider switching "via handoff": the conversation moves only between providers that both
   * take part in it; a provider that cannot consume handoff summaries cannot be told a
   * conversation it has not seen; one without full-thread handoff cannot be told the whole
   * conversation on a fresh thread. Each is a typed refusal, before the run is recorded.
   */
  handoffAdmission(
    from: SeedRecord | null,
    to: SeedRecord,
    need: "delta" | "full",
  ): "admitted" | "switch_refused" | "summary_refused" | "full_refused" {
    const switching = from !== null;
    if (
      switching &&
      !(
        from.on("sessions.supportsProviderSwitchingViaHandoff") && to.on("sessions.supportsProviderSwitchingViaHandoff")
      )
    )
      return "switch_refused";
    if (!to.on("context.canConsumeHandoffSummaries")) return "summary_refused";
    if (need === "full" && !to.on("context.supportsFullThreadHandoff")) return "full_refused";
    return "admitted";
  },
};
