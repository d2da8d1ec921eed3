import { enqueueActions, not, setup } from "xstate";
import type { ResponseCapability } from "../domain/entities.js";
import { RESPONSE_KIND_OF_REQUEST, type RequestKind, type RequestResponse } from "../domain/items.js";
import { effect, outcome, record, type MachineEmitted } from "./emitted.js";

/**
 * A runtime request (approval or structured question). It can only be answered through
 * the live host generation that asked it; anything else is `not_resumable`.
 */

export interface RequestContext {
  threadId: string;
  runId: string;
  requestId: string;
  kind: RequestKind;
  responseCapability: ResponseCapability;
  /** The answer being delivered, recorded once the provider took it. */
  response: RequestResponse | null;
}

export type RequestEvent =
  /** `hostGeneration` is the session's current generation, as the runtime sees it now. */
  | { type: "RESPOND"; response: RequestResponse; hostGeneration: number | null }
  | { type: "RESPONDED" }
  | { type: "RESPOND_FAILED"; message: string }
  | { type: "PROVIDER_RESOLVED"; outcome: string | null }
  | { type: "EXPIRE"; reason: string }
  | { type: "CANCEL"; reason: string };

export const requestMachine = setup({
  types: {
    context: {} as RequestContext,
    events: {} as RequestEvent,
    input: {} as Omit<RequestContext, "response">,
    emitted: {} as MachineEmitted,
  },
  guards: {
    /** Answerable only through the same live host generation that asked. */
    isLiveInCurrentGeneration: ({ context, event }) =>
      event.type === "RESPOND" &&
      context.responseCapability.kind === "live" &&
      context.responseCapability.hostGeneration === event.hostGeneration,
    answerFitsKind: ({ context, event }) =>
      event.type === "RESPOND" && event.response.kind === RESPONSE_KIND_OF_REQUEST[context.kind],
  },
  actions: {
    sendResponse: enqueueActions(({ context, event, enqueue }) => {
      if (event.type !== "RESPOND") return;
      enqueue.assign({ response: event.response });
      enqueue.emit(effect({ type: "respond", requestId: context.requestId, response: event.response }));
      enqueue.emit(outcome({ command: "respond", requestId: context.requestId, accepted: true }));
    }),
    recordResolvedByUser: enqueueActions(({ context, enqueue }) => {
      const { threadId, runId, requestId, response } = context;
      enqueue.emit(record({ type: "request.resolved", threadId, runId, requestId, by: "user", response }));
    }),
    /** Answered after its host generation died: the request can never be answered now. */
    expireNotResumable: enqueueActions(({ context, enqueue }) => {
      const { threadId, runId, requestId } = context;
      enqueue.emit(
        record({
          type: "request.closed",
          threadId,
          runId,
          requestId,
          status: "expired",
          reason: "host_generation_gone",
        }),
      );
    }),
    recordResolvedByProvider: enqueueActions(({ context, enqueue }) => {
      const { threadId, runId, requestId } = context;
      enqueue.emit(record({ type: "request.resolved", threadId, runId, requestId, by: "provider", response: null }));
    }),
    recordClosed: enqueueActions(({ context, event, enqueue }, params: { status: "expired" | "cancelled" }) => {
      if (event.type !== "EXPIRE" && event.type !== "CANCEL") return;
      const { threadId, runId, requestId } = context;
      enqueue.emit(
        record({ type: "request.closed", threadId, runId, requestId, status: params.status, reason: event.reason }),
      );
    }),
    refuseNotResumable: enqueueActions(({ context, enqueue }) => {
      const cap = context.responseCapability;
      const detail = cap.kind === "not_resumable" ? cap.reason : "the host generation that asked this request is gone";
      enqueue.emit(outcome({ command: "respond", refused: "not_resumable", detail }));
    }),
    refuseWrongShape: enqueueActions(({ context, enqueue }) => {
      const want = { answers: "answers", decision: "a decision", tool_result: "a tool result" }[
        RESPONSE_KIND_OF_REQUEST[context.kind]
      ];
      enqueue.emit(
        outcome({ command: "respond", refused: "conflict", detail: `a ${context.kind} request takes ${want}` }),
      );
    }),
    refuseInFlight: enqueueActions(({ enqueue }) => {
      enqueue.emit(
        outcome({ command: "respond", refused: "conflict", detail: "a response is already being delivered" }),
      );
    }),
    recordDeliveryFailure: enqueueActions(({ context, event, enqueue }) => {
      if (event.type !== "RESPOND_FAILED") return;
      enqueue.emit(
        record({
          type: "warning",
          threadId: context.threadId,
          runId: context.runId,
          message: `response to ${context.requestId} failed: ${event.message}`,
        }),
      );
    }),
  },
}).createMachine({
  id: "request",
  context: ({ input }) => ({ ...input, response: null }),
  initial: "pending",
  states: {
    pending: {
      on: {
        RESPOND: [
          { guard: not("answerFitsKind"), actions: "refuseWrongShape" },
          { guard: "isLiveInCurrentGeneration", target: "responding", actions: "sendResponse" },
          { target: "expired", actions: ["expireNotResumable", "refuseNotResumable"] },
        ],
        PROVIDER_RESOLVED: { target: "resolved", actions: "recordResolvedByProvider" },
        EXPIRE: { target: "expired", actions: { type: "recordClosed", params: { status: "expired" } } },
        CANCEL: { target: "cancelled", actions: { type: "recordClosed", params: { status: "cancelled" } } },
      },
    },
    responding: {
      on: {
        RESPONDED: { target: "resolved", actions: "recordResolvedByUser" },
        RESPOND_FAILED: { target: "pending", actions: "recordDeliveryFailure" },
        RESPOND: { actions: "refuseInFlight" },
        PROVIDER_RESOLVED: { target: "resolved", actions: "recordResolvedByUser" },
        EXPIRE: { target: "expired", actions: { type: "recordClosed", params: { status: "expired" } } },
        CANCEL: { target: "cancelled", actions: { type: "recordClosed", params: { status: "cancelled" } } },
      },
    },
    // Settled requests stop; the runtime answers later responses from the projection.
    resolved: { type: "final" },
    expired: { type: "final" },
    cancelled: { type: "final" },
  },
});
