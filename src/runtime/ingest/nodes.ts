import type { ProviderCapabilities } from "../../capabilities/schema.js";
import type { ProviderEvent } from "../../adapters/contract.js";
import type { ItemDetail, ItemStream, NodeKind, ProviderItemKind } from "../../domain/items.js";
import type { DomainEvent } from "../../domain/events.js";
import {
  applied,
  degraded,
  findNode,
  isToolKind,
  itemIdStrength,
  nodeById,
  nodeStartedEvent,
  protocolWarning,
  scopeOf,
  startNode,
  type NodeEntry,
  unannouncedSubagent,
  type Routed,
  type TurnBinding,
} from "./correlation.js";
import { itemLifecycle } from "./lifecycle.js";

/**
 * A turn's item and artifact nodes from the provider's item and plan events: started once (a delta or completion that
 * comes first opens its node, which the start then claims), completed once, duplicates dropped as the `identity`
 * capability says what a native ref names. Every item gets the same lifecycle whatever the provider emits: a start
 * made when its first event is a delta or its completion, and what a completion brings whole as one delta first.
 * Each fallback taken is a named degradation, recorded once per attempt.
 */

type EventOf<T extends ProviderEvent["type"]> = Extract<ProviderEvent, { type: T }>;

export function itemStarted(
  binding: TurnBinding,
  caps: ProviderCapabilities,
  providerTarget: string,
  event: EventOf<"item.started">,
): Routed[] {
  const { kind } = event; // a provider item kind is its node's kind
  const earlier = startedBefore(binding, caps, kind, event.itemRef, undefined);
  if (earlier === "duplicate") return [];
  // A node its delta or completion brought first is this item: announced again with what the start knows (detail,
  // parent), never a second node.
  // A parent item the provider never announced: a subagent of a provider without subagent lifecycle events.
  const adopted = adoptParentItem(binding, caps, providerTarget, event.parentItemRef);
  const node = earlier ?? startNode(binding, itemIdStrength(caps, kind), kind, event.itemRef, event.detail?.toolName);
  node.announced = true;
  const { detail, warnings } = mcpDetail(binding, caps, providerTarget, event.detail);
  return [
    ...adopted,
    ...(earlier ? [] : toolFallbacks(binding, caps, kind, false)),
    ...warnings,
    applied(binding, {
      ...nodeStartedEvent(binding, node, providerTarget, event.parentItemRef, event.threadRef),
      detail: detail ?? null,
    }),
  ];
}

/**
 * An MCP tool call keeps its server and tool where the record says the provider has MCP tools; from a provider whose
 * record says it has none, the tag is a protocol warning and the item is shown as a plain tool (its name kept).
 */
function mcpDetail(
  binding: TurnBinding,
  caps: ProviderCapabilities,
  providerTarget: string,
  detail: ItemDetail | undefined,
): { detail: ItemDetail | undefined; warnings: Routed[] } {
  if (!detail?.mcp || caps.tools.supportsMcpTools) return { detail, warnings: [] };
  const { mcp, ...plain } = detail;
  const what = `an MCP tool call (${mcp.server}.${mcp.tool})`;
  return {
    detail: plain,
    warnings: [
      protocolWarning(
        binding,
        providerTarget,
        `reported ${what}, which its capability record says cannot happen (tools.supportsMcpTools is false)`,
      ),
      ...degraded(binding, "mcp_tools_unavailable", `${what} is shown as a plain tool`),
    ],
  };
}

export function itemDelta(
  binding: TurnBinding,
  caps: ProviderCapabilities,
  providerTarget: string,
  event: EventOf<"item.delta">,
): Routed[] {
  const { node, started } = openNode(binding, caps, providerTarget, event.kind, event.itemRef, event.threadRef);
  if (!node.streamed) node.streamed = new Set([event.stream]);
  else if (!node.streamed.has(event.stream)) node.streamed.add(event.stream);
  // Deltas are the bulk of all traffic: the one record, built without intermediate objects.
  const delta = applied(binding, {
    type: "node.delta",
    threadId: binding.threadId,
    runId: binding.runId,
    nodeId: node.nodeId,
    stream: event.stream,
    delta: event.delta,
  });
  return started.length === 0 ? [delta] : [...started, delta];
}

