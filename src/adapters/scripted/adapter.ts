import type { KnownFields, ProviderCapabilities } from "../../capabilities/index.js";
import { HostUnavailableError } from "../../domain/errors.js";
import type { ProviderAdapter } from "../contract.js";
import { hosted } from "../kit/hosted.js";
import type { HostLease, HostSpec } from "../kit/hostSpec.js";
import { hostedCapabilities, type HostedCapabilities, type ScriptedRecord } from "./capabilities.js";
import {
  checkReply,
  scriptedHostTransport,
  type CheckedCall,
  type CheckedReply,
  type ScriptedHostOptions,
} from "./transport.js";
import { defineAdapter, type AdapterDeclaring, type RequiredMethods } from "../kit/defineAdapter.js";

/**
 * The scripted provider's adapters. `createScriptedAdapter` runs the scripted provider in process (it is the provider:
 * see `host/provider.ts`). `createScriptedHostAdapter` runs the same provider in its own process, leased from the
 * runtime's host registry: sessions on the target share one host; a dead host fails its sessions. A socket host
 * outlives the runtime (until nobody has been connected to it for `orphanTtlMs`): the runtime's next life adopts it,
 * and where the record says pending requests survive a restart, `reattachSession` takes up a session it still runs.
 */

export {
  createScriptedAdapter,
  type InProcessOptions,
  type ScriptedAdapter,
  type ScriptedAdapterOptions,
} from "./host/provider.js";
export type { HostedCapabilities, ScriptedCapabilities, ScriptedRecord } from "./capabilities.js";
export { DEFAULT_ORPHAN_TTL_MS, type ScriptedHostOptions } from "./transport.js";

/**
 * The hosted scripted adapter, for the record it was given (`C`): its record typed as `hostedCapabilities` makes it
 * (literal where given literally; subagent wait and close never), and the methods that record claims (each attached
 * exactly when its field is true).
 */
export type ScriptedHostAdapter<C extends ScriptedRecord = ScriptedRecord> = AdapterDeclaring<HostedCapabilities<C>> &
  HostControls;

/** What the hosted scripted adapter has besides the contract. */
interface HostControls {
  /** Opens a `gate` step in every live host. */
  openGate(name: string): Promise<void>;
  /**
   * Calls a host test hook (`debug.dropConnections`, `debug.stopListening`, `debug.flood`, `debug.emitRaw`,
   * `debug.emitRawParams`, `debug.replyOnce`) through a live session's host.
   */
  debug(method: string, params?: Record<string, unknown>): Promise<void>;
  /** Pid of the host a session runs in. */
  hostPid(sessionId: string): number | null;
  /** How its host is started and reached (what it leases from the registry). */
  readonly hostSpec: HostSpec;
}

/**
 * Options whose record names only the record's fields, and claims restart survival only where the transport may be a
 * socket: a stdio or WebSocket host dies with the runtime, so a record claiming it literally there does not
 * type-check (and is refused at runtime, typed).
 */
export type HostOptions<C extends ScriptedRecord, T extends Transport> = ScriptedHostOptions<C> & {
  transport?: T;
  capabilities?: KnownFields<C> &
    ("reattachSession" extends RequiredMethods<HostedCapabilities<C>>
      ? "socket" extends T
        ? unknown
        : { sessions: { pendingRequestsSurviveRestart: false } }
      : unknown);
};

type Transport = NonNullable<ScriptedHostOptions["transport"]>;

