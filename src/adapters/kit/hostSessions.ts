import { HostUnavailableError } from "../../domain/errors.js";
import type { HostLease, HostLeases, HostSpec } from "./hostSpec.js";

/**
 * The provider sessions an adapter runs in leased hosts: one lease per session, given back
 * when the session stops; a host that dies ends its sessions (`lost` is told, with the
 * host's report), and a session the adapter forgot is never ended twice.
 */
export class HostSessions {
  #hosts: HostLeases | null = null;
  #leases = new Map<string, HostLease>();

  constructor(
    private readonly provider: string,
    private readonly lost: (sessionId: string, report: string) => void,
  ) {}

  bind(hosts: HostLeases): void {
    this.#hosts = hosts;
  }

  /** A lease on the spec's host that belongs to no session (a pre-warm): the caller gives it back. */
  async acquire(spec: HostSpec): Promise<HostLease> {
    if (!this.#hosts)
      throw new HostUnavailableError(`the ${this.provider} adapter runs only inside a runtime (no host registry)`);
    return this.#hosts.acquire(spec);
  }

  /** Leases a host for a new session. */
  async open(sessionId: string, spec: HostSpec): Promise<HostLease> {
    const lease = await this.acquire(spec);
    this.#leases.set(sessionId, lease);
    lease.onLost((report) => {
      if (this.#leases.get(sessionId) !== lease) return;
      this.#leases.delete(sessionId);
      this.lost(sessionId, report);
    });
    return lease;
  }

  /** The session's lease; a session that is gone is `host_unavailable`. */
  lease(sessionId: string): HostLease {
    const lease = this.#leases.get(sessionId);
    if (!lease) throw new HostUnavailableError(`${this.provider} session ${sessionId} is not running`, { sessionId });
    return lease;
  }

  find(sessionId: string): HostLease | undefined {
    return this.#leases.get(sessionId);
  }

  /** Forgets the session and returns its lease, still held: release it after any goodbye to the host. */
  take(sessionId: string): HostLease | undefined {
    const lease = this.#leases.get(sessionId);
    this.#leases.delete(sessionId);
    return lease;
  }

  entries(): Array<[string, HostLease]> {
    return [...this.#leases];
  }

  pid(sessionId: string): number | null {
    return this.#leases.get(sessionId)?.pid ?? null;
  }
}
