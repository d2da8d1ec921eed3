import { randomBytes } from "node:crypto";
import { mkdtemp } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import type { CapabilityOverrides, ProviderCapabilities } from "../../capabilities/index.js";
import { HostUnavailableError, InvalidInputError } from "../../domain/errors.js";
import type { SupervisorPolicy } from "../../machines/hostSupervisor.js";
import { frameTooLarge, readDiagnostics, resolveLimits, type ChannelLimits } from "../kit/frameLimits.js";
import type { RpcChannel } from "../kit/rpcChannel.js";
import { StdioChannel } from "../kit/stdioChannel.js";
import { WebSocketChannel, type ReconnectPolicy } from "../kit/webSocketChannel.js";
import { readLines } from "../kit/lines.js";
import { nodeHostScript } from "../kit/hostScript.js";
import type { HostLease, HostSpec, SpawnedHost, SpawnSpec } from "../kit/hostSpec.js";
import { HostSessions } from "../kit/hostSessions.js";
import type { FrameRing } from "../kit/ring.js";
import type { ProviderAdapter, ProviderAdapterEvent, ProviderEvent } from "../contract.js";
import { EventQueue } from "../kit/eventQueue.js";
import { resolveCapabilities } from "./adapter.js";
import {
  AttachResultSchema,
  EventParamsSchema,
  HOST_FLAGS,
  ReattachResultSchema,
  ResumeResultSchema,
} from "./host/protocol.js";
import type { ScriptStep } from "./script.js";

/**
 * The scripted provider in its own process (stdio JSON-RPC, a loopback WebSocket, or a
 * WebSocket on a unix socket), run through the runtime's host supervisor: sessions on the
 * target share one host; a dead host fails its sessions; a dropped WebSocket reconnects a
 * bounded number of times and re-reads the host's state (replayed events, live sessions) before
 * any call goes through again.
 *
 * A socket host outlives the runtime (until nobody has been connected to it for `orphanTtlMs`):
 * the runtime's next life adopts it at its recorded socket, and where the record says pending
 * requests survive a restart, `reattachSession` takes up a session it still runs.
 */

/** How long a socket host left without a client waits to be adopted before it exits. */
export const DEFAULT_ORPHAN_TTL_MS = 60_000;

export interface ScriptedHostOptions {
  transport?: "stdio" | "websocket" | "socket";
  /** (socket) A host with no client for this long exits: nobody adopted it (default 60 s). */
  orphanTtlMs?: number;
  capabilities?: ProviderCapabilities | CapabilityOverrides;
  /** Steps by prompt marker; other prompts are echoed. */
  scripts?: Record<string, ScriptStep[]>;
  chunkDelayMs?: number;
  /** Host lifecycle: startup timeout, idle TTL, restart budget and backoff. */
  policy?: Partial<SupervisorPolicy>;
  reconnect?: ReconnectPolicy;
  /** Caps on what the host may send (default 16 MiB a frame, 1 MiB a stderr line): a host over one is lost. */
  limits?: ChannelLimits;
  stopGraceMs?: number;
  /** Liveness probe of the host (see HostSpec.heartbeat). */
  heartbeat?: { intervalMs?: number; timeoutMs?: number };
  /** Test behaviours of the host process. */
  neverReady?: boolean;
  lingerMs?: number;
}

export type ScriptedHostAdapter = ProviderAdapter & {
  /** Opens a `gate` step in every live host. */
  openGate(name: string): Promise<void>;
  /**
   * Calls a host test hook (`debug.dropConnections`, `debug.stopListening`, `debug.flood`, `debug.emitRaw`) through a
   * live session's host.
   */
  debug(method: string, params?: Record<string, unknown>): Promise<void>;
  /** Pid of the host a session runs in. */
  hostPid(sessionId: string): number | null;
  /** How its host is started and reached (what it leases from the registry). */
  readonly hostSpec: HostSpec;
};

interface Conn {
  lastSeq: number;
  leases: Set<HostLease>;
}

