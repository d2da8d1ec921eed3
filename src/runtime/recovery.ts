import type { ProviderCapabilities } from "../capabilities/schema.js";
import type { QueuedRun } from "../machines/thread.js";
import { approvalsOutliveConnection, requestsSurviveRestart } from "../capabilities/predicates.js";
import { StoreCorruptError } from "../domain/errors.js";
import { DomainEventSchema, type DomainEvent } from "../domain/events.js";
import { policyEvent } from "../machines/emitted.js";
import type { Actors } from "./actors.js";
import type { Inbound } from "./ingest/inbound.js";
import type { Target } from "./targets.js";

/** What recovery needs: the read model to fold the log into, the dispatcher's step, the actors it respawns. */
export interface RecoveryHost extends RestoreFinishing {
  readonly views: Projections;
  readonly targets: ReadonlyMap<string, Target>;
  readonly actors: Pick<Actors, "threads" | "runs" | "request">;
  readonly inbound: Pick<Inbound, "pump">;
  run(fn: () => void): unknown;
  commit(event: DomainEvent): void;
  spawnThread(threadId: string, nextOrdinal: number, queue: QueuedRun[]): void;
  spawnRun(runId: string): void;
}
import type { Projections } from "./projections.js";
import { finishAnnouncedRestores, settleInterruptedRollback, type RestoreFinishing } from "./rollbackRecovery.js";
import type { EventLog } from "./store/eventLog.js";
import type { CutTail } from "./store/jsonl.js";
import type { HostRecord } from "./hosts/records.js";
import { reattachRuns, restoreReattached } from "./reattach.js";

/** Says in the log which hosts of the previous life were found running and killed. */
export function reportReaped(d: RecoveryHost, reaped: readonly HostRecord[]): void {
  if (reaped.length === 0) return;
  const hosts = reaped.map((h) => `${h.target} pid ${h.pid}`).join(", ");
  const message = `reaped ${reaped.length} orphaned host process(es) of the previous run: ${hosts}`;
  d.run(() => d.commit({ type: "warning", threadId: null, runId: null, message }));
}

/** Says in the log what open cut from the log's tail (a torn write, or a complete last line that does not parse). */
export function reportCutTail(d: RecoveryHost, cut: CutTail | null): void {
  if (!cut) return;
  const what = cut.complete ? "a complete last line that does not parse" : "a torn last line";
  const message = `events.jsonl line ${cut.line} (${cut.bytes} bytes) was cut at open: ${what} (${cut.reason})`;
  d.run(() => d.commit({ type: "warning", threadId: null, runId: null, message }));
}

/** Says in the log that open found a projection snapshot it could not use (and replayed the log instead). */
export function reportIgnoredSnapshot(d: RecoveryHost, ignored: string | null): void {
  if (!ignored) return;
  const message = `${ignored}; the whole log was replayed`;
  d.run(() => d.commit({ type: "warning", threadId: null, runId: null, message }));
}

/**
 * Fold the log, settle what the previous life left open, rebuild the actors, resume queued
 * work. Returns the targets' event pumps. Runs before the runtime accepts any command.
 *
 * `snapshot`: the projections' state at record `seq`, verified against the log (src/runtime/snapshots/): only the
 * records after it are folded. Its state is checked again as it is loaded; when it does not hold, the whole log is
 * folded and `ignored` says why.
 */
export async function restoreRuntime(
  d: RecoveryHost,
  log: EventLog<DomainEvent>,
  snapshot?: { seq: number; state: unknown },
): Promise<{ pumps: Promise<void>[]; ignored: string | null }> {
  let ignored: string | null = null;
  if (snapshot) {
    try {
      d.views.loadState(snapshot.state, snapshot.seq); // all checked before anything is loaded
    } catch (error) {
      ignored = `the projection snapshot was ignored: ${error instanceof Error ? error.message : String(error)}`;
    }
  }
  for await (const record of log.readAll(d.views.head)) {
    const parsed = DomainEventSchema.safeParse(record.event);
    if (!parsed.success)
      throw new StoreCorruptError(`event ${record.seq} does not match the schema`, { seq: record.seq });
    d.views.apply({ ...record, event: parsed.data });
  }
  const liveTurns = d.views.liveTurns;
  // A file restore the previous life announced and did not finish is finished (or reported) first.
  await finishAnnouncedRestores(d, d.views.announcedRestores());
  const capabilities = new Map([...d.targets].map(([id, target]) => [id, target.capabilities()]));
  // Runs waiting on requests in a host that outlived the runtime are taken up there, where the provider holds them.
  const reattached = await reattachRuns(d, liveTurns);
  const plan = planRecovery(d.views, capabilities, {
    runs: new Set(reattached.runs.keys()),
    sessions: reattached.sessions,
  });
  d.run(() => plan.events.forEach((e) => d.commit(e)));
  for (const thread of d.views.threads.values()) {
    const queued = thread.runs.filter((r) => r.status === "queued");
    d.spawnThread(
      thread.threadId,
      thread.runs.length + 1,
      queued.map((r) => ({
        runId: r.runId,
        providerTarget: r.providerTarget,
        capabilities: capabilities.get(r.providerTarget)!,
      })),
    );
    for (const run of queued) d.spawnRun(run.runId);
  }
  restoreReattached(d, reattached.runs);
  const pumps = [...d.targets.values()].map((target) => d.inbound.pump(target));
  d.run(() => {
    for (const actor of d.actors.threads.values()) actor.send({ type: "RESUME" });
  });
  await log.whenDurable();
  return { pumps, ignored };
}

