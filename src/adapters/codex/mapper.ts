import type { RuntimeMode } from "../../domain/entities.js";
import type { ItemStatus, ItemStream, ProviderItemKind, RequestPayload, RequestResponse } from "../../domain/items.js";
import type { ProviderEvent, ProviderThreadSnapshot, SandboxPolicy } from "../contract.js";
import type {
  CodexServerRequests,
  ReasoningEffort,
  SandboxMode,
  ThreadItem,
  Turn,
  TurnPlanUpdatedNotification,
  TurnStartParams,
  UserInput,
} from "./protocol/types.js";
import { detailOf, kindOf, UPDATE_PLAN_TOOL } from "./tools.js";
import type { CodexNotification, CodexServerAnswer, CodexServerRequest, CodexThreadItem } from "./transport.js";
import { userContextMessages } from "../kit/context.js";
import type { HandoffContext } from "../contract.js";

/**
 * Codex app-server frames -> normalized provider events, and the runtime's words -> Codex's
 * (turn input, collaboration modes, answers), in one place; pure. The frames arrive checked
 * and typed (transport.ts). Plans are artifacts, not items: `turn/plan/updated` (the
 * `update_plan` tool) is the turn's live plan, a completed `plan` item (Plan mode's
 * `<proposed_plan>`) a proposed plan.
 */

type Where = { threadRef?: string; turnRef?: string };
const where = (threadId: string | null | undefined, turnId?: string | null): Where => {
  const at: Where = {};
  if (threadId) at.threadRef = threadId;
  if (turnId) at.turnRef = turnId;
  return at;
};

/** A notification as provider events (none for bookkeeping the runtime does not use). */
export function mapNotification(notification: CodexNotification): ProviderEvent[] {
  switch (notification.method) {
    case "turn/started": {
      const { threadId, turn } = notification.params;
      return [{ type: "turn.started", ...where(threadId, turn.id) }];
    }
    case "turn/completed": {
      const { threadId, turn } = notification.params;
      const status = turn.status === "interrupted" ? "interrupted" : turn.status === "failed" ? "failed" : "completed";
      return [
        {
          type: "turn.terminal",
          ...where(threadId, turn.id),
          status,
          threadDisposition: "reusable",
          failureClass: status === "failed" ? "provider_error" : null,
          message: turn.error?.message ?? null,
          retryable: false,
        },
      ];
    }
    case "turn/plan/updated":
      return [livePlan(notification.params)];
    case "item/started":
    case "item/completed": {
      const { threadId, turnId, item } = notification.params;
      return itemEvents(notification.method, where(threadId, turnId), item);
    }
    case "item/agentMessage/delta":
      return delta(notification.params, "assistant_message", "text");
    case "item/reasoning/summaryTextDelta":
      return delta(notification.params, "reasoning", "text");
    case "item/commandExecution/outputDelta":
      return delta(notification.params, "command_execution", "output");
    case "item/fileChange/outputDelta":
      return delta(notification.params, "file_change", "output");
    case "serverRequest/resolved": {
      const { threadId, requestId } = notification.params;
      return [{ type: "request.resolved", ...where(threadId), requestRef: String(requestId) }];
    }
    case "error": {
      const { threadId, turnId, error } = notification.params;
      return [{ type: "warning", ...where(threadId, turnId), message: error.message }];
    }
    case "warning":
      return [{ type: "warning", ...where(notification.params.threadId), message: notification.params.message }];
  }
}

function itemEvents(method: "item/started" | "item/completed", at: Where, item: CodexThreadItem): ProviderEvent[] {
  // Its text arrives whole at completion (its `item/plan/delta`s have no place in the contract).
  if (item.type === "plan")
    return method === "item/completed" ? [{ type: "plan.proposed", ...at, itemRef: item.id, text: item.text }] : [];
  const kind = kindOf(item);
  if (!kind) return [];
  if (method === "item/started") {
    const detail = detailOf(item);
    return [{ type: "item.started", ...at, itemRef: item.id, kind, ...(detail ? { detail } : {}) }];
  }
  const text =
    item.type === "agentMessage" ? item.text : item.type === "reasoning" ? reasoningText(item.summary) : undefined;
  const output = item.type === "commandExecution" ? (item.aggregatedOutput ?? undefined) : undefined;
  const exitCode = item.type === "commandExecution" ? (item.exitCode ?? undefined) : undefined;
  return [
    {
      type: "item.completed",
      ...at,
      itemRef: item.id,
      kind,
      status: itemStatus(item),
      ...(text !== undefined ? { text } : {}),
      ...(output !== undefined ? { output } : {}),
      ...(exitCode !== undefined ? { exitCode } : {}),
    },
  ];
}

