import { z } from "zod";
import type {
  ItemStatus,
  ItemStream,
  ProviderItemKind,
  RequestDecision,
  RequestPayload,
  RequestResponse,
  StepStatus,
} from "../../domain/items.js";
import type { ProviderEvent } from "../contract.js";

/**
 * Codex app-server frames -> normalized provider events, in one place. Item kinds map from
 * exact native type names; a native item this adapter does not project becomes a
 * `tool_call` named `codex:<type>` (visibly unknown, never silently dropped). Plans are
 * artifacts, not items: `turn/plan/updated` (the `update_plan` tool) is the turn's live plan, a
 * completed `plan` item (Plan mode's `<proposed_plan>`) a proposed plan.
 */

const ItemSchema = z.looseObject({ type: z.string(), id: z.string() });
type NativeItem = z.infer<typeof ItemSchema> & Record<string, unknown>;

const KNOWN: Record<string, ProviderItemKind> = {
  agentMessage: "assistant_message",
  reasoning: "reasoning",
  commandExecution: "command_execution",
  fileChange: "file_change",
  mcpToolCall: "tool_call",
  dynamicToolCall: "tool_call",
};
/** Native items that are not part of the agent's output (the user's own message, bookkeeping). */
const IGNORED = new Set(["userMessage", "hookPrompt", "contextCompaction", "enteredReviewMode", "exitedReviewMode"]);

const str = (v: unknown): string | undefined => (typeof v === "string" ? v : undefined);

function kindOf(item: NativeItem): ProviderItemKind | null {
  if (IGNORED.has(item.type)) return null;
  return KNOWN[item.type] ?? "tool_call";
}

function detailOf(
  item: NativeItem,
): NonNullable<Extract<ProviderEvent, { type: "item.started" }>["detail"]> | undefined {
  switch (item.type) {
    case "commandExecution":
      return { command: str(item.command) ?? "" };
    case "fileChange": {
      const changes = Array.isArray(item.changes) ? (item.changes as Array<{ path?: string; diff?: string }>) : [];
      return {
        path: changes
          .map((c) => c.path)
          .filter(Boolean)
          .join(", "),
        diff: changes.map((c) => c.diff ?? "").join("\n"),
      };
    }
    // Not tagged `mcp`: the record says no MCP tools until a real-binary test shows one (GAP.md).
    case "mcpToolCall":
      return { toolName: `${str(item.server) ?? "mcp"}.${str(item.tool) ?? "unknown"}`, input: item.arguments ?? null };
    case "dynamicToolCall":
      return {
        toolName: str(item.namespace) ? `${str(item.namespace)}.${str(item.tool)}` : (str(item.tool) ?? "unknown"),
        input: item.arguments ?? null,
      };
    default:
      return item.type in KNOWN ? undefined : { toolName: `codex:${item.type}` };
  }
}

function itemStatus(item: NativeItem): ItemStatus {
  const status = str(item.status);
  if (status === "failed") return "failed";
  if (status === "declined" || status === "rejected") return "declined";
  return "completed";
}

const where = (params: Record<string, unknown>) => {
  const threadRef = str(params.threadId);
  const turnRef = str(params.turnId) ?? str((params.turn as Record<string, unknown> | undefined)?.id);
  return { ...(threadRef ? { threadRef } : {}), ...(turnRef ? { turnRef } : {}) };
};

