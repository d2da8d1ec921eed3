import { assign, setup } from "xstate";
import type { ProviderThreadHandle } from "../adapters/contract.js";

/**
 * A provider-side thread bound to an app thread: loaded in a session (created, resumed or
 * forked), idle or running a turn, unloaded when its session dies (the next turn resumes it
 * from its persisted cursor), closed when the provider reports it broken.
 */

export interface ProviderThreadContext {
  providerThreadId: string;
  appThreadId: string;
  providerTarget: string;
  sessionId: string | null;
  handle: ProviderThreadHandle | null;
}

export type ProviderThreadEvent =
  | { type: "LOADED"; sessionId: string; handle: ProviderThreadHandle }
  | { type: "TURN_BEGAN" }
  | { type: "TURN_ENDED" }
  | { type: "SESSION_GONE" }
  | { type: "CLOSE" };

export const providerThreadMachine = setup({
  types: {
    context: {} as ProviderThreadContext,
    events: {} as ProviderThreadEvent,
    input: {} as { providerThreadId: string; appThreadId: string; providerTarget: string },
  },
  actions: {
    bindHandle: assign({
      sessionId: ({ context, event }) => (event.type === "LOADED" ? event.sessionId : context.sessionId),
      handle: ({ context, event }) => (event.type === "LOADED" ? event.handle : context.handle),
    }),
    forgetSession: assign({ sessionId: null }),
  },
}).createMachine({
  id: "providerThread",
  context: ({ input }) => ({ ...input, sessionId: null, handle: null }),
  initial: "not_loaded",
  states: {
    not_loaded: {},
    idle: { on: { TURN_BEGAN: "active" } },
    active: { on: { TURN_ENDED: "idle" } },
    closed: { type: "final" },
  },
  on: {
    // Loaded (or reloaded in another session after its first one died).
    LOADED: { target: ".idle", actions: "bindHandle" },
    // A session loss unloads the thread: the next turn resumes it from its cursor.
    SESSION_GONE: { target: ".not_loaded", actions: "forgetSession" },
    CLOSE: ".closed",
  },
});
