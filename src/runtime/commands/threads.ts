import { resolve } from "node:path";
import type { z } from "zod";
import type { QueuedRun } from "../../machines/thread.js";
import type {
  CreateThreadInputSchema,
  CreateThreadReceipt,
  ForkReceipt,
  ForkThreadInputSchema,
} from "../../domain/commands.js";
import { ConflictError, NotFoundError } from "../../domain/errors.js";
import type { DomainEvent } from "../../domain/events.js";
import type { IdSource } from "../../domain/ids.js";
import { isTerminalRunStatus, type Projections, type RunView } from "../projections.js";
import { assertDirectory } from "../store/files.js";
import type { Target } from "../targets.js";
import { assertOpen, findTarget, findThread, type RuntimeState } from "./checks.js";
import { subagentForkPoint } from "./subagents.js";

/** What creating a thread (new or forked) needs: the read model, targets, ids, the write path, the thread actors. */
export interface ThreadCreationHost extends RuntimeState {
  readonly views: Projections;
  readonly targets: ReadonlyMap<string, Target>;
  readonly ids: IdSource;
  run(fn: () => void): unknown;
  commit(event: DomainEvent): void;
  spawnThread(threadId: string, nextOrdinal: number, queue: QueuedRun[]): void;
}

export async function createThread(
  d: ThreadCreationHost,
  p: z.output<typeof CreateThreadInputSchema>,
): Promise<Omit<CreateThreadReceipt, "commandId">> {
  findTarget(d, p.providerTarget, "providerTarget");
  const cwd = resolve(p.cwd ?? process.cwd());
  await assertDirectory(cwd, "cwd");
  assertOpen(d);
  const threadId = d.ids.next("thr");
  d.run(() =>
    d.commit({
      type: "thread.created",
      threadId,
      title: p.title ?? "Untitled thread",
      cwd,
      providerTarget: p.providerTarget,
      model: p.model ?? null,
      lineage: null,
    }),
  );
  d.spawnThread(threadId, 1, []);
  return { threadId };
}

/** Invariant 9: the fork's lineage is recorded now; native vs portable is decided at its first run. */
export function forkThread(
  d: ThreadCreationHost,
  p: z.output<typeof ForkThreadInputSchema>,
): Omit<ForkReceipt, "commandId"> {
  const parent = findThread(d, p.threadId);
  // A subagent's fork starts from its conversation (its run is the lineage's), not from the parent's runs.
  const subagent = p.fromSubagentNodeId
    ? subagentForkPoint(d, parent, p.fromSubagentNodeId, p.providerTarget)
    : undefined;
  // By default the fork starts after the last run that still counts (rolled-back runs do not).
  const from = subagent
    ? subagent.run
    : p.afterRunId
      ? parent.runs.find((r) => r.runId === p.afterRunId)
      : parent.runs.filter((r) => r.status !== "rolled_back").at(-1);
  if (p.afterRunId && !from) throw new NotFoundError("run", p.afterRunId);
  // A subagent that has ended is a stable point even while its run goes on.
  const stable = (run: RunView) => (subagent ? true : isTerminalRunStatus(run.status)) && run.status !== "rolled_back";
  if (from && !stable(from)) {
    throw new ConflictError(`run ${from.runId} is ${from.status}; forks start only from a finished run`, {
      runId: from.runId,
    });
  }
  const providerTarget = p.providerTarget ?? from?.providerTarget ?? parent.providerTarget;
  findTarget(d, providerTarget, "providerTarget");
  const threadId = d.ids.next("thr");
  const transferId = d.ids.next("xfr");
  const forkedFromRunId = from?.runId ?? null;
  d.run(() => {
    d.commit({
      type: "thread.created",
      threadId,
      title: p.title ?? `Fork of ${parent.title}`,
      cwd: parent.cwd,
      providerTarget,
      model: parent.model,
      lineage: { parentThreadId: parent.threadId, relation: "fork", forkedFromRunId },
    });
    d.commit({
      type: "fork.recorded",
      threadId,
      parentThreadId: parent.threadId,
      forkedFromRunId,
      transferId,
      ...(p.fromSubagentNodeId ? { fromSubagentNodeId: p.fromSubagentNodeId } : {}),
    });
  });
  d.spawnThread(threadId, 1, []);
  return { threadId, parentThreadId: parent.threadId, transferId };
}
