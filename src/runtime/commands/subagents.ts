import type { z } from "zod";
import type { ProviderCapabilities } from "../../capabilities/schema.js";
import type { SubagentAddress } from "../../adapters/contract.js";
import type {
  CloseSubagentReceipt,
  SubagentInputSchema,
  SubagentOutcome,
  WaitForSubagentInputSchema,
} from "../../domain/commands.js";
import { CapabilityUnsupportedError, ConflictError, NotFoundError, TimeoutError } from "../../domain/errors.js";
import type { DomainEvent } from "../../domain/events.js";
import { policyEvent } from "../../machines/emitted.js";
import { forksNatively } from "../../machines/providerThread.js";
import { subagentForkSituation } from "../forkSituation.js";
import { contextDelivery } from "../handoff.js";
import type { Projections, RunView, SubagentThreadRecord, ThreadView, TurnItem } from "../projections.js";
import type { EventLog } from "../store/eventLog.js";
import type { Target } from "../targets.js";
import { assertOpen, findTarget, findThread, type RuntimeState } from "./checks.js";

/**
 * Operations on a subagent: wait for it, close it, fork its conversation. Wait and close go through the provider
 * (`waitForSubagent`, `closeSubagent`), so they need its record to allow them and the subagent's child thread to be
 * addressable (`subagent.thread_bound`); otherwise they are refused, typed, with the policy recorded. A fork of a
 * subagent is native or portable (decided at its first run, as every fork), refused only where neither can be.
 */

/** What the subagent operations need: the read models and targets, and the write path. */
export interface SubagentHost extends RuntimeState {
  readonly views: Projections;
  readonly targets: ReadonlyMap<string, Target>;
  run(fn: () => void): unknown;
  commit(event: DomainEvent): void;
}

/** Where the runtime hears a node's completion once it is durable. */
export type NodeLog = Pick<EventLog<DomainEvent>, "subscribe" | "whenDurable">;

type Operation = "wait" | "close";

const OPERATIONS = {
  wait: { policy: "subagent_wait_unsupported", field: "canWaitForSubagents", method: "waitForSubagent" },
  close: { policy: "subagent_close_unsupported", field: "canCloseSubagents", method: "closeSubagent" },
} as const;

/** Whether the provider can be asked to wait for or close this subagent, and if not, which capability is missing. */
export type OperationAvailability =
  | { available: true; child: SubagentThreadRecord; target: Target }
  | { available: false; capability: string; reason: string };

export function subagentOperation(
  d: Pick<SubagentHost, "views" | "targets">,
  run: RunView,
  nodeId: string,
  operation: Operation,
): OperationAvailability {
  const { field, method } = OPERATIONS[operation];
  const target = d.targets.get(run.providerTarget);
  const child = d.views.subagentThreads.get(nodeId);
  const caps = target && recordOf(target, child);
  const capability = `subagents.${field}`;
  if (!target || !caps || !caps.subagents[field])
    return { available: false, capability, reason: `${run.providerTarget}: ${capability} is false` };
  if (!target.adapter[method])
    return { available: false, capability, reason: `${run.providerTarget}'s adapter has no ${method}` };
  if (!child)
    return {
      available: false,
      capability: "subagents.exposesSubagentThreadIds",
      reason: "the subagent's child thread is not addressable (no subagent thread id)",
    };
  return { available: true, child, target };
}

/** The record of the session the subagent runs in, while it lives; else the target's. */
function recordOf(target: Target, child: SubagentThreadRecord | undefined): ProviderCapabilities {
  return (child && target.session(child.sessionId)?.capabilities) ?? target.capabilities();
}

/** The subagent's run and item in the thread, or `not_found`. */
export function findSubagent(
  d: Pick<SubagentHost, "views">,
  threadId: string,
  nodeId: string,
): { thread: ThreadView; run: RunView; node: TurnItem } {
  const thread = findThread(d, threadId);
  for (const run of thread.runs) {
    const node = run.items.find((i) => i.id === nodeId && i.kind === "subagent");
    if (node) return { thread, run, node };
  }
  throw new NotFoundError("subagent", nodeId);
}

