import type { z } from "zod";
import type { RollbackInputSchema } from "../../domain/commands.js";
import { ConflictError } from "../../domain/errors.js";
import type { Outcome } from "../../machines/emitted.js";
import type { Actors } from "../actors.js";
import type { Checkpoints } from "../checkpoints/checkpoints.js";
import {
  planRollback,
  rollbackRequest,
  sharedDirectoryBusy,
  type RollbackPlanning,
  type RollbackReceipt,
} from "../rollback.js";
import { findThread } from "./checks.js";
import { expectOutcome, refusal } from "./outcomes.js";

/** What starting a rollback needs: the plan's reads, the thread actors, the checkpoint store, the started rollbacks. */
export interface RollbackCommandHost extends RollbackPlanning {
  readonly actors: Pick<Actors, "threads">;
  readonly checkpoints: Pick<Checkpoints, "settled">;
  /** The latest rollback started per thread: the receipt the command awaits. */
  readonly rollbacks: ReadonlyMap<string, Promise<RollbackReceipt>>;
  run(fn: () => void): Outcome[];
}

/**
 * Roll the thread back to the end of run `toRunId`: the provider's conversation first where
 * it can, then the run's filesystem checkpoint; later runs become `rolled_back`. Without
 * provider rollback the provider thread is marked divergent and rebuilt on the next run.
 */
export async function rollback(
  d: RollbackCommandHost,
  p: z.output<typeof RollbackInputSchema>,
): Promise<RollbackReceipt> {
  findThread(d, p.threadId);
  // A run's final checkpoint is written just after its terminal: a rollback to it waits for it.
  await d.checkpoints.settled();
  const busy = sharedDirectoryBusy(d, p.threadId);
  if (busy)
    throw new ConflictError(
      `thread ${busy} is working in the same directory; restoring files now would rewrite its work`,
      { threadId: busy },
    );
  const request = rollbackRequest(d, planRollback(d, p.threadId, p.toRunId));
  const threadActor = d.actors.threads.get(p.threadId)!;
  const result = expectOutcome(
    d.run(() => threadActor.send({ type: "ROLLBACK", ...request })),
    "rollback",
  );
  if (!("via" in result)) throw refusal(result);
  return d.rollbacks.get(p.threadId)!;
}
