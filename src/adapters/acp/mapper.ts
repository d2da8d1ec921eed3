import type { TurnTerminalStatus } from "../../domain/entities.js";
import type { RequestPayload, RequestResponse, StepStatus } from "../../domain/items.js";
import type { HandoffContext, ProviderEvent } from "../contract.js";
import { userContextMessages } from "../kit/context.js";
import type {
  ContentBlock,
  PermissionOption,
  PromptResponse,
  RequestPermissionRequest,
  RequestPermissionResponse,
  SessionUpdate,
} from "./protocol/sdk.js";
import {
  exitCodeOf,
  itemKindOf,
  knownTool,
  merge,
  outputOf,
  permissionPayload,
  toolDetail,
  type KnownTool,
  type RawOutputFields,
} from "./tools.js";

/**
 * ACP `session/update`s -> normalized provider events, per ACP session (one provider thread). ACP has no turn ids and
 * no turn start: a turn is one `session/prompt`, from the request to its response (whose `stopReason` is the turn's
 * end, strong). Messages and thoughts stream as chunks with no end of their own: a run of chunks of one kind (and one
 * `messageId`, where the agent gives ids) is one item, ended by whatever update comes next or by the turn's end. Pure:
 * the state it reads and keeps is the caller's, one per ACP session.
 */

export interface AcpThreadState {
  /** The message or thought whose chunks are streaming, if any. */
  open: { kind: "assistant_message" | "reasoning"; itemRef: string | undefined } | null;
  /** Tool calls by id, as far as the agent described them. */
  tools: Map<string, KnownTool>;
}

export const newThreadState = (): AcpThreadState => ({ open: null, tools: new Map() });

type Where = { threadRef: string };

/**
 * The open message or thought ends: the turn ended (`always`), or another update came. A message the agent gave an id
 * goes on until a chunk of another message comes (its chunks may resume after a tool call).
 */
export function closeOpen(state: AcpThreadState, where: Where, always = false): ProviderEvent[] {
  const open = state.open;
  if (!open || (open.itemRef && !always)) return [];
  state.open = null;
  return [
    {
      type: "item.completed",
      ...where,
      kind: open.kind,
      ...(open.itemRef ? { itemRef: open.itemRef } : {}),
      status: "completed",
    },
  ];
}

/** What a chunk streams: its text; any other content (an image...) is not projected (GAP.md). */
const textOf = (block: ContentBlock): string | null => (block.type === "text" ? block.text : null);

function chunk(
  state: AcpThreadState,
  where: Where,
  kind: "assistant_message" | "reasoning",
  content: ContentBlock,
  messageId: string | null | undefined,
): ProviderEvent[] {
  const text = textOf(content);
  if (text === null || text === "") return [];
  const itemRef = messageId || undefined;
  const events: ProviderEvent[] = [];
  const open = state.open;
  if (open && (open.kind !== kind || open.itemRef !== itemRef)) events.push(...closeOpen(state, where, true));
  if (!state.open) {
    state.open = { kind, itemRef };
    events.push({ type: "item.started", ...where, kind, ...(itemRef ? { itemRef } : {}) });
  }
  events.push({ type: "item.delta", ...where, kind, ...(itemRef ? { itemRef } : {}), stream: "text", delta: text });
  return events;
}

const PLAN_STATUS: Record<string, StepStatus> = {
  pending: "pending",
  in_progress: "in_progress",
  completed: "completed",
};

/** One `session/update` of a live turn; `raw`: where the agent puts a tool's output in its raw output, if anywhere. */
export function mapUpdate(
  state: AcpThreadState,
  where: Where,
  update: SessionUpdate,
  raw: RawOutputFields = {},
): ProviderEvent[] {
  switch (update.sessionUpdate) {
    case "agent_message_chunk":
      return chunk(state, where, "assistant_message", update.content, update.messageId);
    case "agent_thought_chunk":
      return chunk(state, where, "reasoning", update.content, update.messageId);
    // The user's own message (an echo, or a steer's): the agent's message before it is over; nothing is projected.
    case "user_message_chunk":
      return closeOpen(state, where, true);
    case "tool_call":
    case "tool_call_update": {
      const known = state.tools.get(update.toolCallId);
      const tool = known ? merge(known, update) : knownTool(update);
      state.tools.set(tool.toolCallId, tool);
      return [...closeOpen(state, where), ...toolEvents(where, tool, update.status ?? null, raw)];
    }
    case "plan":
      return [
        ...closeOpen(state, where),
        {
          type: "plan.updated",
          ...where,
          steps: update.entries.map((e) => ({ step: e.content, status: PLAN_STATUS[e.status] ?? "pending" })),
        },
      ];
    // What ACP says of the session rather than the turn (commands, modes, config, title, usage, notices, compaction,
    // subagents): not projected (GAP.md).
    default:
      return [];
  }
}

/** A tool call's item: started once, ended once (by a `completed` or `failed` status). */
function toolEvents(
  where: Where,
  tool: KnownTool,
  status: string | null,
  raw: RawOutputFields,
  start = !tool.pending,
): ProviderEvent[] {
  if (tool.ended) return [];
  const ref = tool.toolCallId ? { itemRef: tool.toolCallId } : {};
  const events: ProviderEvent[] = [];
  // A call the agent says is pending is still being described (its input streams, or it waits for a permission): its
  // item starts when it runs, asks, ends, or the turn ends, with what the agent has said of it by then.
  if (!tool.started && !start) return [];
  if (!tool.started) {
    tool.started = itemKindOf(tool.kind);
    events.push({ type: "item.started", ...where, ...ref, kind: tool.started, detail: toolDetail(tool) });
  }
  const kind = tool.started;
  if (status === "completed" || status === "failed") {
    tool.ended = true;
    const output = outputOf(tool, raw);
    const exitCode = exitCodeOf(tool, raw);
    events.push({
      type: "item.completed",
      ...where,
      ...ref,
      kind,
      status,
      ...(output ? { output } : {}),
      ...(exitCode === undefined ? {} : { exitCode }),
    });
  }
  return events;
}

