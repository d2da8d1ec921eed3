import type { ProviderCapabilities } from "../../capabilities/schema.js";
import { supportsApprovalFor } from "../../capabilities/predicates.js";
import type { ProviderEvent } from "../../adapters/contract.js";
import { NODE_KIND_OF_REQUEST, type ApprovalKind, type RequestKind } from "../../domain/items.js";
import type { DomainEvent } from "../../domain/events.js";
import { derivedId } from "../../domain/ids.js";
import {
  applied,
  degraded,
  namedParent,
  nodeById,
  nodeStartedEvent,
  protocolWarning,
  scopeOf,
  startNode,
  toRun,
  withinSubagent,
  type Routed,
  type TurnBinding,
} from "./correlation.js";

/**
 * A turn's requests (approvals, questions): each one's id derived from the provider turn and, when the record says
 * requests have trustworthy native ids, their native id (else their ordinal in the turn); its node, hung where the
 * record says requests can come from; and the native address the answer goes back to. A request of a kind the record
 * denies is never shown: a protocol warning, declined back to the provider. A dynamic tool call, where the record
 * says the provider calls tools back, is opened like any request and answered by the runtime (commands/respond.ts).
 */

type EventOf<T extends ProviderEvent["type"]> = Extract<ProviderEvent, { type: T }>;

/** The record field that declares each approval kind (what a protocol warning names). */
const APPROVAL_FIELD: Readonly<Record<ApprovalKind, string>> = {
  command: "approvals.supportsCommandApproval",
  file_read: "approvals.supportsFileReadApproval",
  file_change: "approvals.supportsFileChangeApproval",
  apply_patch: "approvals.supportsApplyPatchApproval",
};

const isApprovalKind = (kind: RequestKind): kind is ApprovalKind => kind in APPROVAL_FIELD;

/**
 * A request's native ref is its key only when both the identity and the approvals say native request ids exist;
 * otherwise it is evidence in the log, and requests are correlated by turn and ordinal.
 */
export function trustsRequestRefs(caps: ProviderCapabilities): boolean {
  return caps.approvals.approvalsHaveNativeRequestIds && caps.identity.nativeRequestIds !== "none";
}

export function requestOpened(
  sessionId: string,
  hostGeneration: number,
  binding: TurnBinding,
  caps: ProviderCapabilities,
  providerTarget: string,
  event: EventOf<"request.opened">,
): Routed[] {
  const ordinal = binding.requests.length + 1;
  const trusted = trustsRequestRefs(caps);
  const ref = trusted ? (event.requestRef ?? null) : null;
  // The same native request again (still open, or ever with strong ids) is a duplicate, never a second request.
  const earlier = ref === null ? undefined : binding.requests.findLast((r) => r.ref === ref);
  if (earlier && (earlier.open || caps.identity.nativeRequestIds === "strong")) return [];
  // Scoped to the provider turn even when the id is strong: a provider that names a request of a
  // later turn as it named one of an earlier turn must not make one id of two requests.
  const requestId =
    ref && caps.identity.nativeRequestIds === "strong"
      ? derivedId("req", binding.providerTurnId, ref)
      : derivedId("req", binding.providerTurnId, ordinal, ref ?? "");
  // Without native request ids at all, the ordinal is the identity's own rule; this fallback is the approvals'.
  const byOrdinal = caps.approvals.approvalsHaveNativeRequestIds ? [] : requestsByOrdinal(binding, event.requestRef);
  const { kind } = event.request;
  const denied = deniedBy(caps, kind);
  if (denied) {
    // Counted all the same: the provider's ordinals count it, and so do the answers to its later requests.
    binding.requests.push({ requestId, nodeId: null, ref, open: false });
    return [...byOrdinal, ...declineUndeclared(sessionId, binding, providerTarget, kind, denied, ref, ordinal)];
  }
  const node = startNode(binding, caps.identity.nativeItemIds, NODE_KIND_OF_REQUEST[kind], undefined, kind);
  binding.requests.push({ requestId, nodeId: node.nodeId, ref, open: true });
  const placed = placeRequest(binding, caps, providerTarget, node, event);
  const opened: DomainEvent = {
    type: "request.opened",
    ...scopeOf(binding),
    requestId,
    nodeId: node.nodeId,
    payload: event.request,
    nativeRef: event.requestRef ?? null,
    responseCapability: { kind: "live", sessionId, hostGeneration },
  };
  return [
    ...byOrdinal,
    ...placed.warnings,
    applied(binding, placed.nodeStarted),
    toRun(binding, { type: "REQUEST_OPENED", attemptId: binding.attemptId, requestId, event: opened }),
  ];
}

function requestsByOrdinal(binding: TurnBinding, nativeRef: string | undefined): Routed[] {
  const detail =
    nativeRef === undefined
      ? "requests are correlated by their turn and ordinal"
      : "requests are correlated by their turn and ordinal; the provider's request ids are kept as evidence only";
  return degraded(binding, "requests_by_turn_ordinal", detail);
}

