import type { z } from "zod";
import type { InterruptInputSchema, InterruptReceipt } from "../../domain/commands.js";
import { ConflictError, NotFoundError, type TillerError } from "../../domain/errors.js";
import type { Outcome } from "../../machines/emitted.js";
import type { Actors } from "../actors.js";
import type { Projections } from "../projections.js";
import { expectOutcome, refusal } from "./outcomes.js";

/** What interrupting a run needs: the live run actors, the read model (to say why one is gone), the step. */
export interface InterruptHost {
  readonly views: Projections;
  readonly actors: Pick<Actors, "runs">;
  run(fn: () => void): Outcome[];
}

/** The run actor decides how (natively, by stopping the session, before it started, or already asked). */
export function interrupt(
  d: InterruptHost,
  p: z.output<typeof InterruptInputSchema>,
): Omit<InterruptReceipt, "commandId"> {
  const actor = d.actors.runs.get(p.runId);
  if (!actor) throw runGone(d, p.runId);
  const result = expectOutcome(
    d.run(() => actor.send({ type: "INTERRUPT" })),
    "interrupt",
  );
  if (!("via" in result)) throw refusal(result);
  return { runId: p.runId, via: result.via };
}

/** A run without a live actor has ended (a conflict, naming its status), or never existed. */
function runGone(d: Pick<InterruptHost, "views">, runId: string): TillerError {
  const run = d.views.runs.get(runId);
  return run
    ? new ConflictError(`run ${runId} is already ${run.status}`, { runId, status: run.status })
    : new NotFoundError("run", runId);
}
