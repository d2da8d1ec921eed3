import type { z } from "zod";
import type { RespondInputSchema, RespondReceipt } from "../../domain/commands.js";
import { ConflictError, NotFoundError, NotResumableError } from "../../domain/errors.js";
import type { Outcome } from "../../machines/emitted.js";
import type { Actors } from "../actors.js";
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
