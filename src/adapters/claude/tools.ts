import type { ItemDetail, ProviderItemKind, RequestPayload, StepStatus } from "../../domain/items.js";
import type {
  AgentInput,
  AskUserQuestionInput,
  BashInput,
  FileEditInput,
  FileReadInput,
  FileWriteInput,
  NotebookEditInput,
  TodoWriteInput,
} from "./protocol/sdk.js";

/**
 * Claude's tools, by exact name: which is which item kind, what its item shows, and what its permission prompt asks.
 * A tool's input is what the model wrote, unchecked: each field is read under the name the SDK's tool input types
 * give it (so a renamed field fails to compile) and checked for its type here. Tools named nowhere below stay
 * `tool_call`s under their own name.
 */

/** A tool use's input, as the model wrote it. */
export type ToolInput = Record<string, unknown>;

/** The subagent tool: `Agent` in Claude Code 2.x, `Task` before. */
export const SUBAGENT_TOOLS = new Set(["Agent", "Task"]);

const TOOL_KIND: Record<string, ProviderItemKind> = {
  Bash: "command_execution",
  Edit: "file_change",
  Write: "file_change",
  NotebookEdit: "file_change",
};

const str = (v: unknown): string | undefined => (typeof v === "string" ? v : undefined);
/** A string field of a tool's input, named as the SDK's type for that tool's input names it. */
const field = <T>(input: ToolInput, key: keyof T & string): string | undefined => str(input[key]);

/** The path a file tool acts on. */
const filePath = (input: ToolInput): string =>
  field<FileEditInput | FileWriteInput>(input, "file_path") ?? field<NotebookEditInput>(input, "notebook_path") ?? "";

/**
 * ExitPlanMode's plan: the pinned SDK's `ExitPlanModeInput` leaves it untyped (an index signature), but Claude Code
 * sends the plan as `plan`.
 */
const planOf = (input: ToolInput): string => str(input.plan) ?? "";

type TodoItem = { text: string; status: StepStatus };

/** What a tool use is to the runtime. */
export type ToolIdentity =
  | { role: "todo"; items: TodoItem[] }
  | { role: "plan"; text: string }
  | { role: "subagent"; agent: string; prompt?: string }
  | { role: "item"; kind: ProviderItemKind; detail: ItemDetail };

type Todo = Partial<TodoWriteInput["todos"][number]>;
const stepStatus = (s: unknown): StepStatus =>
  s === "completed" ? "completed" : s === "in_progress" ? "in_progress" : "pending";

/** TodoWrite is a todo list, ExitPlanMode's plan a proposed plan, the Agent tool a subagent; the rest items. */
export function identify(name: string, input: ToolInput): ToolIdentity {
  if (name === "TodoWrite") {
    const todos = Array.isArray(input.todos) ? (input.todos as Todo[]) : [];
    return { role: "todo", items: todos.map((t) => ({ text: str(t?.content) ?? "", status: stepStatus(t?.status) })) };
  }
  if (name === "ExitPlanMode") return { role: "plan", text: planOf(input) };
  if (SUBAGENT_TOOLS.has(name)) {
    const prompt = field<AgentInput>(input, "prompt");
    return {
      role: "subagent",
      agent: field<AgentInput>(input, "subagent_type") ?? "general-purpose",
      ...(prompt ? { prompt } : {}),
    };
  }
  const kind = TOOL_KIND[name] ?? "tool_call";
  if (kind === "command_execution")
    return { role: "item", kind, detail: { command: field<BashInput>(input, "command") ?? "" } };
  if (kind === "file_change") {
    const added = field<FileEditInput>(input, "new_string");
    return { role: "item", kind, detail: { path: filePath(input), ...(added ? { diff: `+${added}` } : {}) } };
  }
  return { role: "item", kind, detail: { toolName: name, input: input as ItemDetail["input"] } };
}

type Asked = Partial<AskUserQuestionInput["questions"][number]>;
type Option = Partial<NonNullable<Asked["options"]>[number]>;

/** A tool use as the request a permission prompt stands for. */
export function permissionPayload(tool: string, input: ToolInput): RequestPayload {
  if (tool === "Bash") {
    const reason = field<BashInput>(input, "description");
    return { kind: "command", command: field<BashInput>(input, "command") ?? "", ...(reason ? { reason } : {}) };
  }
  if (TOOL_KIND[tool] === "file_change") return { kind: "file_change", path: filePath(input) };
  if (tool === "Read") return { kind: "file_read", path: field<FileReadInput>(input, "file_path") ?? "" };
  if (tool === "AskUserQuestion" && Array.isArray(input.questions) && input.questions.length > 0) {
    // Claude keys the answers by question text: that text is the question's id.
    const questions = (input.questions as Asked[]).map((q) => ({
      id: str(q.question) ?? "",
      question: str(q.question) ?? "",
      ...(str(q.header) ? { header: q.header! } : {}),
      ...(Array.isArray(q.options)
        ? {
            options: (q.options as Option[]).map((o) => ({
              label: str(o.label) ?? "",
              ...(str(o.description) ? { description: o.description! } : {}),
            })),
          }
        : {}),
      ...(typeof q.multiSelect === "boolean" ? { multiSelect: q.multiSelect } : {}),
    }));
    return { kind: "user_input", questions };
  }
  // ExitPlanMode asks to leave plan mode with its plan: the plan itself is a proposed-plan artifact.
  if (tool === "ExitPlanMode") return { kind: "plan_approval", plan: planOf(input) };
  // Another of Claude's own tools asks: an approval of that tool (never the embedder's tool, which only Tiller runs).
  return { kind: "tool_approval", toolName: tool, input };
}
