import { createHash } from "node:crypto";
import { realpath, stat } from "node:fs/promises";
import type { SupervisorPolicy } from "../../machines/hostSupervisor.js";
import type { SpawnedHost, SpawnSpec } from "./process.js";
import type { FrameRing } from "./ring.js";
import type { RpcChannel } from "./rpcChannel.js";

/** What an adapter tells the host registry: how its host starts and is reached (a spec); what it holds (a lease). */

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

export const DEFAULT_HOST_POLICY: SupervisorPolicy = {
  startupTimeoutMs: 15_000,
  idleTtlMs: 60_000,
  restartBudget: 3,
  restartWindowMs: 60_000,
  backoffMs: [100, 500, 2_000],
};

/** How long a host a previous life left running waits to be adopted before it is reaped. */
export const DEFAULT_ADOPTION_TTL_MS = 60_000;

export interface HostRegistryOptions {
  /** Adoptable hosts nobody claimed within this time are reaped (default 60 s). */
  adoptionTtlMs?: number;
}

/** Fingerprint of executable identity, target, projected configuration and (hashed) credentials. */
export async function hostKey(spec: HostSpec): Promise<string> {
  let executable = spec.identity.executable;
  try {
    const path = await realpath(executable);
    const info = await stat(path);
    executable = `${path}:${info.size}:${Math.trunc(info.mtimeMs)}`;
  } catch {
    // not a file path (a command on PATH): its name is its identity
  }
  const credentials = spec.identity.credentials
    ? createHash("sha256").update(spec.identity.credentials).digest("hex")
    : null;
  const material = JSON.stringify({ executable, target: spec.target, config: spec.identity.config, credentials });
  return `${spec.target}:${createHash("sha256").update(material).digest("hex").slice(0, 16)}`;
}
