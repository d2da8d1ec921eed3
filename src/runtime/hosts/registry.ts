import { createHash, randomBytes } from "node:crypto";
import { realpath, stat } from "node:fs/promises";
import { createActor, fromPromise, type Actor, type InspectionEvent } from "xstate";
import { HostUnavailableError } from "../../domain/errors.js";
import { hostSupervisorMachine, type SupervisorEmitted, type SupervisorPolicy } from "../../machines/hostSupervisor.js";
import type { RpcChannel } from "./rpcChannel.js";
import { killGroup, spawnHost, stopProcessGroup, type SpawnedHost, type SpawnSpec } from "./process.js";
import { HOST_INSTANCE_VARIABLE, HostRecordStore, type HostRecord } from "./records.js";
import { FrameRing } from "./ring.js";

/**
 * The runtime's host processes: one supervisor actor per host key. Adapters describe how to
 * start and talk to their host (a HostSpec) and hold leases; the registry owns the processes,
 * their durable records, and what happens when one dies or becomes unreachable.
 */

export interface HostSpec {
  target: string;
  /** What makes two hosts interchangeable; credentials enter the host key only as a hash. */
  identity: { executable: string; config: unknown; credentials?: string | null };
  spawn: SpawnSpec;
  /** Connects to a freshly spawned host and completes its handshake. */
  connect(host: SpawnedHost, ring: FrameRing): Promise<RpcChannel>;
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

interface LiveProcess {
  alive: boolean;
  spawned: SpawnedHost;
  ring: FrameRing;
  channel: RpcChannel | null;
  exited: Promise<void>;
  lost: Set<(report: string) => void>;
}

interface Entry {
  spec: HostSpec;
  actor: Actor<typeof hostSupervisorMachine>;
  processes: Map<number, LiveProcess>;
  waiters: Array<{ resolve: (lease: HostLease) => void; reject: (error: Error) => void }>;
}

export class HostRegistry {
  #entries = new Map<string, Entry>();
  #stopping = new Set<Promise<void>>();
  #closed = false;

  private constructor(
    private readonly records: HostRecordStore,
    private readonly inspect?: (event: InspectionEvent) => void,
  ) {}

  /** Opens the host records of a data directory and reaps what a crashed previous life left running. */
  static async open(
    dataDir: string,
    inspect?: (event: InspectionEvent) => void,
  ): Promise<{ registry: HostRegistry; reaped: HostRecord[] }> {
    const records = await HostRecordStore.open(dataDir);
    const { reaped } = await records.reapOrphans(2_000);
    return { registry: new HostRegistry(records, inspect), reaped };
  }

