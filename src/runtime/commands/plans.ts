import type { z } from "zod";
import { DEFAULT_RUNTIME_MODE } from "../../domain/entities.js";
import type { ImplementPlanInputSchema, SendMessageReceipt } from "../../domain/commands.js";
import { ConflictError, NotFoundError } from "../../domain/errors.js";
import { findThread } from "./checks.js";
import { sendMessage, type SendMessageHost } from "./submit.js";

/**
 * "emitsProposedPlan: create accept/implementable plan artifacts": implementing a proposed plan
 * is a run that carries it out, out of plan mode (a plan-mode turn plans, it changes nothing),
 * on the target the thread's conversation is on.
 */
export function implementPlan(
  d: SendMessageHost,
  p: z.output<typeof ImplementPlanInputSchema>,
): Omit<SendMessageReceipt, "commandId"> {
  const thread = findThread(d, p.threadId);
  const run = thread.runs.find((r) => r.items.some((i) => i.id === p.nodeId));
  const plan = run?.items.find((i) => i.id === p.nodeId);
  if (!run || !plan) throw new NotFoundError("proposed plan", p.nodeId);
  if (plan.kind !== "proposed_plan" || !plan.text)
    throw new ConflictError(`item ${p.nodeId} is a ${plan.kind}, not a proposed plan`, { nodeId: p.nodeId });
  // The conversation no longer holds it: the provider would be asked to carry out a plan it never proposed.
  if (run.status === "rolled_back")
    throw new ConflictError(`plan ${p.nodeId} was proposed by run ${run.runId}, which was rolled back`, {
      nodeId: p.nodeId,
    });
  const runtimeMode = { ...DEFAULT_RUNTIME_MODE, approvals: thread.runtimeMode.approvals };
  return sendMessage(d, {
    threadId: p.threadId,
    text: `Implement this plan:\n\n${plan.text}`,
    mode: "queue",
    runtimeMode,
  });
}
