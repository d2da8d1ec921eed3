import type { z } from "zod";
import type { RespondInputSchema, RespondReceipt } from "../../domain/commands.js";
import { ConflictError, NotFoundError, NotResumableError } from "../../domain/errors.js";
import { isAnsweredByRuntime, type RequestResponse } from "../../domain/items.js";
import { redact } from "../../domain/redact.js";
import type { Outcome } from "../../machines/emitted.js";
import type { Actors } from "../actors.js";
import { safeString } from "../ingest/frames.js";
import type { DynamicTool, DynamicToolContext } from "../options.js";
import type { Projections, RequestView } from "../projections.js";
import { expectOutcome, refusal } from "./outcomes.js";

/** What answering a request needs: its actor, its read model, the host generation it was asked through, the step. */
export interface RespondHost {
  readonly views: Projections;
  readonly actors: Pick<Actors, "requests">;
  run(fn: () => void): Outcome[];
  generationOf(view: RequestView): number | null;
}

/** An approval or a question answered; a request that expired or was already settled is refused, typed. */
export function respond(d: RespondHost, p: z.output<typeof RespondInputSchema>): Omit<RespondReceipt, "commandId"> {
  const actor = d.actors.requests.get(p.requestId);
  const view = d.views.requests.get(p.requestId);
  if (!view) throw new NotFoundError("request", p.requestId);
  if (isAnsweredByRuntime(view.kind))
    throw new ConflictError(`request ${p.requestId} is a ${view.kind} call: the runtime answers it with the tool`, {
      requestId: p.requestId,
    });
  if (!actor) {
    if (view.status === "expired")
      throw new NotResumableError(`request ${p.requestId} expired (${view.closedReason})`, {
        requestId: p.requestId,
      });
    throw new ConflictError(`request ${p.requestId} is already ${view.status}`, {
      requestId: p.requestId,
      status: view.status,
    });
  }
  const result = expectOutcome(
    d.run(() => actor.send({ type: "RESPOND", response: p.response, hostGeneration: d.generationOf(view) })),
    "respond",
  );
  if (!("accepted" in result)) throw refusal(result);
  return { requestId: p.requestId, status: "accepted" as const };
}

/** What answering a dynamic tool call needs: the request, its actor, the step (a no-op once the runtime closed). */
export interface ToolCallHost {
  readonly views: Projections;
  readonly actors: Pick<Actors, "requests">;
  act(fn: () => void): void;
  generationOf(view: RequestView): number | null;
}

type ToolResult = Extract<RequestResponse, { kind: "tool_result" }>;

/**
 * A provider called one of the embedder's tools: the runtime runs its handler and answers the request with the result,
 * through the request's actor as a user answers an approval. An unknown tool, or a handler that throws, answers a
 * failure: the provider's turn goes on, the runtime never fails with it. The handler gets `input` as the provider sent
 * it (the log keeps it masked).
 */
export async function answerToolCall(
  host: ToolCallHost,
  tools: readonly DynamicTool[],
  requestId: string,
  input: unknown,
): Promise<void> {
  await Promise.resolve(); // never inside the dispatcher's step: the handler is the embedder's code
  const view = host.views.requests.get(requestId);
  if (view?.payload.kind !== "dynamic_tool") return;
  const { toolName } = view.payload;
  const context = { threadId: view.threadId, runId: view.runId, requestId };
  const response = await runTool(
    tools.find((t) => t.name === toolName),
    toolName,
    input,
    context,
  );
  host.act(() =>
    host.actors.requests.get(requestId)?.send({ type: "RESPOND", response, hostGeneration: host.generationOf(view) }),
  );
}

async function runTool(
  tool: DynamicTool | undefined,
  name: string,
  input: unknown,
  context: DynamicToolContext,
): Promise<ToolResult> {
  if (!tool) return { kind: "tool_result", output: `no tool named ${name} is registered`, success: false };
  try {
    const result = await tool.handler(input, context);
    // A string is the tool's text; anything else goes as its JSON (undefined: nothing).
    const output = typeof result === "string" ? result : (JSON.stringify(result) ?? "");
    return { kind: "tool_result", output, success: true };
  } catch (error) {
    const why = error instanceof Error ? error.message : safeString(error);
    return { kind: "tool_result", output: redact(`${name} failed: ${why}`), success: false };
  }
}
