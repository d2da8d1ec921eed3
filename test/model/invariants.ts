import { DEGRADATIONS, type DomainEvent, type LogRecord } from "../../src/index.js";
import type { Runtime } from "../../src/runtime/runtime.js";

/**
 * The domain invariants, checked over the log (and, once a path has settled, the read
 * models) after every step of every model path. Returns the violations found.
 */

const TERMINAL = new Set(["completed", "interrupted", "failed", "cancelled", "rolled_back"]);
const RUNNING = new Set(["starting", "running", "waiting"]);
/** After its terminal, a run never gains nodes, states, attempts or requests. */
const NEVER_AFTER_TERMINAL = new Set(["node.started", "node.delta", "run.state", "attempt.started", "request.opened"]);
/** Capability fields a policy may name besides its registry one (it reads several). */
const ALTERNATIVE_CAPABILITY: Record<string, string[]> = {
  synthetic_fork: ["threads.canForkFromTurn"],
  turn_refs_as_evidence: ["turns.exposesNativeTurnId"],
  subagent_wait_unsupported: ["subagents.exposesSubagentThreadIds"],
  subagent_close_unsupported: ["subagents.exposesSubagentThreadIds"],
  subagent_fork_synthetic: [
    "threads.canForkFromSubagentThread",
    "threads.canForkThread",
    "subagents.exposesSubagentThreadIds",
  ],
  subagent_fork_unsupported: [
    "threads.canForkFromSubagentThread",
    "threads.canForkThread",
    "subagents.exposesSubagentThreadIds",
  ],
  rollback_divergent: ["checkpointing.providerCanRollbackConversation"],
  undeclared_request_declined: [
    "approvals.supportsFileReadApproval",
    "approvals.supportsFileChangeApproval",
    "approvals.supportsApplyPatchApproval",
    "planning.supportsStructuredQuestions",
    "planning.emitsProposedPlan",
    "tools.supportsDynamicToolCallbacks",
  ],
};

/** Policies a situation can call for with no capability missing (they then name none). */
const SITUATIONAL = new Set(["rollback_divergent"]);

function namesItsCapability(policy: string, capability: string): boolean {
  const entry = DEGRADATIONS[policy as keyof typeof DEGRADATIONS];
  return entry.capability === capability || !!ALTERNATIVE_CAPABILITY[policy]?.includes(capability);
}

export function logViolations(records: readonly LogRecord<DomainEvent>[]): string[] {
  const violations: string[] = [];
  const status = new Map<string, { threadId: string; status: string }>();
  const superseded = new Set<string>();
  records.forEach((record, i) => {
    const { event, seq } = record;
    if (seq !== i + 1) violations.push(`sequence gap: record ${i} has seq ${seq}`);
    const runId = "runId" in event ? (event.runId as string | null) : null;
    const run = runId ? status.get(runId) : undefined;
    switch (event.type) {
      case "run.created":
        if (run) violations.push(`${runId} created twice`);
        status.set(event.runId, { threadId: event.threadId, status: "queued" });
        return;
      case "run.state":
        if (!run) return void violations.push(`${seq}: state of unknown run ${runId}`);
        if (TERMINAL.has(run.status)) violations.push(`${seq}: ${runId} changed state after its terminal`);
        if (RUNNING.has(event.status)) {
          const other = [...status].find(
            ([id, r]) => id !== runId && r.threadId === run.threadId && RUNNING.has(r.status),
          );
          if (other) violations.push(`${seq}: ${runId} runs while ${other[0]} of the same thread still runs`);
        }
        run.status = event.status;
        return;
      case "run.terminal":
        if (!run) return void violations.push(`${seq}: terminal of unknown run ${runId}`);
        if (TERMINAL.has(run.status)) violations.push(`${seq}: ${runId} terminal twice`);
        run.status = event.status;
        return;
      case "rollback.applied":
        for (const id of event.rolledBackRunIds) {
          const later = status.get(id);
          if (later && !TERMINAL.has(later.status))
            violations.push(`${seq}: rolled back ${id} while it was ${later.status}`);
          if (later) later.status = "rolled_back";
        }
        return;
      case "attempt.terminal":
        if (event.status === "superseded") superseded.add(event.attemptId);
        return;
      case "node.started":
        if (superseded.has(event.attemptId)) violations.push(`${seq}: a superseded attempt's node was applied`);
        break;
      case "policy.applied": {
        const entry = DEGRADATIONS[event.policy as keyof typeof DEGRADATIONS];
        if (!entry) violations.push(`${seq}: unknown policy ${event.policy}`);
        else if (entry.outcome !== event.outcome)
          violations.push(`${seq}: ${event.policy} recorded as ${event.outcome}`);
        else if (
          event.capability === null
            ? !SITUATIONAL.has(event.policy)
            : !namesItsCapability(event.policy, event.capability)
        ) {
          violations.push(`${seq}: ${event.policy} names capability ${event.capability}`);
        }
        return;
      }
      default:
        break;
    }
    if (run && TERMINAL.has(run.status) && NEVER_AFTER_TERMINAL.has(event.type))
      violations.push(`${seq}: ${event.type} for ${runId} after its terminal`);
  });
  return violations;
}

