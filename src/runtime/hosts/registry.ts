import { randomBytes } from "node:crypto";
import { createActor, fromPromise, type Actor, type InspectionEvent } from "xstate";
import { HostUnavailableError } from "../../domain/errors.js";
import { hostSupervisorMachine, type SupervisorEmitted } from "../../machines/hostSupervisor.js";
import type { RpcChannel } from "../../adapters/kit/rpcChannel.js";
import { isSameProcess, killGroup, processGone, spawnHost, stopProcessGroup } from "./process.js";
import type { HostLease, HostLeases, HostSpec } from "../../adapters/kit/hostSpec.js";
import { DEFAULT_ADOPTION_TTL_MS, DEFAULT_HOST_POLICY, hostKey, type HostRegistryOptions } from "./hostKey.js";
import { HOST_INSTANCE_VARIABLE, HostRecordStore, type HostRecord } from "./records.js";
import { FrameRing } from "../../adapters/kit/ring.js";

/**
 * The runtime's host processes: one supervisor actor per host key. Adapters describe how to
 * start and talk to their host (a HostSpec) and hold leases; the registry owns the processes,
 * their durable records, and what happens when one dies or becomes unreachable.
 *
 * A host with an endpoint of its own (a unix socket) survives a crash of the runtime. The next
 * life holds it as adoptable (`open` says which) instead of reaping it: the first `acquire` of
 * its host key whose spec can `adopt` takes it up, same process and same generation, and it is
 * supervised from then on like a host this life started. Nobody claims it within the adoption
 * TTL, or before `close`: it is reaped.
 */

/** Grace between SIGTERM and SIGKILL for hosts a previous life left behind. */
const ORPHAN_GRACE_MS = 2_000;

interface LiveProcess {
  alive: boolean;
  pid: number;
  ring: FrameRing;
  channel: RpcChannel | null;
  exited: Promise<void>;
  lost: Set<(report: string) => void>;
}

interface Entry {
  spec: HostSpec;
  /** The surviving host this entry adopts on its first start, if any. */
  adopting: HostRecord | null;
  actor: Actor<typeof hostSupervisorMachine>;
  processes: Map<number, LiveProcess>;
  waiters: Array<{ resolve: (lease: HostLease) => void; reject: (error: Error) => void }>;
}

export class HostRegistry implements HostLeases {
  #entries = new Map<string, Entry>();
  #stopping = new Set<Promise<void>>();
  #closed = false;
  /** Hosts a previous life left running that may still be adopted, by host key. */
  #adoptable = new Map<string, HostRecord>();
  #adoptionTimer: NodeJS.Timeout | undefined;

  private constructor(
    private readonly records: HostRecordStore,
    private readonly inspect?: (event: InspectionEvent) => void,
  ) {}

