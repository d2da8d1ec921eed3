import { assign, setup } from "xstate";
import type { ProviderThreadHandle } from "../adapters/contract.js";

/**
 * A provider-side thread bound to an app thread. Its native handle (resume cursor) is
 * persisted by the runtime, so a restarted runtime resumes it instead of starting over.
 */

export interface ProviderThreadContext {
  providerThreadId: string;
  appThreadId: string;
  providerTarget: string;
  sessionId: string | null;
  handle: ProviderThreadHandle | null;
  /** Provider context no longer matches the app thread (e.g. files rolled back without it). */
  divergent: boolean;
}

export type ProviderThreadEvent =
  | { type: "LOAD" }
  | { type: "LOADED"; sessionId: string; handle: ProviderThreadHandle }
  | { type: "LOAD_FAILED" }
  | { type: "TURN_BEGAN" }
  | { type: "TURN_ENDED" }
  | { type: "SESSION_GONE" }
  | { type: "CLOSE" };

export const providerThreadMachine = setup({
  types: {
    context: {} as ProviderThreadContext,
    events: {} as ProviderThreadEvent,
    input: {} as { providerThreadId: string; appThreadId: string; providerTarget: string; handle?: ProviderThreadHandle | null },
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
  context: ({ input }) => ({
    providerThreadId: input.providerThreadId,
    appThreadId: input.appThreadId,
    providerTarget: input.providerTarget,
    sessionId: null,
    handle: input.handle ?? null,
    divergent: false,
  }),
  initial: "not_loaded",
  states: {
    not_loaded: { on: { LOAD: "loading" } },
    loading: {
      on: {
        LOADED: { target: "idle", actions: "bindHandle" },
        LOAD_FAILED: "not_loaded",
      },
    },
    idle: { on: { TURN_BEGAN: "active" } },
    active: { on: { TURN_ENDED: "idle" } },
    closed: { type: "final" },
    error: {},
  },
  on: {
    // A session loss unloads the thread: the next turn resumes it from its cursor.
    SESSION_GONE: { target: ".not_loaded", actions: "forgetSession" },
    // Rebound (resumed or re-created) in another session.
    LOADED: { target: ".idle", actions: "bindHandle" },
    CLOSE: ".closed",
  },
});