/** A notification as provider events (none for bookkeeping the runtime does not use). */
export function mapNotification(method: string, raw: unknown): ProviderEvent[] {
  const params = (raw ?? {}) as Record<string, unknown>;
  const at = where(params);
  switch (method) {
    case "turn/started":
      return [{ type: "turn.started", ...at }];
    case "turn/completed": {
      const turn = (params.turn ?? {}) as { status?: string; error?: { message?: string } | null };
      const status = turn.status === "interrupted" ? "interrupted" : turn.status === "failed" ? "failed" : "completed";
      const failed = status === "failed";
      return [
        {
          type: "turn.terminal",
          ...at,
          status,
          threadDisposition: "reusable",
          failureClass: failed ? "provider_error" : null,
          message: turn.error?.message ?? null,
          retryable: false,
        },
      ];
    }
    case "turn/plan/updated":
      return [livePlan(at, params)];
    case "item/started":
    case "item/completed": {
      const parsed = ItemSchema.safeParse(params.item);
      if (!parsed.success) return [];
      const item = parsed.data as NativeItem;
      // Its text arrives whole at completion (its `item/plan/delta`s have no place in the contract).
      if (item.type === "plan")
        return method === "item/completed"
          ? [{ type: "plan.proposed", ...at, itemRef: item.id, text: str(item.text) ?? "" }]
          : [];
      const kind = kindOf(item);
      if (!kind) return [];
      if (method === "item/started") {
        const detail = detailOf(item);
        return [{ type: "item.started", ...at, itemRef: item.id, kind, ...(detail ? { detail } : {}) }];
      }
      const text =
        item.type === "agentMessage" ? str(item.text) : item.type === "reasoning" ? reasoningText(item) : undefined;
      const output = str(item.aggregatedOutput);
      const exitCode = typeof item.exitCode === "number" ? item.exitCode : undefined;
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
    case "item/agentMessage/delta":
      return delta(at, params, "assistant_message", "text");
    case "item/reasoning/summaryTextDelta":
      return delta(at, params, "reasoning", "text");
    case "item/commandExecution/outputDelta":
      return delta(at, params, "command_execution", "output");
    case "item/fileChange/outputDelta":
      return delta(at, params, "file_change", "output");
    case "serverRequest/resolved":
      return [{ type: "request.resolved", ...at, requestRef: String(params.requestId) }];
    case "error":
    case "warning":
      return [
        {
          type: "warning",
          ...at,
          message: str((params.error as { message?: string } | undefined)?.message) ?? str(params.message) ?? method,
        },
      ];
    default:
      return [];
  }
}

const STEP_STATUS: Record<string, StepStatus> = {
  pending: "pending",
  inProgress: "in_progress",
  completed: "completed",
};

/** `turn/plan/updated`: the whole plan each time, its steps with their statuses and an optional explanation. */
function livePlan(at: ReturnType<typeof where>, params: Record<string, unknown>): ProviderEvent {
  const native = Array.isArray(params.plan) ? (params.plan as Array<{ step?: unknown; status?: unknown }>) : [];
  const steps = native.map((s) => ({ step: str(s.step) ?? "", status: STEP_STATUS[str(s.status) ?? ""] ?? "pending" }));
  const explanation = str(params.explanation);
  return { type: "plan.updated", ...at, steps, ...(explanation !== undefined ? { explanation } : {}) };
}

function delta(
  at: ReturnType<typeof where>,
  params: Record<string, unknown>,
  kind: ProviderItemKind,
  stream: ItemStream,
): ProviderEvent[] {
  const text = str(params.delta);
  const itemRef = str(params.itemId);
  return text ? [{ type: "item.delta", ...at, ...(itemRef ? { itemRef } : {}), kind, stream, delta: text }] : [];
}

function reasoningText(item: NativeItem): string | undefined {
  const summary = Array.isArray(item.summary)
    ? (item.summary as unknown[]).map((s) => (typeof s === "string" ? s : (str((s as { text?: string }).text) ?? "")))
    : [];
  return summary.length > 0 ? summary.join("\n") : undefined;
}

/**
 * A server request (approval, user input) as a `request.opened`, or null for one the adapter
 * does not project (the caller declines it so the turn is never stuck).
 */
export function mapServerRequest(
  method: string,
  raw: unknown,
  id: number,
  fileChanges: ReadonlyMap<string, { path: string; diff: string }>,
): Extract<ProviderEvent, { type: "request.opened" }> | null {
  const params = (raw ?? {}) as Record<string, unknown>;
  const at = where(params);
  const itemRef = str(params.itemId);
  let request: RequestPayload;
  switch (method) {
    case "item/commandExecution/requestApproval":
      request = {
        kind: "command",
        command: str(params.command) ?? "",
        ...(str(params.cwd) ? { cwd: str(params.cwd)! } : {}),
        ...(str(params.reason) ? { reason: str(params.reason)! } : {}),
      };
      break;
    case "item/fileChange/requestApproval": {
      const change = itemRef ? fileChanges.get(itemRef) : undefined;
      request = {
        kind: "file_change",
        path: change?.path ?? "(unknown path)",
        ...(change?.diff ? { diff: change.diff } : {}),
      };
      break;
    }
    case "item/tool/requestUserInput": {
      const native = Array.isArray(params.questions) ? (params.questions as Array<Record<string, unknown>>) : [];
      const questions = native.map((q) => ({
        id: str(q.id) ?? "question",
        question: str(q.question) ?? "",
        ...(str(q.header) ? { header: str(q.header)! } : {}),
        ...(Array.isArray(q.options)
          ? {
              options: (q.options as Array<{ label?: string; description?: string }>).map((o) => ({
                label: o.label ?? "",
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
      request = { kind: "dynamic_tool", toolName: str(params.tool) ?? "", input: params.arguments ?? null };
      break;
    default:
      return null;
  }
  // A tool call names its item by its call id.
  const item = itemRef ?? (method === "item/tool/call" ? str(params.callId) : undefined);
  return { type: "request.opened", ...at, requestRef: String(id), ...(item ? { itemRef: item } : {}), request };
}

/**
 * A Tiller answer in Codex's words: decisions for approvals, `{ answers: { id: { answers } } }` for questions, the
 * tool's text and success for a dynamic tool call (a declined call: a failure the model is told of).
 */
export function nativeResponse(method: string, response: RequestResponse): unknown {
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
  return { decision: response.kind === "decision" ? nativeDecision(response.decision) : "decline" };
}

/** A Tiller decision in Codex's words. */
export function nativeDecision(decision: RequestDecision): string {
  return decision === "accept_for_session" ? "acceptForSession" : decision;
}
