import type { z } from "zod";
import type { InterruptInputSchema, InterruptReceipt } from "../../domain/commands.js";
import { ConflictError, NotFoundError, type TillerError } from "../../domain/errors.js";
import type { Outcome } from "../../machines/emitted.js";
import type { Actors } from "../actors.js";
import type { Projections } from "../projections.js";
import { targetOfRun, type Target } from "../targets.js";
import { expectOutcome, refusal } from "./outcomes.js";

/**
 * What interrupting a run needs: the live run actors, the read model (to say why one is gone),
 * the targets (whose sessions the run shares with other threads), the step.
 */
export interface InterruptHost {
  readonly views: Projections;
  readonly actors: Pick<Actors, "runs">;
  readonly targets: ReadonlyMap<string, Target>;
  run(fn: () => void): Outcome[];
}

/** The run actor decides how (natively, by stopping the session, before it started, or already asked). */
export function interrupt(
  d: InterruptHost,
  p: z.output<typeof InterruptInputSchema>,
): Omit<InterruptReceipt, "commandId"> {
  const actor = d.actors.runs.get(p.runId);
  if (!actor) throw runGone(d, p.runId);
  const sharedWith = sessionSharers(d, p.runId);
  const result = expectOutcome(
    d.run(() => actor.send({ type: "INTERRUPT", sharedWith })),
    "interrupt",
  );
  if (!("via" in result)) throw refusal(result);
  return { runId: p.runId, via: result.via };
}

/** Other app threads with a turn in the provider session of this run's turn (a session stop would end theirs too). */
export function sessionSharers(d: Pick<InterruptHost, "views" | "actors" | "targets">, runId: string): string[] {
  const target = targetOfRun(d, runId);
  const sessionOf = (id: string) => {
    const { activeAttemptId } = d.actors.runs.get(id)?.getSnapshot().context ?? {};
    return activeAttemptId ? target.normalizer.binding(activeAttemptId)?.sessionId : undefined;
  };
  const session = sessionOf(runId);
  if (!session) return [];
  const threadId = d.views.runs.get(runId)!.threadId;
  const others = [...d.actors.runs.keys()].filter(
    (id) => d.views.runs.get(id)?.threadId !== threadId && sessionOf(id) === session,
  );
  return [...new Set(others.map((id) => d.views.runs.get(id)!.threadId))];
}

/** A run without a live actor has ended (a conflict, naming its status), or never existed. */
function runGone(d: Pick<InterruptHost, "views">, runId: string): TillerError {
  const run = d.views.runs.get(runId);
  return run
    ? new ConflictError(`run ${runId} is already ${run.status}`, { runId, status: run.status })
    : new NotFoundError("run", runId);
}
