import { isAnsweredByRuntime } from "../domain/items.js";
import type { Projections } from "./projections.js";

/** What a thread snapshot reads. */
export interface SnapshotSource {
  readonly views: Projections;
  generationOf(request: RequestView): number | null;
}
import { isTerminalRunStatus, type RequestView, type RunView, type ThreadView } from "./projections.js";

export interface ThreadSnapshot {
  /** Log sequence the snapshot reflects; subscribe after it for what follows. */
  seq: number;
  thread: Omit<ThreadView, "runs"> & { status: "idle" | "active" };
  runs: RunView[];
  pendingRequests: Array<RequestView & { respondable: boolean }>;
}

/** A copy of one thread's read model at the current log head (the caller waits for it to be durable). */
export function threadSnapshot(d: SnapshotSource, thread: ThreadView): ThreadSnapshot {
  const { runs, ...fields } = thread;
  const pending = d.views
    .pendingRequests(thread.threadId)
    .map((r) => ({ ...r, respondable: !isAnsweredByRuntime(r.kind) && d.generationOf(r) !== null }));
  return structuredClone({
    seq: d.views.head,
    thread: {
      ...fields,
      status: runs.some((r) => !isTerminalRunStatus(r.status)) ? ("active" as const) : ("idle" as const),
    },
    runs,
    pendingRequests: pending,
  });
}
