import type { Strength } from "../capabilities/schema.js";
import type { NodeKind } from "../domain/entities.js";
import { derivedId } from "../domain/ids.js";

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
export function startNode(binding: TurnBinding, strength: Strength, kind: NodeKind, ref: string | undefined, fingerprint?: string): NodeEntry {
  const ordinal = binding.nodes.length;
  let key: string;
  if (ref && strength === "strong") key = `ref:${ref}`;
  else if (ref && strength === "weak") {
    const seen = binding.refCounts.get(ref) ?? 0;
    binding.refCounts.set(ref, seen + 1);
    key = `ref:${ref}#${seen}:${kind}:${fingerprint ?? ""}`;
  } else key = `ord:${ordinal}:${kind}:${fingerprint ?? ""}`;
  const node: NodeEntry = { nodeId: derivedId("nod", binding.providerTurnId, key), kind, ref: ref ?? null, open: true };
  binding.nodes.push(node);
  if (ref) binding.byRef.set(ref, node);
  return node;
}

/** A child execution hangs under its subagent: by child thread, parent item ref, or open subagent. */
export function parentOf(binding: TurnBinding, node: NodeEntry, parentRef: string | undefined, threadRef: string | undefined): string {
  if (threadRef && binding.childThreads.has(threadRef)) return binding.childThreads.get(threadRef)!;
  if (parentRef) {
    const parent = binding.nodes.find((n) => n.ref === parentRef && n.nodeId !== node.nodeId);
    if (parent) return parent.nodeId;
  }
  const enclosing = binding.subagents.filter((id) => id !== node.nodeId).at(-1);
  return enclosing ?? binding.rootNodeId;
}

export function findNode(binding: TurnBinding, kind: NodeKind, ref: string | undefined): NodeEntry | undefined {
  if (ref) return binding.byRef.get(ref);
  return binding.nodes.findLast((n) => n.open && n.kind === kind);
}

export function nodeById(binding: TurnBinding, nodeId: string | undefined): NodeEntry | undefined {
  return nodeId ? binding.nodes.find((n) => n.nodeId === nodeId) : undefined;
}