  /** The supervisor actors, by host key (for the inspector and tests). */
  get supervisors(): ReadonlyMap<string, Actor<typeof hostSupervisorMachine>> {
    return new Map([...this.#entries].map(([key, entry]) => [key, entry.actor]));
  }

  /** Live host pids by host key (tests and diagnostics). */
  pids(hostKey: string): number[] {
    return [...(this.#entries.get(hostKey)?.processes.values() ?? [])].filter((p) => p.alive).map((p) => p.spawned.pid);
  }

  /** Fingerprint of executable identity, target, projected configuration and (hashed) credentials. */
  static async hostKey(spec: HostSpec): Promise<string> {
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

  async acquire(spec: HostSpec): Promise<HostLease> {
    const key = await HostRegistry.hostKey(spec);
    if (this.#closed) throw new HostUnavailableError(`${spec.target}: the runtime is closing`, { target: spec.target });
    const entry = this.#entries.get(key) ?? this.#create(key, spec);
    return new Promise<HostLease>((resolve, reject) => {
      entry.waiters.push({ resolve, reject });
      entry.actor.send({ type: "ACQUIRE" });
      this.#grant(entry);
    });
  }

  /** Stops every host (SIGTERM, then SIGKILL after the grace) and waits until they are gone. */
  async close(): Promise<void> {
    this.#closed = true;
    for (const entry of this.#entries.values()) {
      const closing = new HostUnavailableError(`${entry.spec.target}: the runtime is closing`);
      for (const waiter of entry.waiters.splice(0)) waiter.reject(closing);
      entry.actor.send({ type: "STOP" });
      for (const generation of entry.processes.keys()) this.#stopProcess(entry, generation);
      entry.actor.stop();
    }
    await Promise.allSettled([...this.#stopping]);
  }

  #create(key: string, spec: HostSpec): Entry {
    const policy = { ...DEFAULT_HOST_POLICY, ...spec.policy };
    const entry = { spec, processes: new Map(), waiters: [] } as unknown as Entry;
    const machine = hostSupervisorMachine.provide({
      actors: { startHost: fromPromise(({ input }) => this.#start(entry, input.generation, input.timeoutMs)) },
    });
    entry.actor = createActor(machine, {
      id: `host:${key}`,
      input: { hostKey: key, target: spec.target, policy },
      ...(this.inspect ? { inspect: this.inspect } : {}),
    });
    entry.actor.on("*", (emitted: SupervisorEmitted) => this.#onEmitted(entry, emitted));
    this.#entries.set(key, entry);
    entry.actor.start();
    return entry;
  }

  async #start(entry: Entry, generation: number, timeoutMs: number): Promise<void> {
    const { spec } = entry;
    const hostKey = entry.actor.getSnapshot().context.hostKey;
    // Announced durably before the fork, under a marker the host carries: a runtime killed
    // before the record below is written still leaves what its next life needs to reap it.
    const instance = randomBytes(16).toString("hex");
    const announced = this.records.announce({
      instance,
      hostKey,
      target: spec.target,
      generation,
      announcedAt: new Date().toISOString(),
    });
    this.#write(announced);
    await announced;
    const spawned = await spawnHost({
      ...spec.spawn,
      env: { ...spec.spawn.env, [HOST_INSTANCE_VARIABLE]: instance },
    }).catch((error: unknown) => {
      this.#write(this.records.withdraw(instance));
      throw error;
    });
    const ring = new FrameRing(200, 64 * 1024, 2 * 1024, spec.secrets ?? []);
    const exited = spawned.exited.then(() => undefined);
    const live: LiveProcess = { alive: true, spawned, ring, channel: null, exited, lost: new Set() };
    entry.processes.set(generation, live);
    void spawned.exited.then(({ code, signal }) => {
      live.alive = false;
      // Whatever the host started (its agent CLI...) dies with it: nothing of a dead host keeps running.
      killGroup(spawned.pid);
      // Exits of stopped processes are not reported as losses: forget them now.
      const snapshot = entry.actor.getSnapshot();
      if (!snapshot.matches("ready") || snapshot.context.generation !== generation) entry.processes.delete(generation);
      live.channel?.fail(new HostUnavailableError(`${spec.target} host exited (${signal ?? `code ${code}`})`));
      this.#write(this.records.remove(spawned.pid, generation));
      if (snapshot.status === "active")
        entry.actor.send({ type: "EXITED", generation, reason: `host process exited (${signal ?? `code ${code}`})` });
    });
    // Recorded before anything else can happen to it (its exit, queued after, removes the record).
    this.#write(
      this.records.add(
        {
          hostKey,
          target: spec.target,
          generation,
          pid: spawned.pid,
          startTime: spawned.startTime,
          commandLine: spawned.commandLine,
          startedAt: new Date().toISOString(),
        },
        instance,
      ),
    );
    if (this.#closed) {
      this.#stopProcess(entry, generation);
      throw new HostUnavailableError(`${spec.target}: the runtime is closing`);
    }
    let timer: NodeJS.Timeout | undefined;
    const timeout = new Promise<never>((_, reject) => {
      timer = setTimeout(
        () => reject(new HostUnavailableError(`${spec.target} host did not become ready within ${timeoutMs} ms`)),
        timeoutMs,
      );
    });
    const died = exited.then(() =>
      Promise.reject(
        new HostUnavailableError(`${spec.target} host exited during startup:\n${ring.tail(5).join("\n")}`),
      ),
    );
    try {
      const channel = await Promise.race([spec.connect(spawned, ring), timeout, died]);
      live.channel = channel;
      // A connection that fails for good (reconnects exhausted, a frame over its cap) loses the host, leases or not.
      channel.onFailed((error) => {
        if (live.alive && entry.actor.getSnapshot().status === "active")
          entry.actor.send({ type: "LOST", generation, reason: `host connection failed: ${error.message}` });
      });
      this.#watch(entry, generation, live);
    } finally {
      clearTimeout(timer);
    }
  }

  /**
   * A host that is alive but answers nothing would leave its runs running forever: probe it.
   * Any reply counts (an unknown-method error too); no reply in time makes the host lost,
   * which stops it and fails its sessions' runs.
   */
  #watch(entry: Entry, generation: number, live: LiveProcess): void {
    const intervalMs = entry.spec.heartbeat?.intervalMs ?? 15_000;
    const timeoutMs = entry.spec.heartbeat?.timeoutMs ?? 10_000;
    if (intervalMs <= 0) return;
    let probing = false;
    const timer = setInterval(() => {
      if (!live.alive || !live.channel || live.channel.failed || this.#closed) return void clearInterval(timer);
      if (probing) return;
      probing = true;
      live.channel
        .call("$/tiller/ping", {}, { bypassGate: true, timeoutMs })
        .catch((error: unknown) => {
          const silent = error instanceof HostUnavailableError && /did not answer/.test(error.message);
          if (silent && live.alive && entry.actor.getSnapshot().status === "active") {
            clearInterval(timer);
            entry.actor.send({
              type: "LOST",
              generation,
              reason: `host unresponsive: no answer to a liveness probe within ${timeoutMs} ms`,
            });
          }
        })
        .finally(() => (probing = false));
    }, intervalMs);
    timer.unref();
    void live.exited.then(() => clearInterval(timer));
  }

  /** Record writes in flight: `close()` waits for them before the directory is unlocked. */
  #write(write: Promise<void>): void {
    const tracked = write.catch(() => undefined);
    this.#stopping.add(tracked);
    void tracked.finally(() => this.#stopping.delete(tracked));
  }

  #onEmitted(entry: Entry, emitted: SupervisorEmitted): void {
    switch (emitted.type) {
      case "ready":
        return this.#grant(entry);
      case "unavailable": {
        const error = new HostUnavailableError(emitted.reason, { target: entry.spec.target });
        for (const waiter of entry.waiters.splice(0)) waiter.reject(error);
        return;
      }
      case "lost": {
        const live = entry.processes.get(emitted.generation);
        const report = `${emitted.reason}${live ? `\nrecent host frames:\n${live.ring.tail(10).join("\n")}` : ""}`;
        for (const listener of live?.lost ?? []) listener(report);
        if (live && !live.alive) entry.processes.delete(emitted.generation);
        return;
      }
      case "stopProcess":
        return this.#stopProcess(entry, emitted.generation);
    }
  }

  /** Waiters get leases while the supervisor is ready. */
  #grant(entry: Entry): void {
    const snapshot = entry.actor.getSnapshot();
    if (!snapshot.matches("ready")) return;
    const { generation } = snapshot.context;
    const live = entry.processes.get(generation);
    if (!live?.alive || !live.channel || live.channel.failed) return;
    for (const waiter of entry.waiters.splice(0)) waiter.resolve(this.#lease(entry, generation, live));
  }

  #lease(entry: Entry, generation: number, live: LiveProcess): HostLease {
    let released = false;
    return {
      generation,
      pid: live.spawned.pid,
      channel: live.channel!,
      ring: live.ring,
      release: () => {
        if (released) return;
        released = true;
        entry.actor.send({ type: "RELEASE", generation });
      },
      onLost: (listener) => void live.lost.add(listener),
    };
  }

  #stopProcess(entry: Entry, generation: number): void {
    const live = entry.processes.get(generation);
    if (!live?.alive) return;
    (live.channel as { close?: () => void } | null)?.close?.();
    const stopping = stopProcessGroup(live.spawned.pid, entry.spec.stopGraceMs ?? 2_000).then(() => live.exited);
    this.#stopping.add(stopping);
    void stopping.finally(() => this.#stopping.delete(stopping));
  }
}
