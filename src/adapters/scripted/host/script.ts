import { isAbsolute } from "node:path";
import { z } from "zod";
import { McpToolRefSchema, PlanStepSchema, QuestionSchema, TodoItemSchema } from "../../../domain/items.js";

/**
 * What a scripted turn does, step by step. Scripts are data (validated with zod), so a
 * demo, a test or an out-of-process host can all drive the same provider behaviour.
 */

const base = z.strictObject({});

export type ScriptStep =
  | { type: "text"; text: string; chunkSize?: number | undefined }
  | { type: "reasoning"; text: string }
  /** With `mcp`, a call through an MCP server: tagged so only where the record says the provider has MCP tools. */
  | {
      type: "tool";
      name: string;
      input?: unknown;
      output: string;
      failed?: boolean | undefined;
      mcp?: { server: string; tool: string } | undefined;
    }
  /**
   * The model calls one of the embedder's tools (`RuntimeOptions.tools`): where the record says the provider calls
   * tools back and the session was offered it, a `dynamic_tool` request whose result goes into the reply.
   */
  | { type: "tool_call"; tool: string; input?: unknown }
  | { type: "command"; command: string; output: string; exitCode?: number | undefined; approval?: boolean | undefined }
  /** With `content`, the change is really written (relative to the thread's cwd) once allowed. */
  | {
      type: "file_change";
      path: string;
      diff: string;
      approval?: boolean | undefined;
      content?: string | undefined;
      /** Asked as an `apply_patch` approval (the diff as the patch), where the record says the provider asks one. */
      patch?: boolean | undefined;
    }
  /** Reads a file (a `tool_call` item named `read_file`), asking a `file_read` approval first where told to. */
  | { type: "file_read"; path: string; approval?: boolean | undefined }
  | { type: "question"; questions: z.infer<typeof QuestionSchema>[] }
  | { type: "todo"; items: z.infer<typeof TodoItemSchema>[] }
  | { type: "plan"; steps: z.infer<typeof PlanStepSchema>[]; explanation?: string | undefined }
  | { type: "proposed_plan"; text: string }
  | { type: "subagent"; agent: string; prompt: string; steps: ScriptStep[] }
  | {
      type: "fail";
      message: string;
      failureClass?: string | undefined;
      retryable?: boolean | undefined;
      broken?: boolean | undefined;
    }
  /** Blocks until the turn is interrupted. */
  | { type: "hang" }
  /** Blocks until `backend.openGate(name)` is called (or the turn is interrupted): a test's hand on the turn. */
  | { type: "gate"; name: string }
  | { type: "pause"; ms: number };

export const ScriptStepSchema: z.ZodType<ScriptStep> = z.lazy(() =>
  z.discriminatedUnion("type", [
    base.extend({ type: z.literal("text"), text: z.string(), chunkSize: z.number().int().positive().optional() }),
    base.extend({ type: z.literal("reasoning"), text: z.string() }),
    base.extend({
      type: z.literal("tool"),
      name: z.string(),
      input: z.unknown().optional(),
      output: z.string(),
      failed: z.boolean().optional(),
      mcp: McpToolRefSchema.optional(),
    }),
    base.extend({ type: z.literal("tool_call"), tool: z.string().min(1), input: z.unknown().optional() }),
    base.extend({
      type: z.literal("command"),
      command: z.string(),
      output: z.string(),
      exitCode: z.number().int().optional(),
      approval: z.boolean().optional(),
    }),
    base.extend({
      type: z.literal("file_change"),
      path: z
        .string()
        .refine(
          (p) => !isAbsolute(p) && !p.split(/[\\/]/).includes(".."),
          "must be a relative path inside the thread's cwd",
        ),
      diff: z.string(),
      approval: z.boolean().optional(),
      content: z.string().optional(),
      patch: z.boolean().optional(),
    }),
    base.extend({ type: z.literal("file_read"), path: z.string(), approval: z.boolean().optional() }),
    base.extend({ type: z.literal("question"), questions: z.array(QuestionSchema).min(1) }),
    base.extend({ type: z.literal("todo"), items: z.array(TodoItemSchema) }),
    base.extend({ type: z.literal("plan"), steps: z.array(PlanStepSchema), explanation: z.string().optional() }),
    base.extend({ type: z.literal("proposed_plan"), text: z.string() }),
    base.extend({
      type: z.literal("subagent"),
      agent: z.string(),
      prompt: z.string(),
      steps: z.array(ScriptStepSchema),
    }),
    base.extend({
      type: z.literal("fail"),
      message: z.string(),
      failureClass: z.string().optional(),
      retryable: z.boolean().optional(),
      broken: z.boolean().optional(),
    }),
    base.extend({ type: z.literal("hang") }),
    base.extend({ type: z.literal("gate"), name: z.string().min(1) }),
    base.extend({ type: z.literal("pause"), ms: z.number().int().nonnegative() }),
  ]),
);

export interface TurnRequest {
  /** The user's text for this turn (or the steer text of a replacement attempt). */
  text: string;
  /** 0-based index of this turn in its provider thread. */
  turnIndex: number;
}

/** Chooses the steps of each turn. */
export type ScriptSource = (turn: TurnRequest) => ScriptStep[];

/** Default behaviour: answer with a short streamed echo. */
export const echoScript: ScriptSource = ({ text }) => [{ type: "text", text: `You said: ${text}` }];

/**
 * Scripts keyed by a marker in the prompt (`[approval]`, `[hang]`…), falling back to echo;
 * handy for interactive use and the demo.
 */
export function keyedScript(scripts: Record<string, ScriptStep[]>, fallback: ScriptSource = echoScript): ScriptSource {
  return (turn) => {
    for (const [marker, steps] of Object.entries(scripts)) {
      if (turn.text.includes(marker)) return steps;
    }
    return fallback(turn);
  };
}
