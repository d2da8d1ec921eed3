import { redact } from "../domain/redact.js";
import { ownsRun } from "../machines/run.js";
import type { Actors } from "./actors.js";
import type { Projections } from "./projections.js";
import { targetOfRun, type Target } from "./targets.js";
import type { TurnStarts } from "./turnStarts.js";
import { TurnWatchdog, withinLimit } from "./watchdog.js";

/**
 * No run stays `running` for ever: each turn (from its send) is watched, and one that says
 * nothing for `turnSilenceMs` is checked. The provider is asked whether it is alive; a turn it
 * cannot vouch for fails its run (`turn_silent`) and is stopped, so the thread can go on.
 */

/**
 * How long the provider may take to say whether a silent turn is alive (no answer counts as "cannot say"): the
 * silence limit, within these bounds. The floor keeps a short silence limit from failing a live turn whose provider
 * answers a little late (a loaded machine), the ceiling a long one from holding a dead turn.
 */
const PROBE_LIMIT_MS = 30_000;
const PROBE_FLOOR_MS = 2_000;
/** How long a turn its provider calls ended may take to deliver its terminal before it is failed. */
const TERMINAL_GRACE_MS = 1_000;

/** What the check reads and tells: the run actors, the targets, the silence limit, the dispatcher's step. */
export interface SilentTurnsHost {
  readonly actors: Pick<Actors, "runs">;
  readonly views: Projections;
  readonly targets: ReadonlyMap<string, Target>;
  readonly closed: boolean;
  readonly turnSilenceMs: number | null;
  act(fn: () => void): void;
}

export class SilentTurns {
  readonly #watchdog: TurnWatchdog;
  /** The run each watched attempt belongs to. */
  readonly #watchedRuns = new Map<string, string>();

  constructor(
    private readonly rt: SilentTurnsHost,
    private readonly turns: TurnStarts,
    /** Registers a check in flight, so `close()` can wait for it. */
    track: (check: Promise<void>) => void,
  ) {
    this.#watchdog = new TurnWatchdog(rt.turnSilenceMs, (attemptId) => {
      const runId = this.#watchedRuns.get(attemptId);
      if (runId) track(this.#check(runId, attemptId));
    });
  }

  /** The attempt's turn was sent: its silence counts from now. */
  watch(runId: string, attemptId: string): void {
    this.#watchedRuns.set(attemptId, runId);
    this.#watchdog.watch(attemptId);
  }

  /** The provider said something for it. */
  touch(attemptId: string): void {
    this.#watchdog.touch(attemptId);
  }

  unwatch(attemptId: string): void {
    this.#watchedRuns.delete(attemptId);
    this.#watchdog.stop(attemptId);
  }

  /** The runtime is closing: no check re-arms. */
  close(): void {
    this.#watchdog.close();
  }

  /**
   * A turn said nothing for the silence limit. Waiting on an approval is silence by design;
   * otherwise the provider is asked whether the turn is alive, and a turn it cannot vouch for
   * fails the run (`turn_silent`) and is stopped (best effort), so the thread can go on.
   */
  async #check(runId: string, attemptId: string): Promise<void> {
    const { rt } = this;
    const actor = rt.actors.runs.get(runId);
    const context = actor?.getSnapshot().context;
    // The active attempt's turn, or the superseded one a restart still waits for.
    if (!context || !(ownsRun(context, attemptId) || context.supersededAttemptId === attemptId))
      return this.unwatch(attemptId);
    if (actor.getSnapshot().matches({ active: "waiting" })) return this.#watchdog.watch(attemptId);
    // Every answer is checked against now: the turn may have ended, or the runtime closed, meanwhile.
    const stillWatched = () => !rt.closed && this.#watchedRuns.get(attemptId) === runId;
    const rearm = () => void (stillWatched() && this.#watchdog.watch(attemptId));
    const target = targetOfRun(rt, runId);
    const binding = target.normalizer.binding(attemptId);
    const session = binding && target.session(binding.sessionId);
    let why = "the provider cannot say whether the turn is alive";
    if (binding && session && target.adapter.isTurnAlive) {
      const limitMs = Math.min(Math.max(rt.turnSilenceMs ?? PROBE_LIMIT_MS, PROBE_FLOOR_MS), PROBE_LIMIT_MS);
      try {
        const alive = await withinLimit(limitMs, async () => {
          const loaded = await target.ensureThread(binding.threadId, session);
          return target.adapter.isTurnAlive!({
            sessionId: binding.sessionId,
            thread: loaded.handle,
            turnRef: binding.nativeTurnRef,
          });
        });
        if (alive) return rearm();
        if (!stillWatched()) return;
        // A turn that just ended has its terminal on the way: give the stream a moment to deliver it.
        if ((await this.turns.pause(attemptId, TERMINAL_GRACE_MS)) === "ended") return;
        why = "the provider says the turn is no longer running";
      } catch (error) {
        why = `the provider could not be asked: ${redact(error instanceof Error ? error.message : String(error))}`;
      }
    } else if (!binding) {
      why = "the provider never accepted the turn";
    }
    if (!stillWatched()) return;
    const message = `the turn sent nothing for ${rt.turnSilenceMs} ms and ${why}`;
    rt.act(() => rt.actors.runs.get(runId)?.send({ type: "TURN_SILENT", attemptId, message }));
    if (binding && session) {
      const loaded = await target.ensureThread(binding.threadId, session).catch(() => null);
      if (loaded)
        await target.adapter
          .interrupt({ sessionId: binding.sessionId, thread: loaded.handle, turnRef: binding.nativeTurnRef })
          .catch(() => undefined);
    }
  }
}
