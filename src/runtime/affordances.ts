import {
  canInterrupt,
  canRollbackProvider,
  canSteerByInterruptRestart,
  canSteerNatively,
  canSwitchModeInSession,
  canSwitchModelInSession,
  hasStructuredApprovals,
  supportsApprovalFor,
} from "../capabilities/predicates.js";
import { isAnsweredByRuntime, type ApprovalKind } from "../domain/items.js";
import { forksNatively } from "../machines/providerThread.js";
import { NotFoundError } from "../domain/errors.js";
import type { Actors } from "./actors.js";
import { isTerminalRunStatus, type RequestView, type RunView, type ThreadView } from "./projections.js";
import { subagentForkSource, subagentOperation } from "./commands/subagents.js";
import type { ProviderCapabilities } from "../capabilities/schema.js";
import { planRollback, rollbackRequest, sharedDirectoryBusy, type RollbackPlanning } from "./rollback.js";
import { forkSituation } from "./forkSituation.js";
import { sessionSharers } from "./commands/interrupt.js";
import { itemLifecycle, type ItemLifecycle } from "./ingest/lifecycle.js";

/**
 * The capability-driven UI contract: what a client may offer for a thread right now, and
 * why not where it may not. Computed from the capability record and the read models with
 * the same guards the machines use, so the UI never offers what the runtime would refuse.
 */
export interface Affordances {
  threadId: string;
  /** The target the thread's next run goes to, and the capability record read. */
  providerTarget: string;
  capabilityVersion: number;
  interrupt: {
    state: "available" | "destructive_fallback" | "unavailable";
    runId: string | null;
    reason: string | null;
  };
  steer: { state: "native" | "interrupt_restart" | "unavailable"; reason: string | null };
  /** Per fork point (after each run): how a fork from there would be realised. */
  fork: Array<{ afterRunId: string; source: "native" | "synthetic" | "unavailable"; reason: string | null }>;
  /** Only runs with an app checkpoint; annotated with what the provider's conversation does. */
  rollback: Array<{
    toRunId: string;
    checkpointId: string;
    provider: "native" | "divergent" | "not_needed";
    available: boolean;
    reason: string | null;
  }>;
  /** `answered_by_runtime`: a dynamic tool call, answered by the embedder's registered tool, never by a user. */
  requests: Array<{ requestId: string; kind: string; state: "respondable" | "expired" | "answered_by_runtime" }>;
  /** Shown only when structured artifacts exist in the thread. */
  panels: { plan: boolean; todo: boolean };
  /** `sandbox_only`: no approval will be asked (the provider asks none, or the thread's mode never asks). */
  approvals: "structured" | "sandbox_only";
  /** A provider's questions: respondable requests, or text in its reply (answered with the next message). */
  questions: "structured" | "as_text";
  /**
   * Plans the provider proposes: artifacts to implement (each proposed plan of the thread, with whether
   * `implementPlan` may carry it out now), or text in its reply.
   */
  plans: {
    proposed: "artifacts" | "as_text";
    implement: Array<{ nodeId: string; runId: string; available: boolean; reason: string | null }>;
  };
  /** The approvals the provider may ask; one of another kind is declined by the runtime, never shown. */
  approvalKinds: ApprovalKind[];
  /**
   * What the thread's items will look like (streamed or whole, started and completed by the provider or by the
   * runtime, with native ids or by ordinal): from the capability record alone, so it is known before the first turn.
   */
  items: ItemLifecycle;
  tools: ToolAffordances;
  modelSwitch: "in_session" | "new_session";
  /** A runtime mode change (plan mode, approval policy): in the live session, or by a new one. */
  modeSwitch: "in_session" | "new_session";
  subagents: SubagentAffordances;
}

/** What the provider does with tools beyond its own, from the record (and the tools the embedder registered). */
export interface ToolAffordances {
  /** MCP tool calls are tool items with their server and tool (`detail.mcp`), or the provider has none. */
  mcp: "named" | "none";
  /**
   * The embedder's registered tools (`RuntimeOptions.tools`): offered to the provider and answered by the runtime, not
   * offered because the provider calls no tools back (`dynamic_tools_unsupported`), or none are registered.
   */
  callbacks: "offered" | "unsupported" | "none_registered";
}

/**
 * How the thread's subagents show, from the record alone (addressable child threads, nested nodes only, or inline: no
 * subagents), and each subagent of the thread with what may be done to it.
 */
