import type { Strength } from "../../capabilities/schema.js";
import type { NodeKind } from "../../domain/items.js";
import type { DomainEvent, DomainEventOf } from "../../domain/events.js";
import { derivedId } from "../../domain/ids.js";
import type { RunEvent } from "../../machines/runModel.js";

/**
 * Correlation state of one provider turn, and how items in it get their app ids: by native
 * id (strong), native id plus occurrence and fingerprint (weak), or scoped ordinal (none).
 * Ids are derived from the provider turn's id and that key, never drawn at random.
 */

export interface NodeEntry {
  nodeId: string;
  kind: NodeKind;
  ref: string | null;
  open: boolean;
  /**
   * The provider said it started (item.started, subagent.started, a request, the turn): false
   * for a node its delta, completion or child thread brought first, which its start, when it
   * comes late, claims instead of making a second node.
   */
  announced: boolean;
  /** Distinguishes artifacts of one kind without ids: the live plan vs a proposed plan. */
  variant?: string;
}

/** One provider turn, bound to the run attempt that started it. */
export interface TurnBinding {
  threadId: string;
  runId: string;
  attemptId: string;
  rootNodeId: string;
  providerThreadId: string;
  providerTurnId: string;
  sessionId: string;
  /** Native ref of the provider thread, when exposed (routing key with the session). */
  threadRef: string | null;
  nativeTurnRef: string | null;
  closed: boolean;
  interruptSent: boolean;
  nodes: NodeEntry[];
  /** Latest node per native item ref (deltas look their node up by ref, once per event). */
  byRef: Map<string, NodeEntry>;
  refCounts: Map<string, number>;
  /** Open subagent nodes, innermost last: the parent of ref-less child events. */
  subagents: string[];
  /** Child thread ref -> subagent node. */
  childThreads: Map<string, string>;
  requests: Array<{ requestId: string; nodeId: string; ref: string | null; open: boolean }>;
}

/** Scoped key of an item: native ref (strong), ref + occurrence + fingerprint (weak), or ordinal. */
export function startNode(
  binding: TurnBinding,
  strength: Strength,
  kind: NodeKind,
  ref: string | undefined,
  fingerprint?: string,
): NodeEntry {
  const ordinal = binding.nodes.length;
  let key: string;
  if (ref && strength === "strong") key = `ref:${ref}`;
  else if (ref && strength === "weak") {
    const seen = binding.refCounts.get(ref) ?? 0;
    binding.refCounts.set(ref, seen + 1);
    key = `ref:${ref}#${seen}:${kind}:${fingerprint ?? ""}`;
  } else key = `ord:${ordinal}:${kind}:${fingerprint ?? ""}`;
  const node: NodeEntry = {
    nodeId: derivedId("nod", binding.providerTurnId, key),
    kind,
    ref: ref ?? null,
    open: true,
    announced: true,
  };
  binding.nodes.push(node);
  if (ref) binding.byRef.set(ref, node);
  return node;
}

/** A child execution hangs under its subagent: by child thread, parent item ref, or open subagent. */
export function parentOf(
  binding: TurnBinding,
  node: NodeEntry,
  parentRef: string | undefined,
  threadRef: string | undefined,
): string {
  if (threadRef && binding.childThreads.has(threadRef)) return binding.childThreads.get(threadRef)!;
  if (parentRef) {
    const parent = binding.nodes.find((n) => n.ref === parentRef && n.nodeId !== node.nodeId);
    if (parent) return parent.nodeId;
  }
  const enclosing = binding.subagents.filter((id) => id !== node.nodeId).at(-1);
  return enclosing ?? binding.rootNodeId;
}

/**
 * The node a native ref names (the latest with that ref): a strong ref alone is the item's key;
 * a weak one is only with the item's fingerprint, its kind. Without a ref: the latest open node
 * of the kind.
 */
export function findNode(
  binding: TurnBinding,
  kind: NodeKind,
  ref: string | undefined,
  strength: Strength = "strong",
): NodeEntry | undefined {
  if (!ref) return binding.nodes.findLast((n) => n.open && n.kind === kind);
  const node = binding.byRef.get(ref);
  return node && (strength === "strong" || node.kind === kind) ? node : undefined;
}

export function nodeById(binding: TurnBinding, nodeId: string | undefined): NodeEntry | undefined {
  return nodeId ? binding.nodes.find((n) => n.nodeId === nodeId) : undefined;
}

/** Where normalized output goes: a run actor, a request actor, the session, or straight to the log. */
export type Routed =
  | { to: "run"; runId: string; event: RunEvent }
  | { to: "session"; sessionId: string; state: "stopped" | "error"; message: string | null }
  | { to: "request"; requestId: string; outcome: string | null }
  /** A late event of a turn whose run already ended: recorded as fenced, never applied. */
  | { to: "fenced"; threadId: string; runId: string; attemptId: string; providerEventType: string }
  | { to: "log"; event: DomainEvent };

export function scopeOf(binding: TurnBinding): { threadId: string; runId: string } {
  return { threadId: binding.threadId, runId: binding.runId };
}

export function toRun(binding: TurnBinding, event: RunEvent): Routed {
  return { to: "run", runId: binding.runId, event };
}

/** A provider-derived domain event for the run; its actor applies it (or fences it). */
export function applied(binding: TurnBinding, event: DomainEvent): Routed {
  return toRun(binding, { type: "PROVIDER", attemptId: binding.attemptId, event });
}

export function nodeStartedEvent(
  binding: TurnBinding,
  node: NodeEntry,
  providerTarget: string,
  parentRef: string | undefined,
  threadRef: string | undefined,
): DomainEventOf<"node.started"> {
  return {
    type: "node.started",
    ...scopeOf(binding),
    attemptId: binding.attemptId,
    nodeId: node.nodeId,
    parentNodeId: parentOf(binding, node, parentRef, threadRef),
    kind: node.kind,
    nativeRef: node.ref,
    providerTarget,
    detail: null,
  };
}
