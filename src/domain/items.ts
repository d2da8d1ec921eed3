import { z } from "zod";

/**
 * What happens inside a turn, named once: the kinds of node in a run's tree, what a request
 * asks and how it is answered, how an item ends. Adapters, the normalizer, machines and
 * projections import these lists; none of them writes one again.
 *
 * Three layers name a turn's contents, and their names are kept (the log's and the read
 * model's are persisted or public):
 *   provider item kind (adapter contract) -> node kind (event log) -> turn item kind (RunView.items)
 * A provider item kind is a node kind (a subset, same names), so nothing maps it; the log's
 * names become the read model's through one table, TURN_ITEM_KIND_OF_NODE.
 */

/** Opaque provider payloads (tool inputs) must survive the trip to the JSON log. */
const jsonValue = z.unknown().refine((value) => {
  try {
    return value === undefined || JSON.stringify(value) !== undefined;
  } catch {
    return false;
  }
}, "must be JSON-serializable");

/** A node of a run's tree, as `node.started` records it. */
export const NodeKindSchema = z.enum([
  "root_turn",
  "assistant_message",
  "reasoning",
  "plan",
  "todo_list",
  "tool_call",
  "command_execution",
  "file_change",
  "approval_request",
  "user_input_request",
  "subagent",
]);
export type NodeKind = z.infer<typeof NodeKindSchema>;

/** The nodes a provider reports as items (`item.started`, `item.delta`, `item.completed`). */
export const ProviderItemKindSchema = NodeKindSchema.extract([
  "assistant_message",
  "reasoning",
  "tool_call",
  "command_execution",
  "file_change",
]);
export type ProviderItemKind = z.infer<typeof ProviderItemKindSchema>;

/** An entry of a run's transcript (`RunView.items`): provider nodes and what the runtime adds. */
export const TurnItemKindSchema = z.enum([
  "user_message",
  "assistant_message",
  "reasoning",
  "plan",
  "proposed_plan",
  "todo_list",
  "command",
  "file_change",
  "tool",
  "approval",
  "question",
  "subagent",
  "interrupt_request",
  "interrupt_result",
  "handoff",
  "error",
]);
export type TurnItemKind = z.infer<typeof TurnItemKindSchema>;

/** The transcript item a node shows as; the root turn is the run itself, not an item. */
export const TURN_ITEM_KIND_OF_NODE: Readonly<Record<NodeKind, TurnItemKind | null>> = {
  root_turn: null,
  assistant_message: "assistant_message",
  reasoning: "reasoning",
  plan: "plan",
  todo_list: "todo_list",
  tool_call: "tool",
  command_execution: "command",
  file_change: "file_change",
  approval_request: "approval",
  user_input_request: "question",
  subagent: "subagent",
};

/**
 * What ends with its turn when the turn ends: messages, reasoning, plans and todo lists. A
 * tool, command, file change or request still open at a completed turn never finished: it is
 * cancelled.
 */
export const ENDS_WITH_TURN: ReadonlySet<TurnItemKind> = new Set([
  "assistant_message",
  "reasoning",
  "plan",
  "proposed_plan",
  "todo_list",
]);

/** How a provider says an item ended. */
export const ItemStatusSchema = z.enum(["completed", "failed", "cancelled", "declined"]);
export type ItemStatus = z.infer<typeof ItemStatusSchema>;

/** Which of an item's texts a delta extends: its text, or its tool's output. */
export const ItemStreamSchema = z.enum(["text", "output"]);
export type ItemStream = z.infer<typeof ItemStreamSchema>;

/** The MCP server and tool an MCP tool call went to (`tools.supportsMcpTools`). */
export const McpToolRefSchema = z.strictObject({ server: z.string().min(1), tool: z.string().min(1) });
export type McpToolRef = z.infer<typeof McpToolRefSchema>;

export const ItemDetailSchema = z.strictObject({
  toolName: z.string().optional(),
  /** Present on a tool call made through an MCP server, where the record says the provider has MCP tools. */
  mcp: McpToolRefSchema.optional(),
  input: jsonValue.optional(),
  command: z.string().optional(),
  path: z.string().optional(),
  diff: z.string().optional(),
});
export type ItemDetail = z.infer<typeof ItemDetailSchema>;

