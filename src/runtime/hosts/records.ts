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
   * announced ones found by their instance marker) and forgets every record and announcement.
   */
  async reapOrphans(graceMs: number): Promise<{ reaped: HostRecord[]; gone: HostRecord[] }> {
    const reaped: HostRecord[] = [];
    const gone: HostRecord[] = [];
    for (const record of this.hosts) {
      if (await isSameProcess(record.pid, record.startTime)) {
        await stopProcessGroup(record.pid, graceMs);
        reaped.push(record);
      } else {
        gone.push(record);
      }
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
      d.hosts = [];
      d.spawning = [];
    });
    return { reaped, gone };
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