/** Resolves once the subagent has ended and its end is durable; the provider is asked to wait where it can be. */
export async function waitForSubagent(
  d: SubagentHost,
  log: NodeLog,
  p: z.output<typeof WaitForSubagentInputSchema>,
): Promise<SubagentOutcome> {
  assertOpen(d);
  const { run, node } = findSubagent(d, p.threadId, p.nodeId);
  const op = available(d, run, p.nodeId, "wait");
  if (node.status !== "complete") {
    const stop = new AbortController();
    const timer =
      p.timeoutMs === undefined
        ? undefined
        : setTimeout(() => {
            const detail = { nodeId: p.nodeId, timeoutMs: p.timeoutMs };
            stop.abort(new TimeoutError(`subagent ${p.nodeId} did not end within ${p.timeoutMs} ms`, detail));
          }, p.timeoutMs);
    try {
      const address = subagentAddress(d, run, node, op.child);
      await Promise.all([
        op.target.adapter.waitForSubagent!({ ...address, signal: stop.signal }),
        nodeEnded(d, log, p.nodeId, stop.signal),
      ]);
    } finally {
      clearTimeout(timer);
      stop.abort(); // the other wait, if one is left
    }
  }
  await log.whenDurable();
  return outcomeOf(d, run, p.nodeId);
}

/**
 * Asks the provider to close a running subagent, once: the request is recorded before the provider is called, so a
 * concurrent close finds it and does not ask again. Returns on the provider's acknowledgement; the subagent's end
 * (`interrupted`) follows as its events.
 */
export async function closeSubagent(
  d: SubagentHost,
  p: z.output<typeof SubagentInputSchema>,
): Promise<Omit<CloseSubagentReceipt, "commandId">> {
  const { thread, run, node } = findSubagent(d, p.threadId, p.nodeId);
  const op = available(d, run, p.nodeId, "close");
  const receipt = (via: CloseSubagentReceipt["via"]) => ({
    threadId: thread.threadId,
    runId: run.runId,
    nodeId: p.nodeId,
    via,
  });
  if (node.status === "complete") return receipt("already_ended");
  if (op.child.closeRequested) return receipt("already_requested");
  d.run(() =>
    d.commit({ type: "subagent.close_requested", threadId: thread.threadId, runId: run.runId, nodeId: p.nodeId }),
  );
  try {
    await op.target.adapter.closeSubagent!(subagentAddress(d, run, node, op.child));
  } catch (error) {
    // It ended on its own meanwhile: nothing was left to close.
    if (d.views.item(p.nodeId)?.status === "complete") return receipt("already_ended");
    throw error;
  }
  return receipt("requested");
}

/**
 * What a fork of a subagent starts from: its run, once the subagent has ended. Refused (typed, recorded) where its
 * child thread cannot be forked natively and the fork's provider takes no portable context.
 */
export function subagentForkPoint(
  d: SubagentHost,
  parent: ThreadView,
  nodeId: string,
  providerTarget: string | undefined,
): { run: RunView; providerTarget: string } {
  const { run, node } = findSubagent(d, parent.threadId, nodeId);
  if (node.status !== "complete")
    throw new ConflictError(`subagent ${nodeId} is still running; forks start only from a finished subagent`, {
      nodeId,
    });
  const targetId = providerTarget ?? run.providerTarget;
  findTarget(d, targetId, "providerTarget");
  const source = subagentForkSource(d, run, nodeId, targetId);
  if (source.source === "unavailable") {
    refuse(
      d,
      { threadId: parent.threadId, runId: run.runId },
      "subagent_fork_unsupported",
      source.capability,
      source.reason,
    );
  }
  return { run, providerTarget: targetId };
}

