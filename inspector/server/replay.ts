import { readFile } from "node:fs/promises";
import { join } from "node:path";
import type { LogEntry } from "./protocol.js";

/**
 * Reads a data directory's event log without opening it as a runtime: no lock taken, nothing
 * written (a runtime may even be running on it). Stops at the first line that does not parse,
 * as the runtime would cut a torn last line.
 */
export async function readRecordedLog(dataDir: string): Promise<LogEntry[]> {
  const text = await readFile(join(dataDir, "events.jsonl"), "utf8");
  const records: LogEntry[] = [];
  for (const line of text.split("\n")) {
    if (line.trim() === "") continue;
    let record: LogEntry;
    try {
      record = JSON.parse(line) as LogEntry;
    } catch {
      break;
    }
    if (typeof record?.seq !== "number" || typeof record.event?.type !== "string") break;
    records.push(record);
  }
  return records;
}