export function itemCompleted(
  binding: TurnBinding,
  caps: ProviderCapabilities,
  providerTarget: string,
  event: EventOf<"item.completed">,
): Routed[] {
  const { node, started } = openNode(binding, caps, providerTarget, event.kind, event.itemRef, event.threadRef);
  if (!node.open) return []; // completed already: a duplicated or late completion changes nothing
  node.open = false;
  const whole = isToolKind(node.kind) ? event.output : event.text;
  const completed: DomainEvent = {
    type: "node.completed",
    ...scopeOf(binding),
    nodeId: node.nodeId,
    status: event.status,
    text: event.text ?? null,
    output: event.output ?? null,
    exitCode: event.exitCode ?? null,
    settledBy: "provider",
  };
  return [...started, ...wholeAsDelta(binding, caps, node, whole), applied(binding, completed)];
}

/**
 * What a completion brings whole that never streamed (a provider that does not stream it, or an item too short to
 * stream) becomes one delta before the completion: a client reads every item's text and output from its deltas.
 */
function wholeAsDelta(
  binding: TurnBinding,
  caps: ProviderCapabilities,
  node: NodeEntry,
  whole: string | undefined,
): Routed[] {
  const stream: ItemStream = isToolKind(node.kind) ? "output" : "text";
  if (!whole || node.streamed?.has(stream)) return [];
  const delta = applied(binding, {
    type: "node.delta",
    ...scopeOf(binding),
    nodeId: node.nodeId,
    stream,
    delta: whole,
  });
  return [...atCompletion(binding, caps, node.kind), delta];
}

/** The degradation a whole-at-completion item takes, when the record says its kind is not streamed. */
function atCompletion(binding: TurnBinding, caps: ProviderCapabilities, kind: NodeKind): Routed[] {
  const lifecycle = itemLifecycle(caps);
  if (isToolKind(kind))
    return lifecycle.toolOutput === "at_completion"
      ? degraded(binding, "tool_output_at_completion", "tool output arrives whole at the tool's completion: one delta")
      : [];
  if (kind === "reasoning")
    return lifecycle.reasoning === "at_completion"
      ? degraded(binding, "reasoning_at_completion", "reasoning arrives whole at its completion: one delta")
      : [];
  return lifecycle.assistantText === "at_completion"
    ? degraded(binding, "assistant_text_at_completion", "assistant text arrives whole at its completion: one delta")
    : [];
}

/**
 * The fallbacks a new tool node takes, by the record: its start made by the normalizer (its first event was a delta
 * or its completion), its id an ordinal, no output to come.
 */
function toolFallbacks(
  binding: TurnBinding,
  caps: ProviderCapabilities,
  kind: NodeKind,
  startSynthesised: boolean,
): Routed[] {
  if (!isToolKind(kind)) return [];
  const { tools, toolOutput } = itemLifecycle(caps);
  return [
    ...(startSynthesised && tools.started === "synthesised"
      ? degraded(binding, "tool_start_synthesised", "a tool item's start is made when its first event arrives")
      : []),
    // The tools field's own fallback (without any native item ids every item goes by ordinal: the identity's rule).
    ...(!caps.tools.exposesToolItemIds
      ? degraded(binding, "tool_ids_by_ordinal", "tool items are correlated by their order in the turn")
      : []),
    ...(toolOutput === "none" ? degraded(binding, "no_tool_output", "tool items carry no output") : []),
  ];
}

/** A plan update, a proposed plan or a todo list: the turn's artifact node of that kind and its new content. */
export function artifactUpdated(
  binding: TurnBinding,
  caps: ProviderCapabilities,
  providerTarget: string,
  event: EventOf<"plan.updated" | "plan.proposed" | "todo.updated">,
): Routed[] {
  const kind: NodeKind = event.type === "todo.updated" ? "todo_list" : "plan";
  const variant = event.type === "plan.proposed" ? "proposed" : "live";
  const { node, started } = artifactNode(binding, caps, providerTarget, kind, variant, event.itemRef, event.threadRef);
  const byKind = caps.planning.planDeltasHaveItemIds
    ? []
    : degraded(binding, "plan_deltas_by_ordinal", "plan and todo updates go to the turn's one node of their kind");
  const whole =
    kind === "plan" && itemLifecycle(caps).planText === "at_completion"
      ? degraded(binding, "plan_text_at_completion", "a plan's text arrives whole with each update")
      : [];
  const ids = { ...scopeOf(binding), nodeId: node.nodeId };
  const domain: DomainEvent =
    event.type === "todo.updated"
      ? { type: "todo.updated", ...ids, items: event.items }
      : event.type === "plan.proposed"
        ? { type: "plan.proposed", ...ids, text: event.text }
        : { type: "plan.updated", ...ids, explanation: event.explanation ?? null, steps: event.steps };
  return [...byKind, ...whole, ...started, applied(binding, domain)];
}

