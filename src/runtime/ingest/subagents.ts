import type { ProviderCapabilities } from "../../capabilities/schema.js";
import type { ProviderEvent } from "../../adapters/contract.js";
import type { TurnTerminalStatus } from "../../domain/entities.js";
import { derivedId } from "../../domain/ids.js";
import {
  applied,
  degraded,
  nodeById,
  protocolWarning,
  nodeStartedEvent,
  scopeOf,
  startNode,
  type NodeEntry,
  unannouncedSubagent,
  type Routed,
  type TurnBinding,
} from "./correlation.js";
import { startedBefore } from "./nodes.js";
import type { TurnBindings } from "./turnBindings.js";

/**
 * Subagents and their child threads: a subagent node per subagent the provider announces, or per child thread it
 * never announced (adopted by the one open turn); closed by its own completion, or by its child turn's end when the
 * provider has no subagent lifecycle (`subagent_lifecycle_inferred`). A child turn ending never ends the run. A
 * subagent's child thread becomes an addressable provider thread (`subagent.thread_bound`) where the record exposes
 * subagent thread ids, else the subagent is a nested node only (`subagent_not_addressable`). A subagent from a
 * provider whose record says it has none makes no node (`subagent_shown_inline`).
 */

type EventOf<T extends ProviderEvent["type"]> = Extract<ProviderEvent, { type: T }>;

export function subagentStarted(
  turns: TurnBindings,
  sessionId: string,
  binding: TurnBinding,
  caps: ProviderCapabilities,
  providerTarget: string,
  event: EventOf<"subagent.started">,
): Routed[] {
  if (!caps.subagents.supportsSubagents) {
    // Its child thread's events are the turn's own: they hang at its root.
    if (event.childThreadRef) binding.childThreads.set(event.childThreadRef, binding.rootNodeId);
    return undeclaredSubagent(binding, providerTarget, event.agent);
  }
  const earlier = startedBefore(binding, caps, "subagent", event.itemRef, event.childThreadRef);
  if (earlier === "duplicate") return [];
  // Its child thread's events may have come first (an adopted child): that node is this subagent.
  const node = earlier ?? startNode(binding, caps.identity.nativeItemIds, "subagent", event.itemRef, event.agent);
  node.announced = true;
  if (event.itemRef) binding.byRef.set(event.itemRef, node);
  if (node.open && !binding.subagents.includes(node.nodeId)) binding.subagents.push(node.nodeId);
  // An adopted child thread was bound when it was adopted.
  const adopted = !!event.childThreadRef && binding.childThreads.get(event.childThreadRef) === node.nodeId;
  if (event.childThreadRef) {
    binding.childThreads.set(event.childThreadRef, node.nodeId);
    // the provider reuses it for this turn
    turns.reclaimChildThread(sessionId, event.childThreadRef);
  }
  const started = nodeStartedEvent(binding, node, providerTarget, undefined, event.threadRef);
  return [
    applied(binding, { ...started, detail: { toolName: event.agent, input: event.prompt } }),
    ...(adopted ? [] : childThread(binding, caps, providerTarget, node, event.childThreadRef)),
  ];
}

/** The provider reported a subagent its record says it never runs: no node; its work hangs where it lands. */
function undeclaredSubagent(binding: TurnBinding, providerTarget: string, agent: string): Routed[] {
  const detail = `${providerTarget} reported subagent ${agent}; its record says it has none: its work is shown inline`;
  return [
    protocolWarning(binding, providerTarget, `reported subagent ${agent} although its record says it has none`),
    ...degraded(binding, "subagent_shown_inline", detail),
  ];
}

/**
 * The subagent's child thread as a provider thread the app can address (wait, close, fork), where the record exposes
 * subagent thread ids and the provider named one; else the subagent is a nested node only, by policy.
 */
