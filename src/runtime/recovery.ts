import type { DomainEvent } from "../domain/events.js";
import type { Projections } from "./projections.js";

/**
 * What a runtime coming back from a crash must settle before it accepts commands: runs
 * that were starting or running are cancelled (the host that ran them is gone with the
 * previous process), their open items closed, pending requests expired as not resumable.
 * Queued runs never touched a provider, so they stay queued and resume (unless their provider
 * target is no longer configured: then they are cancelled too).
 */
export function planRecovery(views: Projections, configuredTargets: ReadonlySet<string>): { events: DomainEvent[] } {
  const events: DomainEvent[] = [];
  const cancelledRuns: string[] = [];
  const requeuedRuns: string[] = [];
  const expiredRequests: string[] = [];

  for (const request of views.pendingRequests()) {
    const { threadId, runId, requestId } = request;
    events.push({ type: "request.closed", threadId, runId, requestId, status: "expired", reason: "not_resumable: runtime restarted" });
    expiredRequests.push(requestId);
  }
  for (const run of views.activeRuns()) {
    const { threadId, runId } = run;
    if (run.status === "queued" && configuredTargets.has(run.providerTarget)) {
      requeuedRuns.push(runId);
      continue;
    }
    for (const item of run.items) {
      if (item.status !== "streaming") continue;
      events.push({ type: "node.completed", threadId, runId, nodeId: item.id, status: "cancelled", text: null, output: null, exitCode: null, settledBy: "runtime" });
    }
    for (const attempt of run.attempts) {
      if (attempt.status === "running" || attempt.status === "pending") {
        events.push({ type: "attempt.terminal", threadId, runId, attemptId: attempt.attemptId, status: "cancelled" });
      }
    }
    const reason = configuredTargets.has(run.providerTarget) ? "runtime_restarted" : "provider_target_missing";
    events.push({ type: "run.terminal", threadId, runId, status: "cancelled", reason, failure: null });
    cancelledRuns.push(runId);
  }
  if (events.length > 0 || requeuedRuns.length > 0) {
    events.push({ type: "runtime.recovered", cancelledRuns, expiredRequests, requeuedRuns });
  }
  return { events };
}