const stepStatus = z.enum(["pending", "in_progress", "completed"]);
export const PlanStepSchema = z.strictObject({ step: z.string(), status: stepStatus });
export const TodoItemSchema = z.strictObject({ text: z.string(), status: stepStatus });
export type StepStatus = z.infer<typeof stepStatus>;

export const QuestionSchema = z.strictObject({
  id: z.string().min(1),
  question: z.string(),
  header: z.string().optional(),
  options: z.array(z.strictObject({ label: z.string(), description: z.string().optional() })).optional(),
  multiSelect: z.boolean().optional(),
});
export type Question = z.infer<typeof QuestionSchema>;

/** What a provider asks permission for; each has its own approval capability. */
const ApprovalPayloadSchema = z.discriminatedUnion("kind", [
  z.strictObject({
    kind: z.literal("command"),
    command: z.string(),
    cwd: z.string().optional(),
    reason: z.string().optional(),
  }),
  z.strictObject({ kind: z.literal("file_read"), path: z.string() }),
  z.strictObject({ kind: z.literal("file_change"), path: z.string(), diff: z.string().optional() }),
  z.strictObject({ kind: z.literal("apply_patch"), patch: z.string() }),
]);
export type ApprovalKind = z.infer<typeof ApprovalPayloadSchema>["kind"];

/**
 * What a request asks: an approval (of a command, a file read or change, a patch; of another of the
 * provider's own tools; of a proposed plan, to carry it out), answers to questions, or a call of the
 * embedder's tool (answered by the runtime).
 */
export const RequestPayloadSchema = z.discriminatedUnion("kind", [
  ...ApprovalPayloadSchema.options,
  /** Another of the provider's tools asks before it runs (no approval capability of its own: always allowed). */
  z.strictObject({ kind: z.literal("tool_approval"), toolName: z.string(), input: jsonValue }),
  /** The provider asks to carry its proposed plan out (`planning.emitsProposedPlan`). */
  z.strictObject({ kind: z.literal("plan_approval"), plan: z.string() }),
  z.strictObject({ kind: z.literal("user_input"), questions: z.array(QuestionSchema).min(1) }),
  z.strictObject({ kind: z.literal("dynamic_tool"), toolName: z.string(), input: jsonValue }),
]);
export type RequestPayload = z.infer<typeof RequestPayloadSchema>;
export type RequestKind = RequestPayload["kind"];

/** The node a request opens in the run's tree: questions are asked, everything else is approved. */
export const NODE_KIND_OF_REQUEST: Readonly<
  Record<RequestKind, Extract<NodeKind, "approval_request" | "user_input_request">>
> = {
  command: "approval_request",
  file_read: "approval_request",
  file_change: "approval_request",
  apply_patch: "approval_request",
  tool_approval: "approval_request",
  plan_approval: "approval_request",
  dynamic_tool: "approval_request",
  user_input: "user_input_request",
};

/** Requests the runtime answers itself (a dynamic tool call runs the embedder's tool): never a user's to answer. */
export function isAnsweredByRuntime(kind: RequestKind): boolean {
  return kind === "dynamic_tool";
}

export const RequestDecisionSchema = z.enum(["accept", "accept_for_session", "decline", "cancel"]);
export type RequestDecision = z.infer<typeof RequestDecisionSchema>;

/**
 * An answer to a request: a decision for an approval, answers (by question id) for questions, and a tool's result
 * for a dynamic tool call (given by the runtime, from the embedder's registered tool, never by a user): its output as
 * text (a result that is not a string is its JSON), and whether the tool succeeded.
 */
export const RequestResponseSchema = z.discriminatedUnion("kind", [
  z.strictObject({ kind: z.literal("decision"), decision: RequestDecisionSchema }),
  z.strictObject({
    kind: z.literal("answers"),
    answers: z.record(z.string(), z.union([z.string(), z.array(z.string())])),
  }),
  z.strictObject({ kind: z.literal("tool_result"), output: z.string(), success: z.boolean() }),
]);
export type RequestResponse = z.infer<typeof RequestResponseSchema>;

/** The answer each kind of request takes: answers for questions, a tool's result for a tool call, else a decision. */
export const RESPONSE_KIND_OF_REQUEST: Readonly<Record<RequestKind, RequestResponse["kind"]>> = {
  command: "decision",
  file_read: "decision",
  file_change: "decision",
  apply_patch: "decision",
  tool_approval: "decision",
  plan_approval: "decision",
  dynamic_tool: "tool_result",
  user_input: "answers",
};
