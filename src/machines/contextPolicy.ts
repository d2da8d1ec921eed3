import { createActor, setup, type AnyStateMachine } from "xstate";
import type { ProviderCapabilities } from "../capabilities/schema.js";
import { canForkNatively } from "../capabilities/predicates.js";
import type { PolicyName } from "./policies.js";

/**
 * Where the conversation's context comes from when a provider thread is (re)loaded: the
 * three decisions of the context-handoff and fork policies, as guarded transitions. Each
 * machine starts in `deciding` and settles at once in a final state named after what the
 * runtime does; states that degrade carry the policy name in `meta`. The runtime records
 * that policy; the inspector and `xstate/graph` see the same transitions.
 */

/** Run a decision machine to its (immediate) final state. */
export function decide<TInput>(machine: AnyStateMachine, input: TInput): { decision: string; policy: PolicyName | null } {
  const actor = createActor(machine, { input }).start();
  const snapshot = actor.getSnapshot();
  actor.stop();
  const decision = String(snapshot.value);
  const meta = snapshot.getMeta() as Record<string, { policy?: PolicyName } | undefined>;
  const policy = Object.values(meta).find((m) => m?.policy)?.policy ?? null;
  return { decision, policy };
}

export interface ProviderThreadSituation {
  capabilities: ProviderCapabilities;
  /** The app thread already has a provider thread on this target. */
  hasThread: boolean;
  /** A rollback could not reach the provider: that thread holds turns the app rolled back. */
  divergent: boolean;
  /** Runs happened elsewhere since that thread last took part. */
  missedRuns: boolean;
  /** The app thread is a fork whose first run is still to be resolved. */
  pendingFork: boolean;
}

/** Which provider thread the next turn runs on. */
export const providerThreadPolicy = setup({
  types: { context: {} as ProviderThreadSituation, input: {} as ProviderThreadSituation },
  guards: {
    hasThread: ({ context }) => context.hasThread,
    isDivergent: ({ context }) => context.divergent,
    missedRuns: ({ context }) => context.missedRuns,
    supportsDeltaHandoff: ({ context }) => context.capabilities.context.supportsDeltaHandoff,
    pendingFork: ({ context }) => context.pendingFork,
  },
}).createMachine({
  id: "providerThreadPolicy",
  context: ({ input }) => input,
  initial: "deciding",
  states: {
    deciding: {
      always: [
        { guard: "isDivergent", target: "realign" },
        { guard: "hasThread", target: "choosingReturn" },
        { guard: "pendingFork", target: "fork" },
        { target: "create" },
      ],
    },
    choosingReturn: {
      always: [
        { guard: "missedRuns", target: "returnWithDelta" },
        { target: "resume" },
      ],
    },
    returnWithDelta: {
      always: [{ guard: "supportsDeltaHandoff", target: "resume" }, { target: "refresh" }],
    },
    /** Resume the stored thread (with a delta of what it missed, when it missed something). */
    resume: { type: "final" },
    /** Returning provider without delta handoff: a fresh thread, told the whole history. */
    refresh: { type: "final", meta: { policy: "handoff_fresh_thread" } },
    /** After a divergent rollback: a fresh thread, rebuilt from the app's history. */
    realign: { type: "final", meta: { policy: "divergent_thread_rebuilt" } },
    fork: { type: "final" },
    create: { type: "final" },
  },
});

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

export interface ForkSituation {
  capabilities: ProviderCapabilities;
  /** The fork point is inside the parent's history (not its latest run). */
  fromInside: boolean;
  /** This provider holds a faithful copy of the parent up to the fork point. */
  parentRanHere: boolean;
  /** The adapter implements forkThread. */
  adapterForks: boolean;
  /** A point inside the thread needs the native turn id of the fork point. */
  hasForkPointRef: boolean;
}

/** How a fork's first run realises the fork recorded at fork time (invariant 9). */
export const forkPolicy = setup({
  types: { context: {} as ForkSituation, input: {} as ForkSituation },
  guards: {
    parentRanHere: ({ context }) => context.parentRanHere,
    canForkNatively: ({ context }) => context.adapterForks && canForkNatively(context.capabilities, context.fromInside),
    hasForkPoint: ({ context }) => !context.fromInside || context.hasForkPointRef,
  },
}).createMachine({
  id: "forkPolicy",
  context: ({ input }) => input,
  initial: "deciding",
  states: {
    deciding: {
      always: [
        { guard: "parentRanHere", target: "checkingProvider" },
        { target: "synthetic" },
      ],
    },
    checkingProvider: {
      always: [{ guard: "canForkNatively", target: "checkingForkPoint" }, { target: "synthetic" }],
    },
    checkingForkPoint: {
      always: [{ guard: "hasForkPoint", target: "native" }, { target: "synthetic" }],
    },
    native: { type: "final" },
    synthetic: { type: "final", meta: { policy: "synthetic_fork" } },
  },
});
