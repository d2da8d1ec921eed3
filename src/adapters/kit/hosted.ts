import type { ProviderAdapter, ProviderAdapterEvent, ProviderEvent } from "../contract.js";
import { mergeDeltas } from "./deltaMerge.js";
import { EventQueue } from "./eventQueue.js";
import type { HostLease, HostSpec } from "./hostSpec.js";
import { HostSessions } from "./hostSessions.js";

/**
 * What every adapter whose provider runs in a leased host does alike: its event queue; its sessions, one lease each,
 * a lost host failing them (`session.state` error, with the host's report); taking the runtime's host registry at
 * `bindHosts`; starting the host ahead of any session (`prewarm`); stopping a session (its goodbye to the host,
 * bounded and best effort, then the lease back); closing (every session stopped, then the queue); the host's pid. The
 * adapter writes only what its provider does.
 */
export interface HostedHooks {
  /** The session's goodbye to its host, before its lease goes back (failures are ignored: the host may be gone). */
  goodbye?(sessionId: string, lease: HostLease): Promise<unknown>;
  /** The session stops, whether or not it still held a lease: forget what the adapter kept for it. */
  forget?(sessionId: string): void;
  /** A lease goes back to the registry. */
  released?(lease: HostLease): void;
}

export interface Hosted {
  queue: EventQueue<ProviderAdapterEvent>;
  sessions: HostSessions;
  push(sessionId: string, event: ProviderEvent): void;
  /** Gives a lease back (and tells `released`). */
  giveBack(lease: HostLease): void;
  /** The contract methods every hosted adapter has alike, for its host spec. */
  methods(spec: HostSpec): HostedMethods;
}

export type HostedMethods = Required<Pick<ProviderAdapter, "bindHosts" | "prewarm">> &
  Pick<ProviderAdapter, "stopSession" | "streamEvents" | "close"> & {
    hostPid(sessionId: string): number | null;
    readonly hostSpec: HostSpec;
  };

export function hosted(provider: string, hooks: HostedHooks = {}): Hosted {
  // A read of the host's pipe brings frames in bursts: deltas queued behind a busy runtime merge (deltaMerge.ts).
  const queue = new EventQueue<ProviderAdapterEvent>({ merge: mergeDeltas });
  const push = (sessionId: string, event: ProviderEvent) => queue.push({ sessionId, event });
  const sessions = new HostSessions(provider, (sessionId, report) =>
    push(sessionId, { type: "session.state", state: "error", message: `${provider} host lost: ${report}` }),
  );
  const giveBack = (lease: HostLease) => {
    hooks.released?.(lease);
    lease.release();
  };
  const stopSession = async ({ sessionId }: { sessionId: string }) => {
    const lease = sessions.take(sessionId);
    hooks.forget?.(sessionId);
    if (!lease) return;
    await hooks.goodbye?.(sessionId, lease).catch(() => undefined);
    giveBack(lease);
  };
  return {
    queue,
    sessions,
    push,
    giveBack,
    methods: (spec) => ({
      bindHosts(registry, target) {
        sessions.bind(registry);
        spec.target = target;
      },
      // The host is started and its lease given back at once: the registry keeps it for its idle TTL, where the
      // first session's lease takes it up.
      async prewarm() {
        giveBack(await sessions.acquire(spec));
      },
      stopSession,
      streamEvents: () => queue,
      async close() {
        for (const [sessionId] of sessions.entries()) await stopSession({ sessionId });
        queue.close();
      },
      hostPid: (sessionId) => sessions.pid(sessionId),
      hostSpec: spec,
    }),
  };
}
