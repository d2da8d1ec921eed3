import type { ReattachedSession } from "../adapters/contract.js";
import { approvalsOutliveConnection, requestsSurviveRestart } from "../capabilities/predicates.js";
import { rootNodeOf } from "../machines/runModel.js";
import type { Actors } from "./actors.js";
import type { LiveTurns, TurnTrail } from "./ingest/liveTurns.js";
import type { Projections, ProviderThreadRecord, RequestView, RunView } from "./projections.js";
import type { Target } from "./targets.js";

/**
 * Recovery's other way out for a run that was waiting on requests when the runtime died. Where
 * the provider's record says pending requests survive a restart and its host outlived the
 * runtime, the session is taken up again in that host and the run re-attached to its turn: its
 * requests stay answerable. Only where the provider holds exactly what the log holds: the
 * turn still runs and waits on exactly the requests the log has open (a turn waiting on its
 * requests says nothing more, so nothing happened that the log missed). Anything else is
 * settled as before (cancelled, expired), and a turn the provider still runs for it is stopped.
 */

/** A run recovery takes up again, and what it is re-attached to. */
export interface Reattachment {
  run: RunView;
  target: Target;
  sessionId: string;
  thread: ProviderThreadRecord;
  trail: TurnTrail;
  requests: RequestView[];
}

/** What re-attaching needs of the runtime opening. */
export interface ReattachHost {
  readonly views: Projections;
  readonly targets: ReadonlyMap<string, Target>;
  readonly actors: Pick<Actors, "threads" | "runs" | "request">;
  run(fn: () => void): unknown;
  spawnRun(runId: string): void;
}

interface Candidate extends Reattachment {
  turnRef: string | null;
}

/**
 * Takes up the sessions of runs that may be re-attached; returns the runs that are (by run id) and the sessions taken
 * up (recovery leaves both as they are). Turns a session still runs for runs that are not re-attached are stopped.
 */
export async function reattachRuns(
  d: ReattachHost,
  liveTurns: LiveTurns,
): Promise<{ runs: Map<string, Reattachment>; sessions: Set<string> }> {
  const bySession = new Map<string, Candidate[]>();
  for (const run of d.views.activeRuns()) {
    const candidate = candidateOf(d, liveTurns, run);
    if (candidate) bySession.set(candidate.sessionId, [...(bySession.get(candidate.sessionId) ?? []), candidate]);
  }
  const runs = new Map<string, Reattachment>();
  const sessions = new Set<string>();
  await stopStaleSessions(d, new Set(bySession.keys()));
  for (const [sessionId, candidates] of bySession) {
    const { target, run } = candidates[0]!;
    const threadView = d.views.threads.get(run.threadId)!;
    const slot = { threadId: run.threadId, cwd: threadView.cwd, model: run.model, runtimeMode: run.runtimeMode };
    const info = await target.reattachSession(sessionId, slot);
    if (!info) continue;
    sessions.add(sessionId);
    const taken = new Set<ReattachedSession["turns"][number]>();
    for (const candidate of candidates) {
      const turn = info.turns.find((t) => !taken.has(t) && holdsWhatTheLogHolds(candidate, t));
      if (!turn) continue;
      taken.add(turn);
      runs.set(candidate.run.runId, candidate);
    }
    // Turns the provider still runs that the log cannot take up: stopped, so none runs unowned.
    for (const turn of info.turns.filter((t) => !taken.has(t))) {
      const thread = addressOf(d.views, sessionId, turn.threadRef, threadView.cwd);
      await target.adapter.interrupt({ sessionId, thread, turnRef: turn.turnRef }).catch(() => undefined);
    }
  }
  return { runs, sessions };
}

/** How the provider addresses one of its threads in a session: as the log bound it, else by its ref alone. */
function addressOf(views: Projections, sessionId: string, threadRef: string | null, cwd: string) {
  const bound = [...views.providerThreadsById.values()].find(
    (t) => t.sessionId === sessionId && t.nativeThreadRef === threadRef,
  );
  const thread = bound ? views.threads.get(bound.threadId) : undefined;
  return bound && thread
    ? { threadRef, resumeCursor: bound.resumeCursor, cwd: thread.cwd }
    : { threadRef, resumeCursor: threadRef ?? "", cwd };
}

/**
 * A session the log left open that no run can be re-attached in may still run in a host that outlived the runtime: it
 * is taken up and stopped there, so that nothing the runtime no longer owns runs on (or answers for) its threads.
 */