/** Once a path has ended (runtime closed or quiescent): nothing is left running or pending for a finished run. */
export function settledViolations(rt: Runtime): string[] {
  const violations: string[] = [];
  for (const run of rt.views.runs.values()) {
    if (!TERMINAL.has(run.status)) continue;
    for (const attempt of run.attempts) {
      if (attempt.status === "running" || attempt.status === "pending")
        violations.push(`${run.runId} is ${run.status} but attempt ${attempt.ordinal} is ${attempt.status}`);
    }
    for (const item of run.items)
      if (item.status === "streaming" && run.status !== "rolled_back")
        violations.push(`${run.runId} is ${run.status} but item ${item.id} still streams`);
  }
  for (const request of rt.views.requests.values()) {
    const run = rt.views.runs.get(request.runId)!;
    if (request.status === "pending" && TERMINAL.has(run.status))
      violations.push(`request ${request.requestId} pending on ${run.status} run`);
  }
  return violations;
}

/**
 * Turn item kinds that only a provider event can complete before the run ends (the rest are runtime notes, complete at
 * birth).
 */
const PROVIDER_ITEM_KINDS = new Set([
  "assistant_message",
  "reasoning",
  "plan",
  "proposed_plan",
  "todo_list",
  "command",
  "file_change",
  "tool",
  "approval",
  "question",
  "subagent",
]);

/**
 * The read model at any instant (not only once settled): every item id appears once in the
 * whole projection; a run that is terminal has no item still streaming, no attempt still
 * running and no request still pending (its completion barrier ran before its terminal).
 */
export function readModelViolations(views: Pick<Runtime["views"], "runs" | "requests">): string[] {
  const violations: string[] = [];
  const owner = new Map<string, string>();
  for (const run of views.runs.values()) {
    for (const item of run.items) {
      const first = owner.get(item.id);
      if (first !== undefined) violations.push(`item id ${item.id} appears twice (runs ${first} and ${run.runId})`);
      owner.set(item.id, run.runId);
    }
    if (!TERMINAL.has(run.status) || run.status === "rolled_back") continue;
    for (const item of run.items)
      if (item.status !== "complete")
        violations.push(`${run.runId} is ${run.status} but its ${item.kind} item ${item.id} is still ${item.status}`);
    for (const attempt of run.attempts) {
      if (attempt.status === "running" || attempt.status === "pending")
        violations.push(`${run.runId} is ${run.status} but attempt ${attempt.ordinal} is ${attempt.status}`);
    }
  }
  for (const request of views.requests.values()) {
    const run = views.runs.get(request.runId);
    if (request.status === "pending" && run && TERMINAL.has(run.status))
      violations.push(`request ${request.requestId} pending on ${run.status} run ${run.runId}`);
  }
  return violations;
}

/** Is this item kind one a provider event completes (as opposed to a runtime note)? */
export const isProviderItemKind = (kind: string): boolean => PROVIDER_ITEM_KINDS.has(kind);

/**
 * The transcript in the log: a node id names one node (a node may be announced again, never
 * re-used for another); every node a run started is completed (by `node.completed`, or, for a request's node, by the
 * request
 * settling) before that run's terminal is recorded.
 */
export function transcriptViolations(records: readonly LogRecord<DomainEvent>[]): string[] {
  const violations: string[] = [];
  const open = new Map<string, Map<string, string>>(); // runId -> nodeId -> kind
  const started = new Map<string, { runId: string; attemptId: string; kind: string }>();
  const nodeOfRequest = new Map<string, { runId: string; nodeId: string }>();
  for (const { seq, event } of records) {
    switch (event.type) {
      case "node.started": {
        // Announced again (its start came after its first delta) is the same node; the same id for another node is not.
        const first = started.get(event.nodeId);
        if (first && (first.runId !== event.runId || first.attemptId !== event.attemptId || first.kind !== event.kind))
          violations.push(`${seq}: node id ${event.nodeId} names two nodes (${first.kind} and ${event.kind})`);
        if (first) break;
        started.set(event.nodeId, event);
        if (!open.has(event.runId)) open.set(event.runId, new Map());
        open.get(event.runId)!.set(event.nodeId, event.kind);
        break;
      }
      case "node.completed":
        open.get(event.runId)?.delete(event.nodeId);
        break;
      case "request.opened":
        nodeOfRequest.set(event.requestId, { runId: event.runId, nodeId: event.nodeId });
        break;
      case "request.resolved":
      case "request.closed": {
        const node = nodeOfRequest.get(event.requestId);
        if (node) open.get(node.runId)?.delete(node.nodeId);
        break;
      }
      case "run.terminal":
        for (const [nodeId, kind] of open.get(event.runId) ?? [])
          violations.push(`${seq}: ${event.runId} ended ${event.status} with its ${kind} node ${nodeId} still open`);
        open.delete(event.runId);
        break;
      default:
        break;
    }
  }
  return violations;
}
