import { enqueueActions, setup } from "xstate";
import { hasStructuredApprovals, type ProviderCapabilities } from "../capabilities/index.js";
import type { SandboxPolicy } from "../adapters/contract.js";
import { policyApplied, record, type MachineEmitted } from "./emitted.js";

/** A provider session: the capability record it announced, its host generation, its turns. */

export interface SessionContext {
  sessionId: string;
  providerTarget: string;
  provider: string;
  /** What governs the provider's actions when it asks for no approvals. */
  sandbox: SandboxPolicy;
  capabilities: ProviderCapabilities | null;
  hostGeneration: number | null;
  activeTurns: number;
  lastError: string | null;
}

export type SessionEvent =
  | { type: "STARTED"; capabilities: ProviderCapabilities; hostGeneration: number }
  | { type: "START_FAILED"; message: string }
  | { type: "TURN_BEGAN" }
  | { type: "TURN_ENDED" }
  | { type: "STOPPED"; message: string | null }
  | { type: "FAILED"; message: string };

export const sessionMachine = setup({
  types: {
    context: {} as SessionContext,
    events: {} as SessionEvent,
    input: {} as { sessionId: string; providerTarget: string; provider: string; sandbox: SandboxPolicy },
    emitted: {} as MachineEmitted,
  },
  guards: {
    isLastTurn: ({ context }) => context.activeTurns <= 1,

  },
  actions: {
    recordStarted: enqueueActions(({ context, event, enqueue }) => {
      if (event.type !== "STARTED") return;
      enqueue.assign({ capabilities: event.capabilities, hostGeneration: event.hostGeneration });
      const { sessionId, providerTarget, provider } = context;
      enqueue.emit(
        record({ type: "session.started", sessionId, providerTarget, provider, hostGeneration: event.hostGeneration, capabilities: event.capabilities }),
      );
    }),
    /** Session-wide degradations, announced once with the capability record they follow from. */
    recordSessionPolicies: enqueueActions(({ context, event, enqueue }) => {
      if (event.type !== "STARTED") return;
      const caps = event.capabilities;
      const where = { threadId: null, runId: null };
      const session = `session ${context.sessionId} (${context.providerTarget})`;
      if (!hasStructuredApprovals(caps)) {
        enqueue.emit(policyApplied(where, "approvals_by_sandbox", `${session} asks for no approvals: it runs under the ${context.sandbox} sandbox policy`));
      }
      if (!caps.planning.emitsPlanUpdated) enqueue.emit(policyApplied(where, "no_plan_artifacts", `${session} emits no plan updates`));
      if (!caps.planning.emitsTodoList) enqueue.emit(policyApplied(where, "no_todo_artifacts", `${session} emits no todo lists`));
    }),
    recordStatus: enqueueActions(
      ({ context, event, enqueue }, params: { status: "ready" | "running" | "stopped" | "error" }) => {
        const message = "message" in event ? event.message : null;
        if (params.status === "error") enqueue.assign({ lastError: message });
        const { sessionId, providerTarget } = context;
        enqueue.emit(record({ type: "session.state", sessionId, providerTarget, status: params.status, message }));
      },
    ),
    countTurnUp: enqueueActions(({ context, enqueue }) => enqueue.assign({ activeTurns: context.activeTurns + 1 })),
    countTurnDown: enqueueActions(({ context, enqueue }) =>
      enqueue.assign({ activeTurns: Math.max(0, context.activeTurns - 1) }),
    ),
  },
}).createMachine({
  id: "session",
  context: ({ input }) => ({ ...input, capabilities: null, hostGeneration: null, activeTurns: 0, lastError: null }),
  initial: "starting",
  states: {
    starting: {
      on: {
        STARTED: { target: "ready", actions: ["recordStarted", "recordSessionPolicies"] },
        START_FAILED: { target: "error", actions: { type: "recordStatus", params: { status: "error" } } },
      },
    },
    ready: {
      on: {
        TURN_BEGAN: { target: "running", actions: ["countTurnUp", { type: "recordStatus", params: { status: "running" } }] },
      },
    },
    running: {
      on: {
        TURN_BEGAN: { actions: "countTurnUp" },
        TURN_ENDED: [
          { guard: "isLastTurn", target: "ready", actions: ["countTurnDown", { type: "recordStatus", params: { status: "ready" } }] },
          { actions: "countTurnDown" },
        ],
      },
    },
    stopped: { type: "final" },
    error: { type: "final" },
  },
  on: {
    STOPPED: { target: ".stopped", actions: { type: "recordStatus", params: { status: "stopped" } } },
    FAILED: { target: ".error", actions: { type: "recordStatus", params: { status: "error" } } },
  },
});
