import type { ChildProcess } from "node:child_process";
import type { SupervisorPolicy } from "../../machines/hostSupervisor.js";
import type { FrameRing } from "./ring.js";
import type { RpcChannel } from "./rpcChannel.js";

/**
 * What an adapter tells the runtime's host registry: how its host starts and is reached (a spec); what it holds (a
 * lease). The registry owns the processes (start, reuse, idle release, crash, restart, reaping); the adapter only
 * leases them, through the `HostLeases` port it is handed at `bindHosts`.
 */

/** The runtime's host registry, as an adapter sees it. */
export interface HostLeases {
  /** A lease on a ready host for this spec: the one running when it matches, else a new one. */
  acquire(spec: HostSpec): Promise<HostLease>;
}

export interface HostSpec {
  target: string;
  /** What makes two hosts interchangeable; credentials enter the host key only as a hash. */
  identity: { executable: string; config: unknown; credentials?: string | null };
  /** How the next host is started: a new endpoint (spawn.endpoint) for each, where it has one. */
  spawn: SpawnSpec | (() => Promise<SpawnSpec>);
  /** Connects to a freshly spawned host and completes its handshake. */
  connect(host: SpawnedHost, ring: FrameRing): Promise<RpcChannel>;
  /**
   * Connects to a host a previous life of the runtime started, still listening at its recorded
   * endpoint, and takes it up (no second init). Without it, such a host is never adopted.
   */
  adopt?(endpoint: string, ring: FrameRing): Promise<RpcChannel>;
  policy?: Partial<SupervisorPolicy>;
  /** How long a stopping host gets between SIGTERM and SIGKILL. */
  stopGraceMs?: number;
  /** Values to mask in diagnostics (tokens handed to the host). */
  secrets?: string[];
  /** Liveness probe of a ready host (default every 15 s, 10 s to answer; `intervalMs: 0` turns it off). */
  heartbeat?: { intervalMs?: number; timeoutMs?: number };
}

export interface HostLease {
  readonly generation: number;
  readonly pid: number;
  readonly channel: RpcChannel;
  readonly ring: FrameRing;
  /** Gives the lease back (idempotent); the host is released after its idle TTL when none is left. */
  release(): void;
  /** Called once if this generation dies or is declared unreachable, with a report. */
  onLost(listener: (report: string) => void): void;
}

export interface SpawnSpec {
  command: string;
  args: string[];
  /**
   * What the host gets beyond the allowlisted part of the embedder's environment
   * (environment.ts): the adapter's settings and the embedder's `env` option. Never the whole
   * environment: `spawnHost` starts every host with `hostEnvironment(env, inherit)`.
   */
  env: Record<string, string>;
  /** Names beyond the allowlist the host inherits when set (a provider's home variable, never a credential). */
  inherit?: string[];
  cwd?: string;
  /**
   * Where the host listens on its own (a unix socket path), for a host that outlives the
   * runtime: recorded with the host, so the runtime's next life can adopt it there.
   */
  endpoint?: string;
}

export interface SpawnedHost {
  child: ChildProcess;
  pid: number;
  /** Resolves once the process exited and its output was drained (listened for from the first moment). */
  exited: Promise<{ code: number | null; signal: NodeJS.Signals | null }>;
  /** Kernel start time of the process (clock ticks since boot), or null where unknown. */
  startTime: string | null;
  commandLine: string;
  /** The spawn spec's endpoint, or null. */
  endpoint: string | null;
}