/** The node a delta/completion refers to; started implicitly (once) when the provider has not said, or not yet. */
/** What finding an open node starts: nothing (shared: its readers only spread it). */
const NOTHING_STARTED: readonly Routed[] = Object.freeze([]);

export function openNode(
  binding: TurnBinding,
  caps: ProviderCapabilities,
  providerTarget: string,
  kind: ProviderItemKind,
  ref: string | undefined,
  threadRef: string | undefined,
): { node: NodeEntry; started: readonly Routed[] } {
  const strength = itemIdStrength(caps, kind);
  const found = findNode(binding, kind, ref, strength);
  if (found && (found.open || ref)) return { node: found, started: NOTHING_STARTED };
  const node = startNode(binding, strength, kind, ref);
  node.announced = false;
  return {
    node,
    started: [
      ...toolFallbacks(binding, caps, kind, true),
      applied(binding, nodeStartedEvent(binding, node, providerTarget, undefined, threadRef)),
    ],
  };
}

/**
 * What a start refers to that the turn already holds: a node its deltas, completion or child
 * thread brought first (claimed by the start), the same item started again ("duplicate"), or
 * nothing (a new node). A native ref names one item while it is open, and for ever when the
 * identity is strong; a weak or absent identity may reuse a ref once its item completed.
 * Without refs only an open, unannounced node of the same kind can be the one starting.
 */
export function startedBefore(
  binding: TurnBinding,
  caps: ProviderCapabilities,
  kind: NodeKind,
  ref: string | undefined,
  childThreadRef: string | undefined,
): NodeEntry | "duplicate" | undefined {
  const known =
    (ref ? findNode(binding, kind, ref, itemIdStrength(caps, kind)) : undefined) ??
    (childThreadRef ? nodeById(binding, binding.childThreads.get(childThreadRef)) : undefined);
  if (known) {
    if (!known.announced) return known;
    return itemIdStrength(caps, kind) === "strong" || known.open ? "duplicate" : undefined;
  }
  if (ref || childThreadRef) return undefined;
  return binding.nodes.findLast((n) => n.open && !n.announced && n.kind === kind && n.ref === null);
}

/** Plans and todo lists are one node per turn (per native item when plan deltas have ids). */
function artifactNode(
  binding: TurnBinding,
  caps: ProviderCapabilities,
  providerTarget: string,
  kind: NodeKind,
  variant: string,
  ref: string | undefined,
  threadRef: string | undefined,
): { node: NodeEntry; started: Routed[] } {
  const usesRef = ref && caps.planning.planDeltasHaveItemIds ? ref : undefined;
  const found = usesRef
    ? binding.nodes.find((n) => n.ref === usesRef)
    : binding.nodes.find((n) => n.kind === kind && n.variant === variant);
  if (found) return { node: found, started: [] };
  const node = startNode(binding, caps.identity.nativeItemIds, kind, usesRef, variant);
  node.variant = variant;
  return {
    node,
    started: [applied(binding, nodeStartedEvent(binding, node, providerTarget, undefined, threadRef))],
  };
}

/**
 * An item naming a parent item the provider never announced, from a provider that has subagents
 * but reports no lifecycle: that parent is a subagent, shown as a node made from its children's
 * events and closed when the turn ends. Without it, such a subagent would not be shown at all.
 */
export function adoptParentItem(
  binding: TurnBinding,
  caps: ProviderCapabilities,
  providerTarget: string,
  parentItemRef: string | null | undefined,
): Routed[] {
  const { subagents } = caps;
  if (!parentItemRef || !subagents.supportsSubagents || subagents.emitsSubagentLifecycle) return [];
  if (binding.nodes.some((n) => n.ref === parentItemRef)) return [];
  const node = unannouncedSubagent(binding, `parent:${parentItemRef}`, parentItemRef);
  // Not an enclosing subagent for items that name no parent: without its end, it would take the turn's later items.
  binding.byRef.set(parentItemRef, node);
  const detail =
    `item ${parentItemRef} was never announced and has items of its own: subagent ${node.nodeId} is made from ` +
    "them, and closed when its turn ends";
  return [
    applied(binding, { ...nodeStartedEvent(binding, node, providerTarget, undefined, undefined), detail: null }),
    ...degraded(binding, "subagent_lifecycle_inferred", detail),
    ...(subagents.exposesSubagentThreadIds
      ? []
      : degraded(
          binding,
          "subagent_not_addressable",
          `subagent ${node.nodeId}: its record says subagent thread ids are not exposed`,
        )),
  ];
}
