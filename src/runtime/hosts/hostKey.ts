import { createHash } from "node:crypto";
import { realpath, stat } from "node:fs/promises";
import type { HostSpec } from "../../adapters/kit/hostSpec.js";
import type { SupervisorPolicy } from "../../machines/hostSupervisor.js";

/** The registry's side of a host spec: its defaults, and the key that says two hosts are interchangeable. */

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
