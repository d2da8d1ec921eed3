import { randomBytes } from "node:crypto";
import { mkdtemp } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { z } from "zod";
import type { ProviderCapabilities } from "../../capabilities/index.js";
import { TurnTerminalStatusSchema } from "../../domain/entities.js";
import { HostUnavailableError, ProtocolError } from "../../domain/errors.js";
import type { SupervisorPolicy } from "../../machines/hostSupervisor.js";
import type { ProviderAdapterEvent } from "../contract.js";
import { frameTooLarge, readDiagnostics, resolveLimits, type ChannelLimits } from "../kit/frameLimits.js";
import { nodeHostScript } from "../kit/hostScript.js";
import type { HostLease, HostSpec, SpawnedHost, SpawnSpec } from "../kit/hostSpec.js";
import { readLines } from "../kit/lines.js";
import type { FrameRing } from "../kit/ring.js";
import type { RpcChannel } from "../kit/rpcChannel.js";
import { StdioChannel } from "../kit/stdioChannel.js";
import { WebSocketChannel, type ReconnectPolicy } from "../kit/webSocketChannel.js";
import type { ScriptedRecord } from "./capabilities.js";
import type { ScriptStep } from "./host/script.js";
import { hostEvent } from "./mapper.js";
import { AttachResultSchema, HOST_FLAGS, ReattachResultSchema, ResumeResultSchema } from "./protocol/host.js";

/**
 * How the scripted provider's host process is started and reached: stdio JSON-RPC, a loopback WebSocket (a token in
 * its URL), or a WebSocket on a unix socket in a private directory (a host that outlives the runtime, adopted at its
 * recorded endpoint by the runtime's next life). A dropped WebSocket reconnects a bounded number of times and re-reads
 * the host's state (replayed events, live sessions) before any call goes through again.
 */

/** How long a socket host left without a client waits to be adopted before it exits. */
export const DEFAULT_ORPHAN_TTL_MS = 60_000;

export interface ScriptedHostOptions<C extends ScriptedRecord = ScriptedRecord> {
  transport?: "stdio" | "websocket" | "socket";
  /** (socket) A host with no client for this long exits: nobody adopted it (default 60 s). */
  orphanTtlMs?: number;
  /** A full record, or overrides applied to `fullCapabilities()`. */
  capabilities?: C;
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

/** What one connection to a host has seen and holds. */
export interface HostConn {
  /** The last event sequence number taken from the host (replays at or below it are dropped). */
  lastSeq: number;
  leases: Set<HostLease>;
}

/**
 * The host spec the registry leases from, and the connection state of each channel it made. `deliver` takes the
 * host's events; `resumed` is told, after a reconnect, which sessions the host still runs.
 */
export function scriptedHostTransport(
  options: ScriptedHostOptions,
  caps: ProviderCapabilities,
  deliver: (frame: ProviderAdapterEvent) => void,
  resumed: (conn: HostConn, alive: ReadonlySet<string>) => void,
): { spec: HostSpec; connOf(channel: RpcChannel): HostConn | undefined } {
  const transport = options.transport ?? "stdio";
  const limits = resolveLimits(options.limits);
  const conns = new WeakMap<RpcChannel, HostConn>();
  const token = randomBytes(16).toString("hex");
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

  const listen = (channel: RpcChannel): HostConn => {
    const conn: HostConn = { lastSeq: 0, leases: new Set() };
    conns.set(channel, conn);
    channel.expectNotifications(["host.ready", "event"]);
    channel.onNotification((method, params) => {
      if (method !== "event") return;
      const read = hostEvent(params);
      if (!read.ok) {
        channel.ring.note("invalid_params", `event: ${read.why}`);
        // A turn's end in a frame of the wrong shape still ends the turn it names (failed: protocol_error).
        return read.ended && deliver(read.ended);
      }
      if (read.seq <= conn.lastSeq) return; // a replayed event already seen
      conn.lastSeq = read.seq;
      deliver(read.frame);
    });
    return conn;
  };

  /**
   * A WebSocket channel to a host, with the event listener, and the re-read after a reconnect:
   * replay what was missed, fail sessions the host no longer has, then reopen calls. Exhausted
   * reconnects: the registry sees the channel fail, declares the host lost and stops it.
   */
  const webSocketChannel = (url: string, ring: FrameRing): { channel: WebSocketChannel; conn: HostConn } => {
    const channel = new WebSocketChannel(
      url,
      ring,
      options.reconnect ?? { attempts: 3, backoffMs: [50, 200, 500] },
      options.limits,
    );
    const conn = listen(channel);
    channel.onReconnected = async () => {
      const state = checkReply(
        "resume",
        await channel.call("resume", { afterSeq: conn.lastSeq }, { bypassGate: true }),
      );
      resumed(conn, new Set(state.sessions.map((s) => s.sessionId)));
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
      conn.lastSeq = checkReply("attach", await channel.call("attach", {})).seq;
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
  return { spec, connOf: (channel) => conns.get(channel) };
}

/** A unix socket path must fit `sun_path` (108 bytes on Linux, 104 on macOS). */
const MAX_SOCKET_PATH_BYTES = 100;

/** ws's address of a WebSocket on a unix socket (the path, then the request path after a colon). */
const socketUrl = (endpoint: string): string => `ws+unix:${endpoint}:/`;

/**
 * The scripted host's replies, checked where the adapter reads them: the host is another process, and what it answers
 * is untrusted like any provider's. A reply of the wrong shape is a ProtocolError naming the call, never a value cast
 * to the contract's type and handed to the runtime, nor a raw ZodError.
 */

const Handle = z.object({ threadRef: z.string().nullable(), resumeCursor: z.string().min(1) });

const Snapshot = z.object({
  threadRef: z.string().nullable(),
  turns: z.array(
    z.object({
      turnRef: z.string().nullable(),
      status: z.union([TurnTerminalStatusSchema, z.literal("running")]),
      userText: z.string(),
      assistantText: z.string(),
    }),
  ),
});

/** What a call's reply resolves to: nothing (null on the wire) for the calls the runtime awaits only. */
const Nothing = z.unknown().transform(() => undefined);

/** Each call's reply as the adapter hands it on (unknown keys dropped: only what the contract says goes through). */
const REPLIES = {
  ensureProviderThread: Handle,
  sendRun: z.object({ turnRef: z.string().nullable(), thread: Handle.optional() }),
  steerRun: Nothing,
  interrupt: Nothing,
  isTurnAlive: z.boolean(),
  respondToRequest: Nothing,
  readThreadSnapshot: Snapshot,
  rollbackThread: z
    .object({ snapshot: Snapshot.optional(), handle: Handle.optional() })
    .nullable()
    .transform((r) => r ?? undefined),
  forkThread: Handle,
  summarize: z.string(),
  resume: ResumeResultSchema,
  attach: AttachResultSchema,
  reattach: ReattachResultSchema,
} as const;

export type CheckedCall = keyof typeof REPLIES;
export type CheckedReply<M extends CheckedCall> = z.output<(typeof REPLIES)[M]>;

/** A reply as the adapter reads it, or a ProtocolError naming the call and what did not match. */
export function checkReply<M extends CheckedCall>(method: M, reply: unknown): CheckedReply<M> {
  const parsed = (REPLIES[method] as z.ZodType).safeParse(reply);
  if (parsed.success) return parsed.data as CheckedReply<M>;
  const issues = parsed.error.issues.slice(0, 3).map((i) => `${i.path.join(".") || "(result)"}: ${i.message}`);
  throw new ProtocolError(
    `scripted host: ${method} answered a reply that does not match its schema: ${issues.join("; ")}`,
    { method },
  );
}