export interface SubagentAffordances {
  shown: "addressable" | "nested" | "inline";
  reason: string | null;
  nodes: Array<{
    nodeId: string;
    runId: string;
    ended: boolean;
    wait: { available: boolean; reason: string | null };
    close: { available: boolean; reason: string | null };
    /** How `forkThread({ fromSubagentNodeId })` would be realised on the subagent's provider. */
    fork: { source: "native" | "synthetic" | "unavailable"; reason: string | null };
  }>;
}

const APPROVAL_KINDS: readonly ApprovalKind[] = ["command", "file_read", "file_change", "apply_patch"];

/**
 * What the affordances read: the read model, the targets, the thread actors, whether a request can still be answered.
 */
export interface AffordancesSource extends RollbackPlanning {
  readonly actors: Pick<Actors, "threads" | "runs">;
  /** The embedder's registered tools. */
  readonly tools: readonly unknown[];
  generationOf(request: RequestView): number | null;
}

export function affordancesOf(
  rt: AffordancesSource,
  threadId: string,
  allowSessionStopInterrupt: boolean,
): Affordances {
  const thread = rt.views.threads.get(threadId)!;
  const providerTarget = thread.runs.at(-1)?.providerTarget ?? thread.providerTarget;
  const target = rt.targets.get(providerTarget);
  if (!target) throw new NotFoundError("provider target", providerTarget);
  const caps = target.capabilities();
  const active = thread.runs.find((r) => !isTerminalRunStatus(r.status) && r.status !== "queued") ?? null;
  const busy =
    thread.runs.some((r) => !isTerminalRunStatus(r.status)) ||
    rt.actors.threads.get(threadId)?.getSnapshot().matches("rollingBack");
  const sharedBusy = sharedDirectoryBusy(rt, threadId);

  const interrupt: Affordances["interrupt"] = !active
    ? { state: "unavailable", runId: null, reason: "no active run" }
    : canInterrupt(caps)
      ? { state: "available", runId: active.runId, reason: null }
      : allowSessionStopInterrupt
        ? sessionStop(rt, active.runId)
        : { state: "unavailable", runId: active.runId, reason: "turns.supportsInterrupt is false" };
  const steer: Affordances["steer"] = canSteerNatively(caps)
    ? { state: "native", reason: null }
    : canSteerByInterruptRestart(caps)
      ? {
          state: "interrupt_restart",
          reason: "restarts the active run as a new attempt (turns.supportsActiveSteering is false)",
        }
      : {
          state: "unavailable",
          reason:
            "neither native steering (turns.supportsActiveSteering) nor interrupt-restart " +
            "(turns.supportsSteeringByInterruptRestart with turns.supportsInterrupt)",
        };

  const fork = thread.runs.map((run): Affordances["fork"][number] => {
    if (run.status === "rolled_back")
      return { afterRunId: run.runId, source: "unavailable", reason: "the run was rolled back" };
    if (!isTerminalRunStatus(run.status))
      return { afterRunId: run.runId, source: "unavailable", reason: `not a stable point (run is ${run.status})` };
    const { situation } = forkSituation(
      rt.views,
      providerTarget,
      { parentThreadId: threadId, forkedFromRunId: run.runId },
      caps,
      !!target.adapter.forkThread,
    );
    const native = forksNatively(situation);
    return {
      afterRunId: run.runId,
      source: native ? "native" : "synthetic",
      reason: native ? null : `${situation.why}; portable context, lower fidelity`,
    };
  });

  const rollback = thread.runs.flatMap((run): Affordances["rollback"] => {
    const checkpoint = rt.views.finalCheckpoint(run.runId);
    if (!checkpoint || run.status === "rolled_back") return [];
    const request = rollbackRequest(rt, planRollback(rt, threadId, run.runId));
    const provider =
      request.laterTurns === 0 && !request.laterElsewhere
        ? "not_needed"
        : canRollbackProvider(request.capabilities) && !request.laterElsewhere
          ? "native"
          : "divergent";
    const reason = busy
      ? "the thread is busy"
      : sharedBusy
        ? `thread ${sharedBusy} works in the same directory`
        : provider === "divergent"
          ? "the provider's conversation cannot follow: it is rebuilt on the next run"
          : null;
    return [
      { toRunId: run.runId, checkpointId: checkpoint.checkpointId, provider, available: !busy && !sharedBusy, reason },
    ];
  });

  const requests = [...rt.views.requests.values()]
    .filter((r) => r.threadId === threadId && (r.status === "pending" || r.status === "expired"))
    .map((r) => ({
      requestId: r.requestId,
      kind: r.kind,
      state: requestState(rt, r),
    }));

  const kinds = new Set(thread.runs.flatMap((r) => r.items.map((i) => i.kind)));
  return {
    threadId,
    providerTarget,
    capabilityVersion: caps.version,
    interrupt,
    steer,
    fork,
    rollback,
    requests,
    panels: { plan: kinds.has("plan") || kinds.has("proposed_plan"), todo: kinds.has("todo_list") },
    approvals: hasStructuredApprovals(caps) && thread.runtimeMode.approvals !== "never" ? "structured" : "sandbox_only",
    questions: caps.planning.supportsStructuredQuestions ? "structured" : "as_text",
    plans: {
      proposed: caps.planning.emitsProposedPlan ? "artifacts" : "as_text",
      implement: thread.runs.flatMap((run) =>
        run.items
          .filter((i) => i.kind === "proposed_plan")
          .map((i) => ({
            nodeId: i.id,
            runId: run.runId,
            // Implementing queues a run like any message; only a plan the conversation no longer holds cannot be.
            available: run.status !== "rolled_back",
            reason: run.status === "rolled_back" ? "the run that proposed it was rolled back" : null,
          })),
      ),
    },
    approvalKinds: APPROVAL_KINDS.filter((kind) => supportsApprovalFor(caps, kind)),
    items: itemLifecycle(caps),
    tools: {
      mcp: caps.tools.supportsMcpTools ? "named" : "none",
      callbacks:
        rt.tools.length === 0 ? "none_registered" : caps.tools.supportsDynamicToolCallbacks ? "offered" : "unsupported",
    },
    modelSwitch: canSwitchModelInSession(caps) ? "in_session" : "new_session",
    modeSwitch: canSwitchModeInSession(caps) ? "in_session" : "new_session",
    subagents: subagentAffordances(rt, thread, caps),
  };
}

