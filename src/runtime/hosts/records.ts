import { join } from "node:path";
import { z } from "zod";
import { openStateDocument, type StateDocument } from "../store/documents.js";
import { isSameProcess, stopProcessGroup } from "./process.js";

/**
 * Durable records of the host processes this runtime started (pid, kernel start time,
 * command line). Written when a host starts, removed when it is gone. A runtime that
 * restarts after its own crash reaps the hosts its previous life left behind: only those
 * whose pid still runs with the recorded start time (a reused pid is never killed).
 */
export const HostRecordsSchema = z.strictObject({
  schemaVersion: z.literal(1),
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
    const doc = await openStateDocument(join(dataDir, "runtimes", "hosts.json"), HostRecordsSchema, () => ({ schemaVersion: 1 as const, hosts: [] }));
    return new HostRecordStore(doc);
  }

  get hosts(): readonly HostRecord[] {
    return this.doc.data.hosts;
  }

  add(record: HostRecord): Promise<void> {
    return this.doc.update((d) => void d.hosts.push(record));
  }

  remove(pid: number, generation: number): Promise<void> {
    return this.doc.update((d) => {
      d.hosts = d.hosts.filter((h) => !(h.pid === pid && h.generation === generation));
    });
  }

  /** Kills the hosts a previous life left running (matched by start time) and forgets every record. */
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
    await this.doc.update((d) => void (d.hosts = []));
    return { reaped, gone };
  }
}