export function createScriptedHostAdapter(options: ScriptedHostOptions = {}): ScriptedHostAdapter {
  // A subagent wait or close does not cross the host's JSON-RPC (a wait's abort signal cannot): never declared.
  const resolved = resolveCapabilities(options.capabilities);
  const caps: ProviderCapabilities = {
    ...resolved,
    subagents: { ...resolved.subagents, canWaitForSubagents: false, canCloseSubagents: false },
  };
  const transport = options.transport ?? "stdio";
  // Only a socket host outlives the runtime: no other can keep a request answerable across a restart.
  if (caps.sessions.pendingRequestsSurviveRestart && transport !== "socket")
    throw new InvalidInputError(
      "capabilities.sessions.pendingRequestsSurviveRestart",
      `a ${transport} host dies with the runtime: its pending requests cannot survive a restart (use transport socket)`,
    );
  const limits = resolveLimits(options.limits);
  const queue = new EventQueue<ProviderAdapterEvent>();
  const sessions = new HostSessions("scripted host", (sessionId, report) =>
    queue.push({
      sessionId,
      event: { type: "session.state", state: "error", message: `provider host lost: ${report}` },
    }),
  );
  const conns = new WeakMap<RpcChannel, Conn>();
  const token = randomBytes(16).toString("hex");
  const push = (sessionId: string, event: ProviderEvent) => queue.push({ sessionId, event });

  const init = {
    capabilities: caps as unknown as Record<string, unknown>,
    scripts: options.scripts ?? {},
    ...(options.chunkDelayMs !== undefined ? { chunkDelayMs: options.chunkDelayMs } : {}),
  };
  const { script, execArgs } = nodeHostScript("./host/main.js", import.meta.url);
  // The socket's path is not among them: it is new for every host, and no part of the host key.
  const flags = [
    ...(transport === "websocket" ? [HOST_FLAGS.websocket] : []),
    ...(transport === "socket" ? [`--orphan-ttl-ms=${options.orphanTtlMs ?? DEFAULT_ORPHAN_TTL_MS}`] : []),
    ...(options.neverReady ? [HOST_FLAGS.neverReady] : []),
    ...(options.lingerMs ? [`--linger-ms=${options.lingerMs}`] : []),
  ];

  const listen = (channel: RpcChannel): Conn => {
    const conn: Conn = { lastSeq: 0, leases: new Set() };
    conns.set(channel, conn);
    channel.expectNotifications(["host.ready", "event"]);
    channel.onNotification((method, params) => {
      if (method !== "event") return;
      const parsed = EventParamsSchema.safeParse(params);
      if (!parsed.success)
        return channel.ring.note("invalid_params", `event: ${parsed.error.issues[0]?.message ?? "invalid"}`);
      if (parsed.data.seq <= conn.lastSeq) return; // a replayed event already seen
      conn.lastSeq = parsed.data.seq;
      queue.push({ sessionId: parsed.data.sessionId, event: parsed.data.event as ProviderEvent });
    });
    return conn;
  };

  /**
   * A WebSocket channel to a host, with the event listener, and the re-read after a reconnect:
   * replay what was missed, fail sessions the host no longer has, then reopen calls. Exhausted
   * reconnects: the registry sees the channel fail, declares the host lost and stops it.
   */
  const webSocketChannel = (url: string, ring: FrameRing): { channel: WebSocketChannel; conn: Conn } => {
    const channel = new WebSocketChannel(
      url,
      ring,
      options.reconnect ?? { attempts: 3, backoffMs: [50, 200, 500] },
      options.limits,
    );
    const conn = listen(channel);
    channel.onReconnected = async () => {
      const state = ResumeResultSchema.parse(
        await channel.call("resume", { afterSeq: conn.lastSeq }, { bypassGate: true }),
      );
      const alive = new Set(state.sessions.map((s) => s.sessionId));
      for (const [sessionId, lease] of sessions.entries()) {
        if (!conn.leases.has(lease) || alive.has(sessionId)) continue;
        forget(sessionId, lease);
        push(sessionId, {
          type: "session.state",
          state: "error",
          message: "the host lost this session while disconnected",
        });
      }
      channel.openGate();
    };
    return { channel, conn };
  };

  const connect = async (host: SpawnedHost, ring: FrameRing): Promise<RpcChannel> => {
    if (transport === "stdio") {
      const channel = new StdioChannel(host.child, ring, options.limits);
      const ready = channel.nextNotification("host.ready"); // rejects if the host is cut off first
      listen(channel);
      await ready;
      await channel.call("init", init);
      return channel;
    }
    // A WebSocket host's stdout carries one short line (where it listens), then diagnostics:
    // both streams are capped as diagnostics. Until the channel exists, a host over a cap fails
    // the connect; then it fails the channel.
    let broken: (error: Error) => void = () => undefined;
    const listening = await new Promise<{ port?: number; socket?: string }>((resolve, reject) => {
      broken = reject;
      readLines(host.child.stdout!, {
        maxLineBytes: limits.stderrLineBytes,
        onLine: (line) => {
          ring.push("in", line);
          try {
            const where = (JSON.parse(line) as { listening?: { port?: number; socket?: string } } | null)?.listening;
            if (where?.port || where?.socket) resolve(where);
          } catch {
            // not the listening line: kept in the ring, nothing else
          }
        },
        onOverflow: (overflow) => {
          ring.note(
            "frame_too_large",
            `stdout: no newline within ${overflow.limitBytes} bytes; it began: ${overflow.head}`,
          );
          broken(frameTooLarge("stdout", overflow.limitBytes));
        },
      });
      readDiagnostics(host.child.stderr!, ring, "stderr", limits.stderrLineBytes, (error) => broken(error));
      host.child.once("exit", () => reject(new HostUnavailableError("host exited before listening")));
    });
    const url = transport === "socket" ? socketUrl(host.endpoint!) : `ws://127.0.0.1:${listening.port}/?token=${token}`;
    const { channel } = webSocketChannel(url, ring);
    broken = (error) => channel.fail(error);
    await channel.connect();
    await channel.call("init", init);
    return channel;
  };

  /** Takes up a socket host a previous life started (already initialized): live from its current seq. */
  const adopt = async (endpoint: string, ring: FrameRing): Promise<RpcChannel> => {
    const { channel, conn } = webSocketChannel(socketUrl(endpoint), ring);
    try {
      await channel.connect();
      // What the host sent before is in the runtime's log already: nothing is replayed.
      conn.lastSeq = AttachResultSchema.parse(await channel.call("attach", {})).seq;
    } catch (error) {
      channel.close();
      throw error;
    }
    return channel;
  };

  /** A fresh private directory (0700) for each socket host: its socket is the host's endpoint. */
  const socketSpawn = async (): Promise<SpawnSpec> => {
    const endpoint = join(await mkdtemp(join(tmpdir(), "tiller-host-")), "host.sock");
    if (Buffer.byteLength(endpoint) > MAX_SOCKET_PATH_BYTES)
      throw new HostUnavailableError(`the host socket path ${endpoint} is too long (TMPDIR)`, { endpoint });
    return {
      command: process.execPath,
      args: [...execArgs, script, ...flags, `--socket=${endpoint}`],
      env: {},
      endpoint,
    };
  };

  const spec: HostSpec = {
    target: "scripted",
    identity: { executable: process.execPath, config: { script, transport, init, flags } },
    spawn:
      transport === "socket"
        ? socketSpawn
        : {
            command: process.execPath,
            args: [...execArgs, script, ...flags],
            env: transport === "websocket" ? { TILLER_HOST_TOKEN: token } : {},
          },
    connect,
    ...(transport === "socket" ? { adopt } : {}),
    ...(options.policy ? { policy: options.policy } : {}),
    ...(options.stopGraceMs !== undefined ? { stopGraceMs: options.stopGraceMs } : {}),
    ...(options.heartbeat ? { heartbeat: options.heartbeat } : {}),
    secrets: [token],
  };

  const call = async <T>(sessionId: string, method: string, input: unknown): Promise<T> =>
    (await sessions.lease(sessionId).channel.call(method, input)) as T;

  /** Leases a host for a session (taken, not yet confirmed: `forget` gives it back). */
  const lease = async (sessionId: string): Promise<HostLease> => {
    const held = await sessions.open(sessionId, spec);
    conns.get(held.channel)?.leases.add(held);
    return held;
  };
  function giveBack(held: HostLease): void {
    conns.get(held.channel)?.leases.delete(held);
    held.release();
  }
  /** The session is no longer the adapter's: its lease goes back. */
  function forget(sessionId: string, held: HostLease): void {
    sessions.take(sessionId);
    giveBack(held);
  }

  const adapter: ScriptedHostAdapter = {
    provider: "scripted",
    getCapabilities: () => caps,
    bindHosts(registry, target) {
      sessions.bind(registry);
      spec.target = target;
    },
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
    async stopSession({ sessionId }) {
      const held = sessions.take(sessionId);
      if (!held) return;
      await held.channel.call("stopSession", { sessionId }, { timeoutMs: 2_000 }).catch(() => undefined);
      giveBack(held);
    },
    ensureProviderThread: (input) => call(input.sessionId, "ensureProviderThread", input),
    sendRun: (input) => call(input.sessionId, "sendRun", input),
    interrupt: (input) => call(input.sessionId, "interrupt", input),
    isTurnAlive: (input) => call(input.sessionId, "isTurnAlive", input),
    respondToRequest: (input) => call(input.sessionId, "respondToRequest", input),
    streamEvents: () => queue,
    async close() {
      for (const [sessionId] of sessions.entries()) await adapter.stopSession({ sessionId });
      queue.close();
    },
    async openGate(name) {
      const channels = new Set(sessions.entries().map(([, l]) => l.channel));
      await Promise.all([...channels].map((c) => c.call("openGate", { name })));
    },
    async debug(method, params = {}) {
      const [lease] = sessions.entries().map(([, l]) => l);
      if (!lease) throw new HostUnavailableError("no live host");
      await lease.channel.call(method, params);
    },
    hostPid: (sessionId) => sessions.pid(sessionId),
    hostSpec: spec,
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
        const found = ReattachResultSchema.parse(await held.channel.call("reattach", { sessionId }));
        if (found) return { sessionId, capabilities: caps, hostGeneration: held.generation, turns: found.turns };
      } catch (error) {
        if (!live) forget(sessionId, held);
        throw error;
      }
      if (!live) forget(sessionId, held);
      return null;
    };
  }
  return adapter;
}

/** A unix socket path must fit `sun_path` (108 bytes on Linux, 104 on macOS). */
const MAX_SOCKET_PATH_BYTES = 100;

/** ws's address of a WebSocket on a unix socket (the path, then the request path after a colon). */
const socketUrl = (endpoint: string): string => `ws+unix:${endpoint}:/`;
