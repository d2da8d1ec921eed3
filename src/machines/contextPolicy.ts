import { createActor, setup, type AnyActorScope, type AnyStateMachine } from "xstate";
import {
  consumesHandoffSummaries,
  switchesProvidersViaHandoff,
  takesFullThreadHandoff,
} from "../capabilities/predicates.js";
import type { ProviderCapabilities } from "../capabilities/schema.js";
import type { PolicyName } from "./policies.js";

/**
 * How a handoff reaches the provider, as guarded transitions: the machine starts in
 * `deciding` and settles at once in a final state named after what the runtime does; states
 * that degrade carry the policy name in `meta`. (How a provider thread is loaded, forks
 * included, is decided by the provider-thread machine itself.)
 */

/**
 * A decision machine's actor scope, made once: the machines only read guards (no actions, no children), so the scope of
 * one never started actor serves every decision. (xstate's `getInitialSnapshot` makes an actor and a system for each
 * call; starting and stopping an actor costs more again. Every turn start asks for two decisions.)
 */
const inertScopes = new WeakMap<AnyStateMachine, AnyActorScope>();

function inertScope(machine: AnyStateMachine, input: unknown): AnyActorScope {
  let scope = inertScopes.get(machine);
  if (!scope) {
    const self = createActor(machine, { input });
    const none = () => {};
    scope = {
      self,
      id: "",
      sessionId: "",
      system: self.system,
      defer: none,
      logger: none,
      stopChild: none,
      emit: none,
      actionExecutor: none,
    } as AnyActorScope;
    inertScopes.set(machine, scope);
  }
  return scope;
}

/** Run a decision machine to its (immediate) final state: its pure initial transition. */
export function decide<TInput>(
  machine: AnyStateMachine,
  input: TInput,
): { decision: string; policy: PolicyName | null } {
  const snapshot = machine.getInitialSnapshot(inertScope(machine, input), input);
  const decision = String(snapshot.value);
  const meta = snapshot.getMeta() as Record<string, { policy?: PolicyName } | undefined>;
  const policy = Object.values(meta).find((m) => m?.policy)?.policy ?? null;
  return { decision, policy };
}

/** How a handoff reaches the provider; refused when it takes no context at all. */
export const contextDeliveryPolicy = setup({
  types: { context: {} as { capabilities: ProviderCapabilities }, input: {} as { capabilities: ProviderCapabilities } },
  guards: {
    acceptsDeveloperContext: ({ context }) => context.capabilities.context.acceptsDeveloperContext,
    acceptsSystemContext: ({ context }) => context.capabilities.context.acceptsSystemContext,
    acceptsSyntheticUserContext: ({ context }) => context.capabilities.context.acceptsSyntheticUserContext,
  },
}).createMachine({
  id: "contextDeliveryPolicy",
  context: ({ input }) => input,
  initial: "deciding",
  states: {
    deciding: {
      always: [
        { guard: "acceptsDeveloperContext", target: "developer" },
        { guard: "acceptsSystemContext", target: "system" },
        { guard: "acceptsSyntheticUserContext", target: "synthetic_user" },
        { target: "refused" },
      ],
    },
    developer: { type: "final" },
    system: { type: "final" },
    synthetic_user: { type: "final", meta: { policy: "handoff_as_user_context" } },
    refused: { type: "final", meta: { policy: "handoff_unsupported" } },
  },
});

/** What the next turn on a target must be told: nothing, what its thread missed, or the whole conversation. */
export type HandoffNeed = "none" | "delta" | "full";

export interface HandoffAdmissionInput {
  /** The record of the target the conversation is on now (null when no run of it reached a provider). */
  from: ProviderCapabilities | null;
  to: ProviderCapabilities;
  /** The conversation moves to another target. */
  switching: boolean;
  need: HandoffNeed;
}

/**
 * Whether a run may go to a target that must be told the conversation, decided before anything
 * is recorded for it: every refusal is a final state named by its policy. A switch needs both
 * providers to take part in switching; a summary needs a provider that can consume one; a
 * whole-conversation summary needs one that takes full handoffs. How the context is then
 * delivered is the delivery policy's decision.
 */
export const handoffAdmissionPolicy = setup({
  types: { context: {} as HandoffAdmissionInput, input: {} as HandoffAdmissionInput },
  guards: {
    nothingToTell: ({ context }) => context.need === "none",
    switchUnsupported: ({ context }) =>
      context.switching &&
      !(switchesProvidersViaHandoff(context.to) && (!context.from || switchesProvidersViaHandoff(context.from))),
    summariesUnsupported: ({ context }) => !consumesHandoffSummaries(context.to),
    fullUnsupported: ({ context }) => context.need === "full" && !takesFullThreadHandoff(context.to),
  },
}).createMachine({
  id: "handoffAdmissionPolicy",
  context: ({ input }) => input,
  initial: "deciding",
  states: {
    deciding: {
      always: [
        { guard: "nothingToTell", target: "admitted" },
        { guard: "switchUnsupported", target: "switchRefused" },
        { guard: "summariesUnsupported", target: "summaryRefused" },
        { guard: "fullUnsupported", target: "fullRefused" },
        { target: "admitted" },
      ],
    },
    admitted: { type: "final" },
    switchRefused: { type: "final", meta: { policy: "provider_switch_unsupported" } },
    summaryRefused: { type: "final", meta: { policy: "handoff_summary_unsupported" } },
    fullRefused: { type: "final", meta: { policy: "full_handoff_unsupported" } },
  },
});
