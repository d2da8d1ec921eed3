import { ClosedError, InvalidInputError, NotFoundError, StoreFailedError } from "../../domain/errors.js";
import type { Projections, ThreadView } from "../projections.js";
import type { Target } from "../targets.js";

/** Whether the runtime still takes work: the log's failure (if it broke) and whether it is closing. */
export interface RuntimeState {
  readonly fault: unknown;
  readonly closed: boolean;
}

/** A broken log refuses everything after it: nothing could be recorded safely. */
export function assertNotFailed(state: Pick<RuntimeState, "fault">): void {
  if (state.fault !== undefined) throw StoreFailedError.from(state.fault, "writing the event log");
}

export function assertOpen(state: RuntimeState): void {
  assertNotFailed(state);
  if (state.closed) throw new ClosedError();
}

export function findThread(rt: { readonly views: Projections }, threadId: string): ThreadView {
  const thread = rt.views.threads.get(threadId);
  if (!thread) throw new NotFoundError("thread", threadId);
  return thread;
}

/** A target named in the input is an input error (naming the configured ones); any other unknown one is not found. */
export function findTarget(rt: { readonly targets: ReadonlyMap<string, Target> }, id: string, field?: string): Target {
  const target = rt.targets.get(id);
  if (target) return target;
  if (field)
    throw new InvalidInputError(
      field,
      `unknown provider target "${id}" (configured: ${[...rt.targets.keys()].join(", ")})`,
    );
  throw new NotFoundError("provider target", id);
}