export function createScriptedHostAdapter<const C extends ScriptedRecord = {}, T extends Transport = "stdio">(
  options: HostOptions<C, T> = {},
): ScriptedHostAdapter<C> {
  const caps: ProviderCapabilities = hostedCapabilities(
    options.capabilities as ScriptedRecord | undefined,
    options.transport ?? "stdio",
  );
  const host = hosted("scripted", {
    goodbye: (sessionId, held) => held.channel.call("stopSession", { sessionId }, { timeoutMs: 2_000 }),
    released: (held) => connOf(held.channel)?.leases.delete(held),
  });
  const { sessions, push } = host;
  const { spec, connOf } = scriptedHostTransport(
    options,
    caps,
    (frame) => host.queue.push(frame),
    (conn, alive) => {
      for (const [sessionId, lease] of sessions.entries()) {
        if (!conn.leases.has(lease) || alive.has(sessionId)) continue;
        forget(sessionId, lease);
        push(sessionId, {
          type: "session.state",
          state: "error",
          message: "the host lost this session while disconnected",
        });
      }
    },
  );

  /** A call through the session's host; its reply checked (`checkReply`: a ProtocolError naming the call). */
  const call = async <M extends CheckedCall>(sessionId: string, method: M, input: unknown): Promise<CheckedReply<M>> =>
    checkReply(method, await sessions.lease(sessionId).channel.call(method, input));

  /** Leases a host for a session (taken, not yet confirmed: `forget` gives it back). */
  const lease = async (sessionId: string): Promise<HostLease> => {
    const held = await sessions.open(sessionId, spec);
    connOf(held.channel)?.leases.add(held);
    return held;
  };
  /** The session is no longer the adapter's: its lease goes back. */
  function forget(sessionId: string, held: HostLease): void {
    sessions.take(sessionId);
    host.giveBack(held);
  }

  const adapter: ProviderAdapter & HostControls = {
    ...host.methods(spec),
    provider: "scripted",
    getCapabilities: () => caps,
    async startSession(input) {
      const held = await lease(input.sessionId);
      try {
        await held.channel.call("startSession", input);
      } catch (error) {
        forget(input.sessionId, held);
        throw error;
      }
      return { sessionId: input.sessionId, capabilities: caps, hostGeneration: held.generation };
    },
    ensureProviderThread: (input) => call(input.sessionId, "ensureProviderThread", input),
    sendRun: (input) => call(input.sessionId, "sendRun", input),
    interrupt: (input) => call(input.sessionId, "interrupt", input),
    isTurnAlive: (input) => call(input.sessionId, "isTurnAlive", input),
    respondToRequest: (input) => call(input.sessionId, "respondToRequest", input),
    async openGate(name) {
      const channels = new Set(sessions.entries().map(([, l]) => l.channel));
      await Promise.all([...channels].map((c) => c.call("openGate", { name })));
    },
    async debug(method, params = {}) {
      const [lease] = sessions.entries().map(([, l]) => l);
      if (!lease) throw new HostUnavailableError("no live host");
      await lease.channel.call(method, params);
    },
  };
  // Optional methods exist exactly when the record declares them, as in-process.
  if (caps.turns.supportsActiveSteering) adapter.steerRun = (input) => call(input.sessionId, "steerRun", input);
  if (caps.threads.canReadThreadSnapshot)
    adapter.readThreadSnapshot = (input) => call(input.sessionId, "readThreadSnapshot", input);
  if (caps.threads.canRollbackThread)
    adapter.rollbackThread = (input) => call(input.sessionId, "rollbackThread", input);
  if (caps.threads.canForkThread) adapter.forkThread = (input) => call(input.sessionId, "forkThread", input);
  if (caps.context.canGenerateSummaries) adapter.summarize = (input) => call(input.sessionId, "summarize", input);
  if (caps.sessions.pendingRequestsSurviveRestart) {
    // The session's host is leased as for a start: a host a previous life left running is adopted then.
    adapter.reattachSession = async ({ sessionId }) => {
      const live = sessions.find(sessionId);
      const held = live ?? (await lease(sessionId));
      try {
        const found = checkReply("reattach", await held.channel.call("reattach", { sessionId }));
        if (found) return { sessionId, capabilities: caps, hostGeneration: held.generation, turns: found.turns };
      } catch (error) {
        if (!live) forget(sessionId, held);
        throw error;
      }
      if (!live) forget(sessionId, held);
      return null;
    };
  }
  // The record is `hostedCapabilities`' for what it was given (typed `HostedCapabilities<C>`), and each method it
  // claims is attached above: checked here at runtime, since the compiler cannot follow a field's value to the method
  // attached on it.
  return defineAdapter(adapter as ScriptedHostAdapter<C>);
}
