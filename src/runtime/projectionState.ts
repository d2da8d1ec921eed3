import { z } from "zod";
import type { DomainEvent, DomainEventOf } from "../domain/events.js";
import type { LiveTurnsState } from "./ingest/liveTurns.js";
import type {
  CheckpointView,
  HandoffRecord,
  ProviderThreadRecord,
  RequestView,
  RunView,
  SubagentThreadRecord,
  ThreadView,
  Transfer,
  TurnItem,
} from "./projectionTypes.js";

/**
 * All that `Projections` folds from the log, private maps and open-time trackers included: what a projection
 * snapshot keeps (src/runtime/snapshots/). The objects are shared as in the live fold (a run is in `runs` and in its
 * thread's `runs`, an item in its run's `items` and in `items`...).
 */
export interface ProjectionState {
  head: number;
  threads: Map<string, ThreadView>;
  runs: Map<string, RunView>;
  requests: Map<string, RequestView>;
  providerThreads: Map<string, ProviderThreadRecord>;
  providerThreadsById: Map<string, ProviderThreadRecord>;
  handoffs: Map<string, HandoffRecord[]>;
  receipts: Map<string, { command: string; receipt: unknown }>;
  sessions: Map<string, { providerTarget: string; status: string }>;
  transfers: Map<string, Transfer>;
  subagentThreads: Map<string, SubagentThreadRecord>;
  checkpoints: Map<string, CheckpointView>;
  rolledBackAt: Map<string, number>;
  rollbacksInFlight: Map<string, string>;
  threadCheckpoints: Map<string, CheckpointView[]>;
  items: Map<string, TurnItem>;
  knownIds: Set<string>;
  replaced: Set<string>;
  restores: Map<string, RestoreStarted>;
  liveTurns: LiveTurnsState;
}

/** The public maps of `Projections` (the same names on it and in the state). */
export const PUBLIC_MAPS = [
  "threads",
  "runs",
  "requests",
  "providerThreads",
  "providerThreadsById",
  "handoffs",
  "sessions",
  "transfers",
  "subagentThreads",
  "checkpoints",
  "rolledBackAt",
  "rollbacksInFlight",
] as const;

const map = z.instanceof(Map);
const set = z.instanceof(Set);

/**
 * The state's frame, checked when a snapshot is read back (its bytes are checked against their hash, and the graph's
 * form by the codec; the views inside are the fold's own output, written by this runtime).
 */
export const projectionStateShape = z.object({
  head: z.number().int().positive(),
  ...Object.fromEntries(PUBLIC_MAPS.map((key) => [key, map])),
  threadCheckpoints: map,
  items: map,
  receipts: map,
  knownIds: set,
  replaced: set,
  restores: map,
  liveTurns: z.object({ trails: map, attemptOfNode: map, attemptOfRequest: map, attemptsOfRun: map }),
});

type RestoreStarted = DomainEventOf<"checkpoint.restore_started">;

export interface AnnouncedRestores {
  fold(event: DomainEvent): void;
  pending(): RestoreStarted[];
  /** What it holds (by thread): kept in projection snapshots, given back to `trackAnnouncedRestores`. */
  readonly state: Map<string, RestoreStarted>;
}

/**
 * File restores announced and not followed by `rollback.applied`, by thread, as the log is folded (what open must
 * finish: rollbackRecovery.ts).
 */
export function trackAnnouncedRestores(open = new Map<string, RestoreStarted>()): AnnouncedRestores {
  return {
    fold(event) {
      if (event.type === "checkpoint.restore_started") open.set(event.threadId, event);
      else if (event.type === "rollback.applied") open.delete(event.threadId);
    },
    pending: () => [...open.values()],
    state: open,
  };
}