function itemStatus(item: CodexThreadItem): ItemStatus {
  const status = "status" in item ? item.status : undefined;
  if (status === "failed") return "failed";
  if (status === "declined" || status === "rejected") return "declined";
  return "completed";
}

const STEP_STATUS = { pending: "pending", inProgress: "in_progress", completed: "completed" } as const;

/** `turn/plan/updated`: the whole plan each time, its steps with their statuses and an optional explanation. */
function livePlan({ threadId, turnId, plan, explanation }: TurnPlanUpdatedNotification): ProviderEvent {
  const steps = plan.map((s) => ({ step: s.step, status: STEP_STATUS[s.status] ?? "pending" }));
  return { type: "plan.updated", ...where(threadId, turnId), steps, ...(explanation != null ? { explanation } : {}) };
}

/** A streamed chunk, the most frequent frame by far: the common one (thread, turn and item named) in one literal. */
function delta(
  { threadId, turnId, itemId, delta }: { threadId: string; turnId: string; itemId: string; delta: string },
  kind: ProviderItemKind,
  stream: ItemStream,
): ProviderEvent[] {
  if (!delta) return [];
  if (threadId && turnId && itemId)
    return [{ type: "item.delta", threadRef: threadId, turnRef: turnId, itemRef: itemId, kind, stream, delta }];
  const at = where(threadId, turnId);
  return [{ type: "item.delta", ...at, ...(itemId ? { itemRef: itemId } : {}), kind, stream, delta }];
}

function reasoningText(summary: string[] | undefined): string | undefined {
  return summary && summary.length > 0 ? summary.join("\n") : undefined;
}

/**
 * A server request (approval, user input, tool call) as a `request.opened`, or null for one with
 * nothing to ask (no questions). A file-change approval names only its item: its change is the one
 * the item's start announced (`fileChanges`).
 */
export function mapServerRequest(
  { method, params }: CodexServerRequest,
  id: number,
  fileChanges: ReadonlyMap<string, { path: string; diff: string }>,
): Extract<ProviderEvent, { type: "request.opened" }> | null {
  let request: RequestPayload;
  switch (method) {
    case "item/commandExecution/requestApproval":
      request = {
        kind: "command",
        command: params.command ?? "",
        ...(params.cwd ? { cwd: params.cwd } : {}),
        ...(params.reason ? { reason: params.reason } : {}),
      };
      break;
    case "item/fileChange/requestApproval": {
      const change = fileChanges.get(params.itemId);
      request = {
        kind: "file_change",
        path: change?.path ?? "(unknown path)",
        ...(change?.diff ? { diff: change.diff } : {}),
      };
      break;
    }
    case "item/tool/requestUserInput": {
      const questions = params.questions.map((q) => ({
        id: q.id,
        question: q.question,
        ...(q.header ? { header: q.header } : {}),
        ...(q.options
          ? {
              options: q.options.map((o) => ({
                label: o.label,
                ...(o.description ? { description: o.description } : {}),
              })),
            }
          : {}),
      }));
      if (questions.length === 0) return null;
      request = { kind: "user_input", questions };
      break;
    }
    case "item/tool/call":
      // One of the embedder's tools (offered as dynamic tools): the runtime runs it and answers.
      request = { kind: "dynamic_tool", toolName: params.tool, input: params.arguments ?? null };
      break;
  }
  // A tool call names its item by its call id.
  const itemRef = "itemId" in params ? params.itemId : params.callId;
  return {
    type: "request.opened",
    ...where(params.threadId, params.turnId),
    requestRef: String(id),
    ...(itemRef ? { itemRef } : {}),
    request,
  };
}

/**
 * A Tiller answer in Codex's words: decisions for approvals, `{ answers: { id: { answers } } }` for questions, the
 * tool's text and success for a dynamic tool call (a declined call: a failure the model is told of).
 */
