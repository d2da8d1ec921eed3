import { join } from "node:path";
import type { DomainEvent } from "../../src/domain/events.js";
import { Projections } from "../../src/runtime/projections.js";
import { SnapshotWriter } from "../../src/runtime/snapshots/writer.js";
import { EventLog } from "../../src/runtime/store/eventLog.js";

/** The data directory identity the store-level snapshot tests name (a runtime's is in its runtime.json). */
export const TEST_DIRECTORY = "0123456789abcdef0123456789abcdef";

/**
 * A log in `dir` and projections folded as the dispatcher does (append, then fold: `append`), with a snapshot writer
 * over them; `errors` collects what the writer could not write.
 */
export async function foldedLog(dir: string, options: { everyRecords?: number } = {}) {
  const logFile = join(dir, "events.jsonl");
  const log = await EventLog.open<DomainEvent>(logFile, { groupWindowMs: 0 });
  const views = new Projections();
  const errors: unknown[] = [];
  const writer = SnapshotWriter.start({
    dataDir: dir,
    directory: TEST_DIRECTORY,
    logFile,
    log,
    views,
    ...options,
    onError: (e) => errors.push(e),
  });
  const append = (event: DomainEvent) => views.apply(log.append(event));
  return { log, views, writer, errors, logFile, append };
}