async function stopStaleSessions(d: ReattachHost, keep: ReadonlySet<string>): Promise<void> {
  for (const [sessionId, session] of d.views.sessions) {
    const target = d.targets.get(session.providerTarget);
    const live = session.status !== "stopped" && session.status !== "error";
    if (!live || keep.has(sessionId) || !target?.adapter.reattachSession) continue;
    const held = await target.adapter.reattachSession({ sessionId }).catch(() => null);
    if (held) await target.adapter.stopSession({ sessionId }).catch(() => undefined);
  }
}

/** A run waiting on requests asked through one live session of a provider whose requests survive a restart. */
function candidateOf(d: ReattachHost, liveTurns: LiveTurns, run: RunView): Candidate | null {
  const target = d.targets.get(run.providerTarget);
  const attempt = run.attempts.at(-1);
  if (!target || !target.adapter.reattachSession) return null;
  // Its requests must outlive the runtime, and the connection that asked them (a new one answers them).
  if (!requestsSurviveRestart(target.declared) || !approvalsOutliveConnection(target.declared)) return null;
  if (run.status !== "waiting" || attempt?.status !== "running" || !attempt.providerThreadId) return null;
  // An interrupt asked for (a restart, a steer by interrupt-restart) may or may not have reached the provider: the run
  // is settled as before, never taken up without what was asked of it.
  if (run.items.some((i) => i.kind === "interrupt_request" && i.attemptId === attempt.attemptId)) return null;
  const requests = d.views.pendingRequests(run.threadId).filter((r) => r.runId === run.runId);
  const sessions = new Set(
    requests.map((r) => (r.responseCapability.kind === "live" ? r.responseCapability.sessionId : "")),
  );
  const [sessionId] = sessions;
  const thread = d.views.providerThreadsById.get(attempt.providerThreadId);
  const trail = liveTurns.trail(attempt.attemptId);
  if (requests.length === 0 || sessions.size !== 1 || !sessionId || !thread || !trail) return null;
  return { run, target, sessionId, thread, trail, requests, turnRef: attempt.nativeTurnRef };
}

/** The provider's turn is this run's, and waits on exactly the requests the log has open (by native id or ordinal). */
function holdsWhatTheLogHolds(candidate: Candidate, turn: ReattachedSession["turns"][number]): boolean {
  const sameTurn =
    candidate.turnRef !== null
      ? turn.turnRef === candidate.turnRef
      : turn.threadRef === candidate.thread.nativeThreadRef;
  if (!sameTurn) return false;
  const open = candidate.trail.requests.map((r, index) => ({ ...r, ordinal: index + 1 })).filter((r) => r.open);
  const key = (r: { requestRef: string | null; ordinal: number }) =>
    r.requestRef !== null ? `ref:${r.requestRef}` : `ord:${r.ordinal}`;
  const mine = new Set(open.map((r) => key({ requestRef: r.ref, ordinal: r.ordinal })));
  const theirs = new Set(turn.pendingRequests.map(key));
  return (
    open.length === candidate.requests.length && mine.size === theirs.size && [...mine].every((k) => theirs.has(k))
  );
}

/** A re-attached run's actors, as the log left them: its thread busy with it, its turn bound, its requests open. */
export function restoreReattached(d: ReattachHost, reattached: ReadonlyMap<string, Reattachment>): void {
  for (const { run, target, sessionId, thread, trail, requests } of reattached.values()) {
    const { threadId, runId } = run;
    const attempt = run.attempts.at(-1)!;
    const loaded = target.reattachThread(threadId, sessionId, thread);
    target.normalizer.restoreTurn({
      threadId,
      runId,
      attemptId: attempt.attemptId,
      rootNodeId: rootNodeOf(attempt.attemptId),
      providerThreadId: thread.providerThreadId,
      sessionId,
      threadRef: loaded.handle.threadRef,
      nativeTurnRef: attempt.nativeTurnRef,
      trail,
    });
    const capabilities = target.session(sessionId)?.capabilities ?? target.declared;
    d.run(() => {
      target.claim(sessionId);
      d.spawnRun(runId);
      d.actors.threads.get(threadId)!.send({ type: "REATTACHED", runId, providerTarget: target.id, capabilities });
      const attempts = run.attempts.map((a) => ({
        attemptId: a.attemptId,
        ordinal: a.ordinal,
        reason: a.reason,
        rootNodeId: rootNodeOf(a.attemptId),
        text: run.text,
      }));
      const pendingRequestIds = requests.map((r) => r.requestId);
      d.actors.runs.get(runId)!.send({ type: "REATTACH", attempts, capabilities, pendingRequestIds });
      for (const r of requests)
        d.actors.request({
          threadId,
          runId,
          requestId: r.requestId,
          kind: r.kind,
          responseCapability: r.responseCapability,
        });
    });
  }
}