export function nativeResponse(method: keyof CodexServerRequests, response: RequestResponse): CodexServerAnswer {
  if (method === "item/tool/call") {
    const result = response.kind === "tool_result" ? response : { output: "declined by the client", success: false };
    return { contentItems: [{ type: "inputText", text: result.output }], success: result.success };
  }
  if (method === "item/tool/requestUserInput") {
    const answers = response.kind === "answers" ? response.answers : {};
    return {
      answers: Object.fromEntries(
        Object.entries(answers).map(([id, a]) => [id, { answers: Array.isArray(a) ? a : [a] }]),
      ),
    };
  }
  if (response.kind !== "decision") return { decision: "decline" };
  return { decision: response.decision === "accept_for_session" ? "acceptForSession" : response.decision };
}

// ---------------------------------------------------------------------------------------------
// The runtime's words in Codex's

const SANDBOX: Record<SandboxPolicy, SandboxMode> = {
  "read-only": "read-only",
  "workspace-write": "workspace-write",
  "full-access": "danger-full-access",
};

/**
 * What a thread runs under, wherever it is opened (start, resume, fork): its cwd, the session's sandbox, and the
 * update_plan tool offered. The approval policy is each turn's (adapter.ts, sendRun).
 */
export function threadOpening(cwd: string, sandbox: SandboxPolicy) {
  return { cwd, sandbox: SANDBOX[sandbox], config: UPDATE_PLAN_TOOL };
}

const textInput = (text: string): UserInput => ({ type: "text", text, text_elements: [] });

/** A turn's input: a handoff's context goes in as user context (Codex takes developer instructions at thread start). */
export function turnInput(text: string, context?: HandoffContext | null): UserInput[] {
  return [...userContextMessages(context, "codex").map(textInput), textInput(text)];
}

export const steerInput = (text: string): UserInput[] => [textInput(text)];

/** What a thread runs with, from its start, resume or fork response: a mode must restate both. */
export interface ThreadTuning {
  model: string;
  effort: ReasoningEffort | null;
}

/**
 * Codex's collaboration modes (`turn/start.collaborationMode`, experimental API), measured on the
 * pinned binary. `default`: the `update_plan` tool works (once enabled, tools.ts) and each call is a
 * `turn/plan/updated`; `request_user_input` answers the model "unavailable in Default mode"; a
 * `<proposed_plan>` block stays assistant text. `plan`: `request_user_input` becomes an
 * `item/tool/requestUserInput` server request; a `<proposed_plan>` block becomes a `plan` item;
 * `update_plan` answers "not allowed in Plan mode". A runtime mode's interaction names the mode.
 *
 * Codex keeps a turn's mode for the turns after it, so every turn names its own. A mode overrides
 * the model and the reasoning effort too: both are restated from the thread (an unset effort would
 * drop the configured one); `developer_instructions: null` keeps Codex's built-in instructions.
 */
export function collaborationMode(
  mode: RuntimeMode["interaction"],
  tuning: ThreadTuning,
): Pick<TurnStartParams, "collaborationMode"> {
  return {
    collaborationMode: {
      mode,
      settings: { model: tuning.model, reasoning_effort: tuning.effort, developer_instructions: null },
    },
  };
}

const TURN_STATUS = {
  inProgress: "running",
  interrupted: "interrupted",
  failed: "failed",
  completed: "completed",
} as const;

/** A thread's turns as the runtime's snapshot (`thread/read`). */
export function snapshotOf(threadRef: string, turns: Turn[]): ProviderThreadSnapshot {
  return {
    threadRef,
    turns: turns.map((t) => ({
      turnRef: t.id,
      status: TURN_STATUS[t.status] ?? "completed",
      userText: itemsText(t.items, "userMessage"),
      assistantText: itemsText(t.items, "agentMessage"),
    })),
  };
}

function itemsText(items: ThreadItem[], type: "userMessage" | "agentMessage"): string {
  return items
    .map((i) =>
      i.type !== type
        ? null
        : i.type === "agentMessage"
          ? i.text
          : i.type === "userMessage"
            ? i.content.map((c) => (c.type === "text" ? c.text : "")).join("")
            : null,
    )
    .filter((text): text is string => text !== null)
    .join("\n");
}