/**
 * What a runtime coming back from a crash must settle before it accepts commands: runs
 * that were starting or running are cancelled (the host that ran them is gone with the
 * previous process), their open items closed, pending requests expired as not resumable.
 * Runs the runtime held in its queue never touched a provider, so they stay queued and resume
 * (unless their provider target is no longer configured: then they are cancelled too). A run
 * handed to a provider's own queue did touch it, and is cancelled with the running ones.
 */
export function planRecovery(
  views: Projections,
  configuredTargets: ReadonlyMap<string, ProviderCapabilities>,
  reattached: { runs: ReadonlySet<string>; sessions: ReadonlySet<string> } = { runs: new Set(), sessions: new Set() },
): { events: DomainEvent[] } {
  const events: DomainEvent[] = [];
  const cancelledRuns: string[] = [];
  const requeuedRuns: string[] = [];
  const expiredRequests: string[] = [];

  for (const [threadId, toRunId] of views.rollbacksInFlight)
    events.push(...settleInterruptedRollback(views, threadId, toRunId));
  for (const request of views.pendingRequests()) {
    const { threadId, runId, requestId } = request;
    if (reattached.runs.has(runId)) continue; // still answerable, through the session taken up again
    const caps = configuredTargets.get(views.runs.get(runId)!.providerTarget);
    const survives = caps && requestsSurviveRestart(caps);
    if (!survives) {
      const detail =
        `request ${requestId} was pending when its session ended with the runtime; ` + "it expires as not_resumable";
      events.push(policyEvent({ threadId, runId }, "requests_expire_on_restart", detail));
    } else if (!approvalsOutliveConnection(caps)) {
      const detail = `request ${requestId} could be answered only on the connection that asked, gone with the runtime`;
      events.push(policyEvent({ threadId, runId }, "requests_expire_with_connection", detail));
    }
    // Where its session survives, this one could not be taken up (its host is gone, or it holds other than the log).
    const reason = survives
      ? "not_resumable: the run that asked was cancelled by recovery"
      : "not_resumable: runtime restarted";
    events.push({ type: "request.closed", threadId, runId, requestId, status: "expired", reason });
    expiredRequests.push(requestId);
  }
  for (const run of views.activeRuns()) {
    const { threadId, runId } = run;
    if (reattached.runs.has(runId)) continue;
    // A queued run with an attempt was handed to a provider that queues natively: its queue went with the host.
    if (run.status === "queued" && run.attempts.length === 0 && configuredTargets.has(run.providerTarget)) {
      requeuedRuns.push(runId);
      continue;
    }
    for (const item of run.items) {
      if (item.status !== "streaming") continue;
      events.push({
        type: "node.completed",
        threadId,
        runId,
        nodeId: item.id,
        status: "cancelled",
        text: null,
        output: null,
        exitCode: null,
        settledBy: "runtime",
      });
    }
    for (const attempt of run.attempts) {
      if (attempt.status === "running" || attempt.status === "pending") {
        events.push({ type: "attempt.terminal", threadId, runId, attemptId: attempt.attemptId, status: "cancelled" });
      }
    }
    const reason = configuredTargets.has(run.providerTarget) ? "runtime_restarted" : "provider_target_missing";
    events.push({
      type: "run.terminal",
      threadId,
      runId,
      status: "cancelled",
      reason,
      failure: null,
      correlation: "runtime",
    });
    cancelledRuns.push(runId);
  }
  const reattachedRuns = [...reattached.runs];
  if (events.length > 0 || requeuedRuns.length > 0 || reattachedRuns.length > 0) {
    const recovered = { type: "runtime.recovered" as const, cancelledRuns, expiredRequests, requeuedRuns };
    events.push(reattachedRuns.length > 0 ? { ...recovered, reattachedRuns } : recovered);
  }
  // Sessions ended with the previous process (even a clean close stops them unrecorded): say so.
  for (const [sessionId, session] of views.sessions) {
    if (session.status !== "stopped" && session.status !== "error" && !reattached.sessions.has(sessionId)) {
      events.push({
        type: "session.state",
        sessionId,
        providerTarget: session.providerTarget,
        status: "stopped",
        message: "runtime restarted",
      });
    }
  }
  return { events };
}
