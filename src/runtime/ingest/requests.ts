import type { ProviderCapabilities } from "../../capabilities/schema.js";
import type { ProviderEvent } from "../../adapters/contract.js";
import { NODE_KIND_OF_REQUEST } from "../../domain/items.js";
import type { DomainEvent } from "../../domain/events.js";
import { derivedId } from "../../domain/ids.js";
import {
  applied,
  nodeById,
  nodeStartedEvent,
  scopeOf,
  startNode,
  toRun,
  type Routed,
  type TurnBinding,
} from "./correlation.js";

/**
 * A turn's requests (approvals, questions): each one's id derived from the provider turn and the `nativeRequestIds`
 * capability, its node, and the native address the answer goes back to.
 */

type EventOf<T extends ProviderEvent["type"]> = Extract<ProviderEvent, { type: T }>;

export function requestOpened(
  sessionId: string,
  hostGeneration: number,
  binding: TurnBinding,
  caps: ProviderCapabilities,
  providerTarget: string,
  event: EventOf<"request.opened">,
): Routed[] {
  const ordinal = binding.requests.length + 1;
  const ref = event.requestRef ?? null;
  // The same native request again (still open, or ever with strong ids) is a duplicate, never a second request.
  const earlier = ref === null ? undefined : binding.requests.findLast((r) => r.ref === ref);
  if (earlier && (earlier.open || caps.identity.nativeRequestIds === "strong")) return [];
  // Scoped to the provider turn even when the id is strong: a provider that names a request of a
  // later turn as it named one of an earlier turn must not make one id of two requests.
  const requestId =
    ref && caps.identity.nativeRequestIds === "strong"
      ? derivedId("req", binding.providerTurnId, ref)
      : derivedId("req", binding.providerTurnId, ordinal, ref ?? "");
  const node = startNode(
    binding,
    caps.identity.nativeItemIds,
    NODE_KIND_OF_REQUEST[event.request.kind],
    undefined,
    event.request.kind,
  );
  binding.requests.push({ requestId, nodeId: node.nodeId, ref, open: true });
  const parentRef = event.itemRef;
  const nodeStarted = nodeStartedEvent(binding, node, providerTarget, parentRef, event.threadRef);
  const opened: DomainEvent = {
    type: "request.opened",
    ...scopeOf(binding),
    requestId,
    nodeId: node.nodeId,
    payload: event.request,
    nativeRef: ref,
    responseCapability: { kind: "live", sessionId, hostGeneration },
  };
  return [
    applied(binding, nodeStarted),
    toRun(binding, { type: "REQUEST_OPENED", attemptId: binding.attemptId, requestId, event: opened }),
  ];
}

export function requestResolved(binding: TurnBinding, event: EventOf<"request.resolved">): Routed[] {
  const request = event.requestRef
    ? binding.requests.findLast((r) => r.ref === event.requestRef)
    : binding.requests.find((r) => r.open);
  if (!request?.open) return []; // unknown, or resolved already (a duplicate)
  request.open = false;
  const node = nodeById(binding, request.nodeId);
  if (node) node.open = false; // the request's own events close its node in the projection
  return [{ to: "request", requestId: request.requestId, outcome: event.outcome ?? null }];
}

/** Native address of a request for `respondToRequest`. */
export function requestAddress(
  binding: TurnBinding | undefined,
  requestId: string,
): { requestRef: string | null; turnRef: string | null; ordinal: number } | null {
  const index = binding?.requests.findIndex((r) => r.requestId === requestId) ?? -1;
  if (!binding || index < 0) return null;
  return { requestRef: binding.requests[index]!.ref, turnRef: binding.nativeTurnRef, ordinal: index + 1 };
}