  /**
   * Opens the host records of a data directory and reaps what a crashed previous life left
   * running, except the hosts that can be adopted (`adoptable`, reaped if unclaimed after
   * `adoptionTtlMs`).
   */
  static async open(
    dataDir: string,
    inspect?: (event: InspectionEvent) => void,
    options: HostRegistryOptions = {},
  ): Promise<{ registry: HostRegistry; reaped: HostRecord[]; adoptable: HostRecord[] }> {
    const records = await HostRecordStore.open(dataDir);
    const { reaped, adoptable } = await records.reapOrphans(ORPHAN_GRACE_MS, { keepAdoptable: true });
    const registry = new HostRegistry(records, inspect);
    for (const record of adoptable) registry.#adoptable.set(record.hostKey, record);
    if (adoptable.length > 0) {
      registry.#adoptionTimer = setTimeout(
        () => registry.#reapUnclaimed(),
        options.adoptionTtlMs ?? DEFAULT_ADOPTION_TTL_MS,
      );
      registry.#adoptionTimer.unref();
    }
    return { registry, reaped, adoptable };
  }

  /** Pids of the hosts still waiting to be adopted (tests and diagnostics). */
  get adoptablePids(): number[] {
    return [...this.#adoptable.values()].map((r) => r.pid);
  }

  /** The supervisor actors, by host key (for the inspector and tests). */
  get supervisors(): ReadonlyMap<string, Actor<typeof hostSupervisorMachine>> {
    return new Map([...this.#entries].map(([key, entry]) => [key, entry.actor]));
  }

  /** Live host pids by host key (tests and diagnostics). */
  pids(hostKey: string): number[] {
    return [...(this.#entries.get(hostKey)?.processes.values() ?? [])].filter((p) => p.alive).map((p) => p.pid);
  }

  async acquire(spec: HostSpec): Promise<HostLease> {
    const key = await hostKey(spec);
    if (this.#closed) throw new HostUnavailableError(`${spec.target}: the runtime is closing`, { target: spec.target });
    let entry = this.#entries.get(key);
    // Only a new entry adopts: its generations start from the adopted one, never reusing one of this life.
    const adopting = !entry && spec.adopt ? this.#claim(key) : null;
    entry ??= this.#create(key, spec, adopting);
    const started = entry;
    return new Promise<HostLease>((resolve, reject) => {
      started.waiters.push({ resolve, reject });
      started.actor.send(adopting ? { type: "ADOPT", generation: adopting.generation } : { type: "ACQUIRE" });
      this.#grant(started);
    });
  }

  /** Takes an adoptable host out of the waiting list: from now on it is this entry's to adopt (or reap). */
  #claim(key: string): HostRecord | null {
    const record = this.#adoptable.get(key) ?? null;
    this.#adoptable.delete(key);
    if (this.#adoptable.size === 0) clearTimeout(this.#adoptionTimer);
    return record;
  }

  /**
   * Recovery took up what it could: the hosts a previous life left that nobody claimed are reaped now (a later start
   * must not adopt a host whose turns nobody owns). Returns them.
   */
  endAdoption(): HostRecord[] {
    const unclaimed = [...this.#adoptable.values()];
    this.#reapUnclaimed();
    return unclaimed;
  }

  /** Reaps the adoptable hosts nobody claimed (their TTL ran out, recovery ended, or the runtime closes). */
  #reapUnclaimed(): void {
    clearTimeout(this.#adoptionTimer);
    for (const record of this.#adoptable.values()) this.#write(this.records.reap(record, ORPHAN_GRACE_MS));
    this.#adoptable.clear();
  }

  /** Stops every host (SIGTERM, then SIGKILL after the grace) and waits until they are gone. */
  async close(): Promise<void> {
    this.#closed = true;
    this.#reapUnclaimed();
    for (const entry of this.#entries.values()) {
      const closing = new HostUnavailableError(`${entry.spec.target}: the runtime is closing`);
      for (const waiter of entry.waiters.splice(0)) waiter.reject(closing);
      entry.actor.send({ type: "STOP" });
      for (const generation of entry.processes.keys()) this.#stopProcess(entry, generation);
      entry.actor.stop();
    }
    await Promise.allSettled([...this.#stopping]);
  }

  #create(key: string, spec: HostSpec, adopting: HostRecord | null): Entry {
    const policy = { ...DEFAULT_HOST_POLICY, ...spec.policy };
    const entry = { spec, adopting, processes: new Map(), waiters: [] } as unknown as Entry;
    const machine = hostSupervisorMachine.provide({
      actors: {
        startHost: fromPromise(({ input }) => this.#start(entry, input.generation, input.timeoutMs)),
        adoptHost: fromPromise(({ input }) => this.#adopt(entry, input.generation, input.timeoutMs)),
      },
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
    const spawnSpec = typeof spec.spawn === "function" ? await spec.spawn() : spec.spawn;
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
      ...spawnSpec,
      env: { ...spawnSpec.env, [HOST_INSTANCE_VARIABLE]: instance },
    }).catch((error: unknown) => {
      this.#write(this.records.withdraw(instance));
      throw error;
    });
    const ring = new FrameRing(200, 64 * 1024, 2 * 1024, spec.secrets ?? []);
    const exited = spawned.exited.then(() => undefined);
    const live: LiveProcess = { alive: true, pid: spawned.pid, ring, channel: null, exited, lost: new Set() };
    entry.processes.set(generation, live);
    void spawned.exited.then(({ code, signal }) => this.#exited(entry, generation, live, signal ?? `code ${code}`));
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
          endpoint: spawned.endpoint,
        },
        instance,
      ),
    );
    if (this.#closed) {
      this.#stopProcess(entry, generation);
      throw new HostUnavailableError(`${spec.target}: the runtime is closing`);
    }
    await this.#connect(entry, generation, live, spec.connect(spawned, ring), timeoutMs, "startup");
  }

  /**
   * Takes up the host a previous life left running (claimed by this entry), under its recorded
   * generation. If it cannot be (gone, connection refused, handshake failed), that process is
   * reaped by pid and start time before the supervisor starts a fresh one.
   */
  async #adopt(entry: Entry, generation: number, timeoutMs: number): Promise<void> {
    const { spec } = entry;
    const record = entry.adopting!;
    entry.adopting = null;
    const ring = new FrameRing(200, 64 * 1024, 2 * 1024, spec.secrets ?? []);
    try {
      if (!spec.adopt || !record.endpoint || !(await isSameProcess(record.pid, record.startTime)))
        throw new HostUnavailableError(`${spec.target} host ${record.pid} is gone: nothing to adopt`);
      // Not our child: no exit event comes; its pid (with its start time) is watched instead.
      const exited = processGone(record.pid, record.startTime);
      const live: LiveProcess = { alive: true, pid: record.pid, ring, channel: null, exited, lost: new Set() };
      entry.processes.set(generation, live);
      void exited.then(() => this.#exited(entry, generation, live, "gone"));
      await this.#connect(entry, generation, live, spec.adopt(record.endpoint, ring), timeoutMs, "adoption");
    } catch (error) {
      entry.processes.delete(generation);
      const reaping = this.records.reap(record, spec.stopGraceMs ?? ORPHAN_GRACE_MS);
      this.#write(reaping); // `close()` waits for it too
      await reaping;
      throw error;
    }
  }

  /**
   * Waits for the host's channel (bounded by `timeoutMs`, failed by the process's exit), then
   * watches it: a connection that fails for good loses the host; a silent host is probed.
   */
  async #connect(
    entry: Entry,
    generation: number,
    live: LiveProcess,
    connecting: Promise<RpcChannel>,
    timeoutMs: number,
    what: "startup" | "adoption",
  ): Promise<void> {
    const { spec } = entry;
    let timer: NodeJS.Timeout | undefined;
    const timeout = new Promise<never>((_, reject) => {
      timer = setTimeout(
        () => reject(new HostUnavailableError(`${spec.target} host did not become ready within ${timeoutMs} ms`)),
        timeoutMs,
      );
    });
    const died = live.exited.then(() =>
      Promise.reject(
        new HostUnavailableError(`${spec.target} host exited during ${what}:\n${live.ring.tail(5).join("\n")}`),
      ),
    );
    try {
      const channel = await Promise.race([connecting, timeout, died]);
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

  /** A host process is gone: whatever it started goes too, its channel fails, and the supervisor hears it. */
  #exited(entry: Entry, generation: number, live: LiveProcess, how: string): void {
    live.alive = false;
    // Whatever the host started (its agent CLI...) dies with it: nothing of a dead host keeps running.
    killGroup(live.pid);
    // Exits of stopped processes are not reported as losses: forget them now.
    const snapshot = entry.actor.getSnapshot();
    if (!snapshot.matches("ready") || snapshot.context.generation !== generation) entry.processes.delete(generation);
    live.channel?.fail(new HostUnavailableError(`${entry.spec.target} host exited (${how})`));
    this.#write(this.records.remove(live.pid, generation));
    if (snapshot.status === "active")
      entry.actor.send({ type: "EXITED", generation, reason: `host process exited (${how})` });
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
      pid: live.pid,
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
    const stopping = stopProcessGroup(live.pid, entry.spec.stopGraceMs ?? 2_000).then(() => live.exited);
    this.#stopping.add(stopping);
    void stopping.finally(() => this.#stopping.delete(stopping));
  }
}