/**
 * The destructive fallback, unless the session also runs other threads' turns: stopping it would
 * end theirs too, and the runtime refuses it (`session_stop_refused_shared`).
 */
function sessionStop(rt: AffordancesSource, runId: string): Affordances["interrupt"] {
  const others = sessionSharers(rt, runId);
  if (others.length > 0)
    return {
      state: "unavailable",
      runId,
      reason: `stopping the provider session would also end the runs of ${others.join(", ")}`,
    };
  return {
    state: "destructive_fallback",
    runId,
    reason: "stops the provider session (turns.supportsInterrupt is false)",
  };
}

function requestState(rt: AffordancesSource, request: RequestView): Affordances["requests"][number]["state"] {
  if (rt.generationOf(request) === null) return "expired";
  return isAnsweredByRuntime(request.kind) ? "answered_by_runtime" : "respondable";
}

function subagentAffordances(
  rt: AffordancesSource,
  thread: ThreadView,
  caps: ProviderCapabilities,
): SubagentAffordances {
  const { supportsSubagents, exposesSubagentThreadIds } = caps.subagents;
  const shown = !supportsSubagents ? "inline" : exposesSubagentThreadIds ? "addressable" : "nested";
  const reason = !supportsSubagents
    ? "subagents.supportsSubagents is false: no subagent nodes"
    : !exposesSubagentThreadIds
      ? "subagents.exposesSubagentThreadIds is false: subagents are nested nodes, not addressable"
      : null;
  const nodes = thread.runs.flatMap((run) =>
    run.items
      .filter((i) => i.kind === "subagent")
      .map((node): SubagentAffordances["nodes"][number] => {
        const ended = node.status === "complete";
        const operation = (op: "wait" | "close") => {
          const availability = subagentOperation(rt, run, node.id, op);
          return availability.available
            ? { available: true, reason: null }
            : { available: false, reason: availability.reason };
        };
        const closeRequested = rt.views.subagentThreads.get(node.id)?.closeRequested;
        const close = ended
          ? { available: false, reason: "the subagent has ended" }
          : closeRequested
            ? { available: false, reason: "its close was requested" }
            : operation("close");
        const fork = subagentFork(rt, run, node.id, ended);
        return { nodeId: node.id, runId: run.runId, ended, wait: operation("wait"), close, fork };
      }),
  );
  return { shown, reason, nodes };
}

/** A fork of an ended subagent, on its own provider (forkThread's default). */
function subagentFork(
  rt: AffordancesSource,
  run: RunView,
  nodeId: string,
  ended: boolean,
): SubagentAffordances["nodes"][number]["fork"] {
  if (run.status === "rolled_back") return { source: "unavailable", reason: "the run was rolled back" };
  if (!ended) return { source: "unavailable", reason: "the subagent is still running" };
  const { source, reason } = subagentForkSource(rt, run, nodeId, run.providerTarget);
  return { source, reason };
}