/**
 * A permission request: the tool call it is about (started here when the agent asked before announcing it) and what
 * it asks.
 */
export function permissionRequest(
  state: AcpThreadState,
  where: Where,
  params: RequestPermissionRequest,
): { events: ProviderEvent[]; itemRef: string | undefined; request: RequestPayload } {
  const known = state.tools.get(params.toolCall.toolCallId);
  const tool = known ? merge(known, params.toolCall) : knownTool(params.toolCall);
  state.tools.set(tool.toolCallId, tool);
  const events = [...closeOpen(state, where), ...toolEvents(where, tool, null, {}, true)];
  return { events, itemRef: tool.toolCallId || undefined, request: permissionPayload(tool) };
}

/**
 * The runtime's answer as the agent's options: an approval for once picks "allow once"; one for the session "allow
 * always" (else once); a refusal picks a reject option (once, else always); a cancellation, or a decision the agent
 * offers no option for, is the `cancelled` outcome.
 */
export function permissionAnswer(options: PermissionOption[], response: RequestResponse): RequestPermissionResponse {
  const decision = response.kind === "decision" ? response.decision : "decline";
  const wanted: Record<string, Array<PermissionOption["kind"]>> = {
    // Never more than was granted: a yes for once is no yes for the session.
    accept: ["allow_once"],
    accept_for_session: ["allow_always", "allow_once"],
    decline: ["reject_once", "reject_always"],
    cancel: [],
  };
  for (const kind of wanted[decision] ?? []) {
    const option = options.find((o) => o.kind === kind);
    if (option) return { outcome: { outcome: "selected", optionId: option.optionId } };
  }
  return { outcome: { outcome: "cancelled" } };
}

/** The request's outcome as the app stream tells it (`request.resolved`). */
export function outcomeOf(options: PermissionOption[], answer: RequestPermissionResponse): string {
  if (answer.outcome.outcome === "cancelled") return "cancelled";
  const optionId = answer.outcome.optionId;
  const kind = options.find((o) => o.optionId === optionId)?.kind;
  return kind === "allow_always" ? "accept_for_session" : kind?.startsWith("allow") ? "accept" : "decline";
}

/** The calls the agent announced that never ran nor asked: started at the turn's end (which cancels them). */
function startPending(state: AcpThreadState, where: Where): ProviderEvent[] {
  return [...state.tools.values()].flatMap((tool) => (tool.started ? [] : toolEvents(where, tool, null, {}, true)));
}

/**
 * A prompt's response: the turn's end (after the open message or thought ends). `cancelled` is an interrupt where the
 * client asked for one (`session/cancel`); unasked, the agent cancelled the turn itself (codex-acp does, when a
 * permission is refused): the turn is `cancelled`, said so.
 */
export function turnEnded(
  state: AcpThreadState,
  where: Where,
  response: PromptResponse,
  cancelAsked: boolean,
): ProviderEvent[] {
  const unasked = response.stopReason === "cancelled" && !cancelAsked;
  const ended = unasked
    ? { status: "cancelled" as const, failureClass: "cancelled_by_agent" }
    : (STOP[response.stopReason] ?? { status: "failed" as const, failureClass: "unknown_stop_reason" });
  return [
    ...closeOpen(state, where, true),
    ...startPending(state, where),
    {
      type: "turn.terminal",
      ...where,
      status: ended.status,
      threadDisposition: "reusable",
      failureClass: ended.failureClass ?? null,
      message: ended.failureClass ? `the agent stopped: ${response.stopReason}` : null,
      retryable: false,
    },
  ];
}

/**
 * A prompt the agent refused or failed (a JSON-RPC error: `provider_error`), or answered out of shape
 * (`protocol_error`): the turn failed, the thread is still usable.
 */
export function turnFailed(
  state: AcpThreadState,
  where: Where,
  message: string,
  failureClass: "provider_error" | "protocol_error" = "provider_error",
): ProviderEvent[] {
  return [
    ...closeOpen(state, where, true),
    ...startPending(state, where),
    {
      type: "turn.terminal",
      ...where,
      status: "failed",
      threadDisposition: "reusable",
      failureClass,
      message,
      retryable: false,
    },
  ];
}

const STOP: Record<string, { status: TurnTerminalStatus; failureClass?: string }> = {
  end_turn: { status: "completed" },
  cancelled: { status: "interrupted" },
  max_tokens: { status: "failed", failureClass: "max_tokens" },
  max_turn_requests: { status: "failed", failureClass: "max_turn_requests" },
  refusal: { status: "failed", failureClass: "refusal" },
};

/**
 * A turn's prompt: the handoff or fork context first, under the kit's header, as the user's (the one way ACP takes
 * it: a context the runtime would deliver otherwise is refused, typed), then the user's text.
 */
export function promptOf(text: string, context: HandoffContext | null): ContentBlock[] {
  return [...userContextMessages(context, "acp"), text].map((t) => ({ type: "text", text: t }));
}