export type SubagentForkSource =
  | { source: "native"; capability: string; reason: null }
  | { source: "synthetic" | "unavailable"; capability: string; reason: string };

/** How a fork of the subagent on this target would be realised (the provider-thread machine decides the same way). */
export function subagentForkSource(
  d: Pick<SubagentHost, "views" | "targets">,
  run: RunView,
  nodeId: string,
  targetId: string,
): SubagentForkSource {
  const target = d.targets.get(targetId);
  if (!target) throw new NotFoundError("provider target", targetId);
  const caps = target.capabilities();
  const { situation } = subagentForkSituation(d.views, targetId, run.runId, nodeId, caps, {
    adapterForks: !!target.adapter.forkThread,
  });
  if (forksNatively(situation)) return { source: "native", capability: situation.capability, reason: null };
  if (contextDelivery(caps)) return { source: "synthetic", capability: situation.capability, reason: situation.why };
  const reason = `${situation.why}, and ${targetId} takes no explicit context to be told it`;
  return { source: "unavailable", capability: situation.capability, reason };
}

/** The operation's availability, or its refusal recorded and thrown. */
function available(d: SubagentHost, run: RunView, nodeId: string, operation: Operation) {
  const op = subagentOperation(d, run, nodeId, operation);
  if (op.available) return op;
  return refuse(
    d,
    { threadId: run.threadId, runId: run.runId },
    OPERATIONS[operation].policy,
    op.capability,
    op.reason,
  );
}

function refuse(
  d: SubagentHost,
  where: { threadId: string; runId: string },
  policy: "subagent_wait_unsupported" | "subagent_close_unsupported" | "subagent_fork_unsupported",
  capability: string,
  detail: string,
): never {
  d.run(() => d.commit(policyEvent(where, policy, detail, capability)));
  throw new CapabilityUnsupportedError(capability, detail, { fallback: "refused", policy });
}

/** The child thread, under the parent provider thread whose turn started it, in the session it runs in. */
function subagentAddress(d: SubagentHost, run: RunView, node: TurnItem, child: SubagentThreadRecord): SubagentAddress {
  const attempt = run.attempts.find((a) => a.attemptId === node.attemptId);
  const parent = attempt?.providerThreadId ? d.views.providerThreadsById.get(attempt.providerThreadId) : undefined;
  if (!parent) throw new NotFoundError("provider thread of subagent", node.id);
  const cwd = d.views.threads.get(run.threadId)!.cwd;
  return {
    sessionId: child.sessionId,
    thread: { threadRef: parent.nativeThreadRef, resumeCursor: parent.resumeCursor, cwd },
    childThreadRef: child.nativeThreadRef,
  };
}

function outcomeOf(d: SubagentHost, run: RunView, nodeId: string): SubagentOutcome {
  const node = d.views.item(nodeId)!;
  const status = node.detail?.status;
  return {
    threadId: run.threadId,
    runId: run.runId,
    nodeId,
    status: typeof status === "string" ? status : "completed",
    result: node.result ?? null,
  };
}

/** Resolves once the node's completion is durable; rejects with the signal's reason when it aborts first. */
function nodeEnded(d: SubagentHost, log: NodeLog, nodeId: string, signal: AbortSignal): Promise<void> {
  if (d.views.item(nodeId)?.status === "complete") return log.whenDurable();
  return new Promise((resolve, reject) => {
    let unsubscribe: (() => void) | undefined;
    let done = false;
    const finish = (settle: () => void) => {
      if (done) return;
      done = true;
      unsubscribe?.();
      signal.removeEventListener("abort", onAbort);
      settle();
    };
    const onAbort = () => finish(() => reject(signal.reason));
    signal.addEventListener("abort", onAbort, { once: true });
    unsubscribe = log.subscribe(
      d.views.head,
      () => finish(resolve),
      (r) => r.event.type === "node.completed" && r.event.nodeId === nodeId,
    );
    if (done) unsubscribe();
  });
}
