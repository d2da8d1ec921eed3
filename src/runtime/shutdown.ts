import type { DomainEvent } from "../domain/events.js";
import type { Dispatcher } from "./dispatch.js";
import type { HostRegistry } from "./hosts/registry.js";
import type { RuntimeInspector } from "./inspector.js";
import type { StateDocument } from "./store/documents.js";
import type { EventLog } from "./store/eventLog.js";
import type { DataDirLock } from "./store/lock.js";
import type { RuntimeMeta } from "./store/meta.js";
import type { SnapshotWriter } from "./snapshots/writer.js";

/** How long `close()` waits for provider calls that are still in flight. */
const CLOSE_GRACE_MS = 5_000;
/** `work`, or `fallback()` once `CLOSE_GRACE_MS` passed; the timer never outlives the race. */
async function withGrace<T>(work: Promise<T>, fallback: () => T): Promise<T> {
  let timer: NodeJS.Timeout | undefined;
  const grace = new Promise<T>((done) => (timer = setTimeout(() => done(fallback()), CLOSE_GRACE_MS)));
  try {
    return await Promise.race([work, grace]);
  } finally {
    clearTimeout(timer);
  }
}

/**
 * What closing gives back: the dispatcher's actors, targets, effects and checkpoints, the
 * adapters' event pumps, the host processes, the log, the meta document, the inspector and
 * the directory lock.
 */
export interface ShutdownParts {
  readonly d: Pick<Dispatcher, "actors" | "targets" | "effects" | "checkpoints" | "fault" | "run" | "close">;
  readonly pumps: Promise<void>[];
  readonly hosts: Pick<HostRegistry, "close">;
  readonly log: Pick<EventLog<DomainEvent>, "close">;
  readonly meta: StateDocument<RuntimeMeta>;
  readonly inspector: RuntimeInspector | null;
  readonly lock: DataDirLock;
  /** Absent when open failed before they started. */
  readonly snapshots?: Pick<SnapshotWriter, "close" | "stop"> | undefined;
  /** What the runtime still has going on the snapshot (its background check, its removal): over before the unlock. */
  readonly settled?: () => Promise<void>;
}

/** Stops providers, cancels what is still running (nothing is left "running"), flushes, unlocks. */
export async function shutDown(rt: ShutdownParts): Promise<void> {
  const d = rt.d;
  // Queued runs first, so cancelling an active run does not start the next one.
  const byQueued = [...d.actors.runs.values()].sort(
    (a, b) => Number(b.getSnapshot().matches("queued")) - Number(a.getSnapshot().matches("queued")),
  );
  d.run(() => {
    for (const actor of byQueued) actor.send({ type: "CANCEL", reason: "runtime_closed" });
  });
  d.close();
  for (const target of d.targets.values()) target.stopSessions();
  // A failed store already told its failure (onFailure); closing still gives everything back.
  const failed = () => d.fault !== undefined;
  try {
    // An adapter whose host hangs cannot hold the directory: its close gets the same grace.
    const closes = await withGrace(
      Promise.allSettled([...d.targets.values()].map(async (t) => t.adapter.close())),
      () => [...d.targets.values()].map(() => ({ status: "rejected" as const, reason: "timeout" })),
    );
    // Provider calls still in flight get a grace period; a call that never settles cannot hold the directory.
    await withGrace(d.effects.settle(), () => undefined);
    // An adapter that failed to close may never end its event stream: do not wait for it.
    await Promise.allSettled(rt.pumps.filter((_, i) => closes[i]?.status === "fulfilled"));
    await d.checkpoints.close().finally(() => rt.hosts.close());
    await rt.log.close().catch((error: unknown) => {
      if (!failed()) throw error;
    });
    // After the last commit, before the lock is released: the next open replays nothing. Never fails the close.
    await (failed() ? rt.snapshots?.stop() : rt.snapshots?.close());
    await rt.settled?.();
    if (!failed()) await rt.meta.update((doc) => void (doc.closedCleanly = true));
  } finally {
    await rt.inspector?.close();
    await rt.lock.release().catch((error: unknown) => {
      if (!failed()) throw error;
    });
  }
}