/**
 * A request raised inside a subagent hangs under it when the record says subagents can ask; otherwise the record is
 * believed over a guess (the root, not the innermost open subagent), and an event that names a subagent is a
 * protocol warning.
 */
function placeRequest(
  binding: TurnBinding,
  caps: ProviderCapabilities,
  providerTarget: string,
  node: TurnBinding["nodes"][number],
  event: EventOf<"request.opened">,
): { nodeStarted: ReturnType<typeof nodeStartedEvent>; warnings: Routed[] } {
  const { itemRef, threadRef } = event;
  if (caps.approvals.approvalsCanOriginateFromSubagents)
    return { nodeStarted: nodeStartedEvent(binding, node, providerTarget, itemRef, threadRef), warnings: [] };
  const named = namedParent(binding, node, itemRef, threadRef);
  const nodeStarted = nodeStartedEvent(binding, node, providerTarget, itemRef, threadRef, binding.rootNodeId);
  if (named === undefined || !withinSubagent(binding, named)) return { nodeStarted, warnings: [] };
  const what = `a ${event.request.kind} request came from inside a subagent`;
  return {
    nodeStarted,
    warnings: [
      protocolWarning(
        binding,
        providerTarget,
        `raised ${what}, which its capability record says cannot happen ` +
          "(approvals.approvalsCanOriginateFromSubagents is false): it is shown at the root",
      ),
      ...degraded(binding, "subagent_request_at_root", `${what}: hung at the root`),
    ],
  };
}

/** The record field that denies a request of this kind, or null where the record allows it. */
function deniedBy(caps: ProviderCapabilities, kind: RequestKind): string | null {
  if (isApprovalKind(kind)) return supportsApprovalFor(caps, kind) ? null : APPROVAL_FIELD[kind];
  switch (kind) {
    case "user_input":
      return caps.planning.supportsStructuredQuestions ? null : QUESTIONS_FIELD;
    case "plan_approval":
      return caps.planning.emitsProposedPlan ? null : PROPOSED_PLANS_FIELD;
    case "dynamic_tool":
      return caps.tools.supportsDynamicToolCallbacks ? null : DYNAMIC_TOOLS_FIELD;
    case "tool_approval":
      return null; // the provider's other tools: no field of the record speaks for or against them
  }
}

const QUESTIONS_FIELD = "planning.supportsStructuredQuestions";
const PROPOSED_PLANS_FIELD = "planning.emitsProposedPlan";
const DYNAMIC_TOOLS_FIELD = "tools.supportsDynamicToolCallbacks";

/** What a protocol warning calls a request of this kind. */
function describeRequest(kind: RequestKind): string {
  if (kind === "user_input") return "a structured question";
  if (kind === "dynamic_tool") return "a dynamic tool call";
  if (kind === "plan_approval") return "a request to carry out a proposed plan";
  return `${/^[aeiou]/.test(kind) ? "an" : "a"} ${kind} approval`;
}

/** A request of a kind the record denies: a protocol warning, the degradation, and the decline sent back. */
function declineUndeclared(
  sessionId: string,
  binding: TurnBinding,
  providerTarget: string,
  kind: RequestKind,
  field: string,
  ref: string | null,
  ordinal: number,
): Routed[] {
  const why = `${field} is false`;
  const what = describeRequest(kind);
  return [
    protocolWarning(binding, providerTarget, `asked for ${what} its capability record denies (${why})`),
    ...degraded(binding, "undeclared_request_declined", `${what} was declined (${why})`, field),
    {
      to: "decline",
      sessionId,
      threadId: binding.threadId,
      runId: binding.runId,
      request: { requestRef: ref, turnRef: binding.nativeTurnRef, ordinal },
    },
  ];
}

export function requestResolved(
  binding: TurnBinding,
  caps: ProviderCapabilities,
  event: EventOf<"request.resolved">,
): Routed[] {
  const request =
    event.requestRef && trustsRequestRefs(caps)
      ? binding.requests.findLast((r) => r.ref === event.requestRef)
      : binding.requests.find((r) => r.open);
  if (!request?.open) return []; // unknown, or resolved already (a duplicate)
  request.open = false;
  const node = nodeById(binding, request.nodeId ?? undefined);
  if (node) node.open = false; // the request's own events close its node in the projection
  return [{ to: "request", requestId: request.requestId, outcome: event.outcome ?? null }];
}

/** Native address of a request for `respondToRequest`: its trusted native id, else its ordinal in the turn. */
export function requestAddress(
  binding: TurnBinding | undefined,
  requestId: string,
): { requestRef: string | null; turnRef: string | null; ordinal: number } | null {
  const index = binding?.requests.findIndex((r) => r.requestId === requestId) ?? -1;
  if (!binding || index < 0) return null;
  return { requestRef: binding.requests[index]!.ref, turnRef: binding.nativeTurnRef, ordinal: index + 1 };
}
