import { createActor, setup, type AnyStateMachine } from "xstate";
import type { ProviderCapabilities } from "../capabilities/schema.js";
import type { PolicyName } from "./policies.js";

/**
 * How a handoff reaches the provider, as guarded transitions: the machine starts in
 * `deciding` and settles at once in a final state named after what the runtime does; states
 * that degrade carry the policy name in `meta`. (How a provider thread is loaded, forks
 * included, is decided by the provider-thread machine itself.)
 */

/** Run a decision machine to its (immediate) final state. */
export function decide<TInput>(
  machine: AnyStateMachine,
  input: TInput,
): { decision: string; policy: PolicyName | null } {
  const actor = createActor(machine, { input }).start();
  const snapshot = actor.getSnapshot();
  actor.stop();
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
