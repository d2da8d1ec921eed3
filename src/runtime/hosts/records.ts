import { readdirSync, readFileSync } from "node:fs";
import { join } from "node:path";
import { z } from "zod";
import { openStateDocument, type StateDocument } from "../store/documents.js";
import { isSameProcess, processStartTime, stopProcessGroup } from "./process.js";

/**
 * Durable records of the host processes this runtime started (pid, kernel start time,
 * command line). Written when a host starts, removed when it is gone. A runtime that
 * restarts after its own crash reaps the hosts its previous life left behind: only those
 * whose pid still runs with the recorded start time (a reused pid is never killed).
 *
 * A pid is known only once the process exists, and a runtime can die between the fork and
 * the record (a WebSocket host does not notice, and would run forever). So a start is
 * announced durably first, under a random instance marker the host then carries in its
 * environment (HOST_INSTANCE_VARIABLE); the record that follows replaces the announcement.
 * An announcement still there at the next open names a host that may run unrecorded: it is
 * looked for by its marker (Linux: /proc/<pid>/environ) and reaped.
 *
 * A host that listens at an endpoint of its own (a unix socket; never a token: the socket's
 * file permissions admit the runtime's user only) can outlive the runtime: its record names the
 * endpoint, and the next life may adopt it there instead of reaping it.
 */
export const HOST_INSTANCE_VARIABLE = "TILLER_HOST_INSTANCE";

const SpawningSchema = z.strictObject({
  instance: z.string().regex(/^[0-9a-f]{16,64}$/),
  hostKey: z.string(),
  target: z.string(),
  generation: z.number().int(),
  announcedAt: z.string(),
});
export type HostSpawning = z.infer<typeof SpawningSchema>;

export const HostRecordsSchema = z.strictObject({
  schemaVersion: z.literal(1),
  /** Starts announced and not yet recorded. */
  spawning: z.array(SpawningSchema),
  hosts: z.array(
    z.strictObject({
      hostKey: z.string(),
      target: z.string(),
      generation: z.number().int(),
      pid: z.number().int(),
      startTime: z.string().nullable(),
      commandLine: z.string(),
      startedAt: z.string(),
      /** Where the host listens (a unix socket path); absent or null: it cannot be adopted. */
      endpoint: z.string().nullable().optional(),
    }),
  ),
});
export type HostRecords = z.infer<typeof HostRecordsSchema>;
export type HostRecord = HostRecords["hosts"][number];

export class HostRecordStore {
  private constructor(private readonly doc: StateDocument<HostRecords>) {}

  static async open(dataDir: string): Promise<HostRecordStore> {
    const doc = await openStateDocument(join(dataDir, "runtimes", "hosts.json"), HostRecordsSchema, () => ({
      schemaVersion: 1 as const,
      spawning: [],
      hosts: [],
    }));
    return new HostRecordStore(doc);
  }

  get hosts(): readonly HostRecord[] {
    return this.doc.data.hosts;
  }

  /** Durable before the host is spawned: a crash from here on leaves a trace of it. */
  announce(spawning: HostSpawning): Promise<void> {
    return this.doc.update((d) => void (d.spawning = [...d.spawning, spawning]));
  }

  /** The host's record, replacing its announcement (by instance) in the same write. */
  add(record: HostRecord, instance?: string): Promise<void> {
    return this.doc.update((d) => {
      d.hosts.push(record);
      if (instance !== undefined) d.spawning = d.spawning.filter((s) => s.instance !== instance);
    });
  }

  /** An announced start that made no process (the spawn failed). */
  withdraw(instance: string): Promise<void> {
    return this.doc.update((d) => void (d.spawning = d.spawning.filter((s) => s.instance !== instance)));
  }

  remove(pid: number, generation: number): Promise<void> {
    return this.doc.update((d) => {
      d.hosts = d.hosts.filter((h) => !(h.pid === pid && h.generation === generation));
    });
  }

  /**
   * Kills the hosts a previous life left running (recorded ones matched by start time,
   * announced ones found by their instance marker) and forgets them. With `keepAdoptable`, a
   * live recorded host with an endpoint is spared and stays recorded (the newest generation of
   * its host key; older ones are reaped): it is returned as adoptable.
   */
  async reapOrphans(
    graceMs: number,
    { keepAdoptable = false }: { keepAdoptable?: boolean } = {},
  ): Promise<{ reaped: HostRecord[]; gone: HostRecord[]; adoptable: HostRecord[] }> {
    const reaped: HostRecord[] = [];
    const gone: HostRecord[] = [];
    const adoptable = new Map<string, HostRecord>();
    const live: HostRecord[] = [];
    for (const record of this.hosts) {
      if (await isSameProcess(record.pid, record.startTime)) live.push(record);
      else gone.push(record);
    }
    for (const record of live) {
      const kept = adoptable.get(record.hostKey);
      if (keepAdoptable && record.endpoint && (!kept || kept.generation < record.generation))
        adoptable.set(record.hostKey, record);
    }
    const spared = new Set(adoptable.values());
    for (const record of live) {
      if (spared.has(record)) continue;
      await stopProcessGroup(record.pid, graceMs);
      reaped.push(record);
    }
    const announced = this.doc.data.spawning;
    if (announced.length > 0) {
      for (const found of await processesMarked(announced)) {
        if (!(await isSameProcess(found.pid, found.startTime))) continue;
        await stopProcessGroup(found.pid, graceMs);
        reaped.push(found);
      }
    }
    await this.doc.update((d) => {
      d.hosts = [...spared];
      d.spawning = [];
    });
    return { reaped, gone, adoptable: [...spared] };
  }

  /** Stops a recorded host if it is still the very process recorded (pid and start time), and forgets it. */
  async reap(record: HostRecord, graceMs: number): Promise<void> {
    if (await isSameProcess(record.pid, record.startTime)) await stopProcessGroup(record.pid, graceMs);
    await this.remove(record.pid, record.generation);
  }
}

/**
 * Live processes whose initial environment carries one of these announcements' markers
 * (readable for our own processes; elsewhere, or without /proc, none is found).
 */
async function processesMarked(announced: readonly HostSpawning[]): Promise<HostRecord[]> {
  const byMarker = new Map(announced.map((a) => [`${HOST_INSTANCE_VARIABLE}=${a.instance}`, a]));
  let entries: string[];
  try {
    entries = readdirSync("/proc").filter((e) => /^\d+$/.test(e));
  } catch {
    return [];
  }
  const found: HostRecord[] = [];
  for (const entry of entries) {
    const pid = Number(entry);
    if (pid === process.pid) continue;
    let environ: string[];
    try {
      environ = readFileSync(`/proc/${pid}/environ`, "utf8").split("\0");
    } catch {
      continue; // gone, or not ours
    }
    const announcement = environ.map((v) => byMarker.get(v)).find((a) => a !== undefined);
    if (!announcement) continue;
    const startTime = await processStartTime(pid);
    if (startTime === null) continue;
    let commandLine = "";
    try {
      commandLine = readFileSync(`/proc/${pid}/cmdline`, "utf8").split("\0").join(" ").trim();
    } catch {
      // gone meanwhile: its stop below finds nothing
    }
    const { hostKey, target, generation, announcedAt } = announcement;
    found.push({ hostKey, target, generation, pid, startTime, commandLine, startedAt: announcedAt });
  }
  return found;
}