function childThread(
  binding: TurnBinding,
  caps: ProviderCapabilities,
  providerTarget: string,
  node: NodeEntry,
  childThreadRef: string | undefined,
): Routed[] {
  if (childThreadRef && caps.subagents.exposesSubagentThreadIds) {
    return [
      applied(binding, {
        type: "subagent.thread_bound",
        ...scopeOf(binding),
        nodeId: node.nodeId,
        // Derived from the node: the same transcript replayed binds the same provider thread id.
        providerThreadId: derivedId("pth", node.nodeId),
        providerTarget,
        sessionId: binding.sessionId,
        nativeThreadRef: childThreadRef,
      }),
    ];
  }
  const why = !caps.subagents.exposesSubagentThreadIds
    ? "its record says subagent thread ids are not exposed"
    : `the provider named no child thread for it (identity.nativeThreadIds: ${caps.identity.nativeThreadIds})`;
  return degraded(binding, "subagent_not_addressable", `subagent ${node.nodeId}: ${why}`);
}

export function subagentCompleted(binding: TurnBinding, event: EventOf<"subagent.completed">): Routed[] {
  // By its own refs when it names any (an unknown one closes nothing), else the innermost open subagent.
  const named = event.itemRef !== undefined || event.childThreadRef !== undefined;
  const node = named
    ? subagentNamed(binding, event.itemRef, event.childThreadRef)
    : nodeById(binding, binding.subagents.at(-1));
  if (!node || !node.open) return [];
  return [closeSubagent(binding, node, event.status, event.result ?? null)];
}

/**
 * A child thread the provider never announced (no subagent lifecycle events): when exactly
 * one turn is open in the session, it is that turn's subagent; shown as a subagent node.
 */
export function adoptChildThread(
  turns: TurnBindings,
  sessionId: string,
  caps: ProviderCapabilities,
  providerTarget: string,
  threadRef: string | undefined,
  out: Routed[],
): TurnBinding | undefined {
  if (!threadRef || !caps.subagents.supportsSubagents) return undefined;
  if (turns.isKnownThread(sessionId, threadRef)) return undefined;
  const open = turns.openIn(sessionId);
  if (open.length !== 1) return undefined;
  const binding = open[0]!;
  // Not announced: the subagent.started that may still come for this child thread claims it.
  const node = unannouncedSubagent(binding, `child:${threadRef}`, threadRef);
  binding.childThreads.set(threadRef, node.nodeId);
  out.push(
    applied(binding, { ...nodeStartedEvent(binding, node, providerTarget, undefined, undefined), detail: null }),
    ...childThread(binding, caps, providerTarget, node, threadRef),
  );
  // Where the provider announces its subagents, a child thread ahead of its start is only early, not a fallback.
  if (!caps.subagents.emitsSubagentLifecycle) {
    const detail =
      `child thread ${threadRef} was never announced: subagent ${node.nodeId} is made from its events, ` +
      "and closed when its child turn ends";
    out.push(...degraded(binding, "subagent_lifecycle_inferred", detail));
  }
  return binding;
}

export function childTurnEnded(
  binding: TurnBinding,
  caps: ProviderCapabilities,
  childThreadRef: string,
  status: TurnTerminalStatus,
): Routed[] {
  // Invariant 3: a child turn ending closes (at most) its subagent node, never the run.
  if (caps.subagents.emitsSubagentLifecycle) return [];
  const node = nodeById(binding, binding.childThreads.get(childThreadRef));
  return node?.open && node.kind === "subagent" ? [closeSubagent(binding, node, status, null)] : [];
}

function subagentNamed(
  binding: TurnBinding,
  itemRef: string | undefined,
  childThreadRef: string | undefined,
): NodeEntry | undefined {
  const byRef = itemRef ? binding.byRef.get(itemRef) : undefined;
  if (byRef?.kind === "subagent") return byRef;
  const byThread = childThreadRef ? nodeById(binding, binding.childThreads.get(childThreadRef)) : undefined;
  // A child thread shown inline maps to the root: never closed as a subagent.
  return byThread?.kind === "subagent" ? byThread : undefined;
}

function closeSubagent(
  binding: TurnBinding,
  node: NodeEntry,
  status: TurnTerminalStatus,
  result: string | null,
): Routed {
  node.open = false;
  binding.subagents = binding.subagents.filter((id) => id !== node.nodeId);
  return applied(binding, {
    type: "node.completed",
    ...scopeOf(binding),
    nodeId: node.nodeId,
    status,
    text: result,
    output: null,
    exitCode: null,
    settledBy: "provider",
  });
}
