import { z } from "zod";
import { DispatchModeSchema, RuntimeModeSchema } from "./entities.js";
import { RequestResponseSchema } from "./items.js";
import { InvalidInputError } from "./errors.js";

/** Public API inputs. Every call is validated here; a bad field becomes `invalid_input`. */

const commandId = z.string().min(1).max(200).optional();
/** App ids only (invariant 6): native ids never address anything through the API. */
const appId = (prefix: string) =>
  z.string().regex(new RegExp(`^${prefix}_[A-Za-z0-9_-]+$`), `must be a ${prefix}_ app id`);

export const CreateThreadInputSchema = z.strictObject({
  providerTarget: z.string().min(1),
  title: z.string().max(500).optional(),
  cwd: z.string().min(1).optional(),
  model: z.string().min(1).nullable().optional(),
  commandId,
});

export const SendMessageInputSchema = z.strictObject({
  threadId: appId("thr"),
  text: z.string().min(1).max(1_000_000),
  mode: DispatchModeSchema.default("auto"),
  /** Run this message on another configured target (a provider switch, with a handoff). */
  providerTarget: z.string().min(1).optional(),
  /** Use this model from this message on (a new provider session if the provider cannot switch in session). */
  model: z.string().min(1).optional(),
  /** Work in this mode from this message on (a new provider session if the provider cannot switch in session). */
  runtimeMode: RuntimeModeSchema.optional(),
  commandId,
});

export const RollbackInputSchema = z.strictObject({
  threadId: appId("thr"),
  /** The run whose end state to return to; later runs become rolled_back. */
  toRunId: appId("run"),
  commandId,
});

/** Undo one subagent's file edits (its app-owned nested checkpoint scope), leaving the rest of its run's. */
export const UndoSubagentInputSchema = z.strictObject({
  threadId: appId("thr"),
  /** The subagent's item id (`readThread`: an item of kind `subagent`). */
  nodeId: appId("nod"),
  commandId,
});

/** Carry out a plan the provider proposed (an item of kind `proposed_plan`): a run that implements it. */
export const ImplementPlanInputSchema = z.strictObject({
  threadId: appId("thr"),
  /** The proposed plan's item id. */
  nodeId: appId("nod"),
  commandId,
});

export const InterruptInputSchema = z.strictObject({ runId: appId("run"), commandId });

export const RespondInputSchema = z.strictObject({
  requestId: appId("req"),
  response: RequestResponseSchema,
  commandId,
});

export const ForkThreadInputSchema = z
  .strictObject({
    threadId: appId("thr"),
    /** Fork after this run (a stable point); default: after the latest run. */
    afterRunId: appId("run").optional(),
    /** Fork one finished subagent's conversation (its item id) instead of the thread's. */
    fromSubagentNodeId: appId("nod").optional(),
    providerTarget: z.string().min(1).optional(),
    title: z.string().max(500).optional(),
    commandId,
  })
  .refine((p) => !(p.afterRunId && p.fromSubagentNodeId), {
    message: "a fork starts after a run or from a subagent, not both",
    path: ["fromSubagentNodeId"],
  });

/** A subagent of a thread, by its item id (`readThread`: an item of kind `subagent`). */
export const SubagentInputSchema = z.strictObject({ threadId: appId("thr"), nodeId: appId("nod"), commandId });

export const WaitForSubagentInputSchema = z.strictObject({
  threadId: appId("thr"),
  nodeId: appId("nod"),
  /** Give up after this long (`timeout`); the subagent goes on. */
  timeoutMs: z.number().int().positive().max(2_147_483_647).optional(),
});

export const SubscribeInputSchema = z.strictObject({
  threadId: appId("thr").optional(),
  afterSeq: z.number().int().nonnegative().default(0),
});

export const ThreadIdSchema = appId("thr");
export const RunIdSchema = appId("run");

export type CreateThreadInput = z.input<typeof CreateThreadInputSchema>;
export type SendMessageInput = z.input<typeof SendMessageInputSchema>;
export type InterruptInput = z.input<typeof InterruptInputSchema>;
export type RespondInput = z.input<typeof RespondInputSchema>;
export type ForkThreadInput = z.input<typeof ForkThreadInputSchema>;
export type SubscribeInput = z.input<typeof SubscribeInputSchema>;
export type RollbackInput = z.input<typeof RollbackInputSchema>;
export type UndoSubagentInput = z.input<typeof UndoSubagentInputSchema>;
export type ImplementPlanInput = z.input<typeof ImplementPlanInputSchema>;
export type CloseSubagentInput = z.input<typeof SubagentInputSchema>;
export type WaitForSubagentInput = z.input<typeof WaitForSubagentInputSchema>;

/**
 * Parse or throw `invalid_input` naming the first bad field. An input that throws as it is read (a Proxy, a getter) is
 * `invalid_input` too: what the caller passed cannot be read, whatever it throws.
 */
export function parseInput<T extends z.ZodType>(schema: T, value: unknown): z.output<T> {
  let result: z.ZodSafeParseResult<z.output<T>>;
  try {
    result = schema.safeParse(value);
  } catch (error) {
    throw new InvalidInputError("input", `cannot be read: ${unreadable(error)}`);
  }
  if (result.success) return result.data;
  const issue = result.error.issues[0]!;
  const keys = issue.code === "unrecognized_keys" ? issue.keys.slice(0, 1) : [];
  const field = [...issue.path, ...keys].map(String).join(".");
  throw new InvalidInputError(field || "input", issue.message);
}

/** What an input threw as it was read, as a message (what it threw may itself throw when read). */
export function unreadable(error: unknown): string {
  try {
    return error instanceof Error ? error.message : String(error);
  } catch {
    return "it threw";
  }
}

export interface CreateThreadReceipt {
  commandId: string;
  threadId: string;
}

export interface SendMessageReceipt {
  commandId: string;
  threadId: string;
  runId: string;
  /**
   * started: a new run began; queued: waits for the turn boundary; steered: went into the active run; restarting: the
   * active run is being interrupted for this one.
   */
  disposition: "started" | "queued" | "steered" | "restarting";
  via: "native" | "interrupt_restart" | null;
  queuePosition: number;
}

export interface InterruptReceipt {
  commandId: string;
  runId: string;
  via: "native" | "session_stop" | "not_started" | "already_requested";
}

export interface RespondReceipt {
  commandId: string;
  requestId: string;
  status: "accepted";
}

export interface ForkReceipt {
  commandId: string;
  threadId: string;
  parentThreadId: string;
  transferId: string;
}

export interface CloseSubagentReceipt {
  commandId: string;
  threadId: string;
  runId: string;
  nodeId: string;
  /**
   * requested: the provider acknowledged the close (the subagent's end, `interrupted`, follows as its events);
   * already_requested: another call asked already (the provider is asked once); already_ended: it had ended.
   */
  via: "requested" | "already_requested" | "already_ended";
}

/** A subagent that has ended, as its item says. */
export interface SubagentOutcome {
  threadId: string;
  runId: string;
  nodeId: string;
  status: string;
  /** What the subagent reported back, if anything. */
  result: string | null;
}
