import type { ProviderRequestAddress } from "../../adapters/contract.js";
import type { ProviderCapabilities, Strength } from "../../capabilities/schema.js";
import type { ItemStream, NodeKind } from "../../domain/items.js";
import type { DomainEvent, DomainEventOf } from "../../domain/events.js";
import { derivedId } from "../../domain/ids.js";
import { redact } from "../../domain/redact.js";
import { policyEvent } from "../../machines/emitted.js";
import type { PolicyName } from "../../machines/policies.js";
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
  /** The node it hangs under, as last announced (a request asks whether it came from inside a subagent). */
  parentId?: string;
  /** The streams its deltas extended: a completion brings whole only what never streamed. */
  streamed?: Set<ItemStream>;
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
  /** The turn makes its provider thread (no empty threads): the first thread ref its session names is this turn's. */
  makingThread?: boolean;
  nativeTurnRef: string | null;
  /** The provider has not replied to `sendRun` yet: its reply is the word on which ref is this turn's. */
  awaitsReply: boolean;
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
  /** Every request the provider asked in the turn, in order (its ordinal is its place here), declined ones too. */
  requests: Array<{ requestId: string; nodeId: string | null; ref: string | null; open: boolean }>;
  /** The degradations this attempt already recorded: each is recorded once per attempt, not once per item. */
  degradations: Set<PolicyName>;
}

/** What a turn is bound to when it begins. */
export type TurnStart = Pick<
  TurnBinding,
  | "threadId"
  | "runId"
  | "attemptId"
  | "rootNodeId"
  | "providerThreadId"
  | "providerTurnId"
  | "sessionId"
  | "threadRef"
  | "makingThread"
>;

/** A turn's binding as it begins: awaiting the provider's reply, with `nodes` and nothing else seen yet. */
export function newBinding(start: TurnStart, nodes: NodeEntry[]): TurnBinding {
  return {
    ...start,
    nativeTurnRef: null,
    awaitsReply: true,
    closed: false,
    interruptSent: false,
    nodes,
    byRef: new Map(),
    refCounts: new Map(),
    subagents: [],
    childThreads: new Map(),
    requests: [],
    degradations: new Set(),
  };
}

/** Tools, commands and file changes: the items the `tools` capabilities speak of. */
export function isToolKind(kind: NodeKind): boolean {
  return kind === "tool_call" || kind === "command_execution" || kind === "file_change";
}

/** How an item's native ref is read: a provider without tool item ids correlates its tools by ordinal. */
export function itemIdStrength(caps: ProviderCapabilities, kind: NodeKind): Strength {
  return isToolKind(kind) && !caps.tools.exposesToolItemIds ? "none" : caps.identity.nativeItemIds;
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
  parentRef: string | null | undefined,
  threadRef: string | undefined,
): string {
  const enclosing = () => binding.subagents.filter((id) => id !== node.nodeId).at(-1);
  return namedParent(binding, node, parentRef, threadRef) ?? enclosing() ?? binding.rootNodeId;
}

/**
 * The parent the event itself names (its child thread, its parent item, or the turn's root when it names none with
 * `null`), not one guessed from what is open.
 */
export function namedParent(
  binding: TurnBinding,
  node: NodeEntry,
  parentRef: string | null | undefined,
  threadRef: string | undefined,
): string | undefined {
  if (threadRef && binding.childThreads.has(threadRef)) return binding.childThreads.get(threadRef)!;
  if (parentRef === null) return binding.rootNodeId;
  if (!parentRef) return undefined;
  return binding.nodes.find((n) => n.ref === parentRef && n.nodeId !== node.nodeId)?.nodeId;
}

/** The node is a subagent or hangs (at any depth) under one. */
export function withinSubagent(binding: TurnBinding, nodeId: string): boolean {
  let node = nodeById(binding, nodeId);
  // Bounded by the turn's nodes: a parent announced late can never make the walk loop.
  for (let depth = 0; node && depth <= binding.nodes.length; depth += 1) {
    if (node.kind === "subagent") return true;
    node = nodeById(binding, node.parentId);
  }
  return false;
}

/**
 * The node a native ref names (the latest with that ref): a strong ref alone is the item's key;
 * a weak one is only with the item's fingerprint, its kind (the latest of that kind with the ref,
 * though an item of another kind took the ref since). Without a ref: the latest open node of the kind.
 */
export function findNode(
  binding: TurnBinding,
  kind: NodeKind,
  ref: string | undefined,
  strength: Strength = "strong",
): NodeEntry | undefined {
  if (!ref) return binding.nodes.findLast((n) => n.open && n.kind === kind);
  const node = binding.byRef.get(ref);
  if (!node || strength === "strong" || node.kind === kind) return node;
  return binding.nodes.findLast((n) => n.ref === ref && n.kind === kind);
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
  /** A request the record says the provider cannot ask: declined back to it, never shown. */
  | { to: "decline"; sessionId: string; threadId: string; runId: string; request: ProviderRequestAddress }
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

/**
 * A degradation this attempt takes, recorded the first time only: a fallback taken for every item (each message
 * arriving whole) is one fact about the provider, not one record per item.
 */
export function degraded(binding: TurnBinding, policy: PolicyName, detail: string, capability?: string): Routed[] {
  if (binding.degradations.has(policy)) return [];
  binding.degradations.add(policy);
  return [{ to: "log", event: policyEvent(binding, policy, detail, capability) }];
}

/** The provider did what its capability record says it cannot: a protocol warning, in the run it concerns. */
export function protocolWarning(binding: TurnBinding, providerTarget: string, what: string): Routed {
  const message = redact(`protocol_error: ${providerTarget} ${what}`);
  return { to: "log", event: { type: "warning", ...scopeOf(binding), message } };
}

/** A node's `node.started`; the node remembers the parent it names (a request asks whether it came from a subagent). */
export function nodeStartedEvent(
  binding: TurnBinding,
  node: NodeEntry,
  providerTarget: string,
  parentRef: string | null | undefined,
  threadRef: string | undefined,
  parentNodeId: string = parentOf(binding, node, parentRef, threadRef),
): DomainEventOf<"node.started"> {
  node.parentId = parentNodeId;
  return {
    type: "node.started",
    ...scopeOf(binding),
    attemptId: binding.attemptId,
    nodeId: node.nodeId,
    parentNodeId,
    kind: node.kind,
    nativeRef: node.ref,
    providerTarget,
    detail: null,
  };
}

/** A subagent node the provider never announced, made from what names it (its child thread, or its parent item). */
export function unannouncedSubagent(binding: TurnBinding, key: string, ref: string): NodeEntry {
  const node: NodeEntry = {
    nodeId: derivedId("nod", binding.providerTurnId, key),
    kind: "subagent",
    ref,
    open: true,
    announced: false,
  };
  binding.nodes.push(node);
  return node;
}
