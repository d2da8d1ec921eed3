import type { DomainEvent } from "../../domain/events.js";
import { ENDS_WITH_TURN, TURN_ITEM_KIND_OF_NODE, type TurnItemKind } from "../../domain/items.js";
import { redact } from "../../domain/redact.js";
import { policyEvent, type MachineEmitted } from "../../machines/emitted.js";
import {
  ownsRun,
  providerEventOnlyRecords,
  type RunContext,
  type RunEvent,
  type RunSnapshot,
} from "../../machines/run.js";
import { Actors } from "../actors.js";
import type { Projections } from "../projections.js";
import { targetOfRun, type Target } from "../targets.js";
import { isToolKind } from "./correlation.js";
import { readFrame, safeString } from "./frames.js";
import { itemLifecycle } from "./lifecycle.js";
import type { Routed } from "./normalizer.js";

/**
 * The one way in: a target's provider frames are read (validated at the boundary), normalized
 * once, and routed to the actors they concern; a session's loss reaches its requests, provider
 * threads and runs; an attempt's completion barrier closes what its turn left open. Effects
 * (the way out) are elsewhere: this module calls a provider only to decline a request its
 * capability record denies (no machine ever sees that request).
 */

type Settle = Extract<MachineEmitted, { type: "settle" }>;
type Decline = Extract<Routed, { to: "decline" }>;

/** What ends with its turn when the provider never completes its tools: its tools too. */
const ENDS_WITH_TURN_OR_TOOL: ReadonlySet<TurnItemKind> = new Set([
  ...ENDS_WITH_TURN,
  "tool",
  "command",
  "file_change",
]);

/** What the pipeline needs of the runtime. */
export interface InboundHost {
  readonly views: Projections;
  readonly targets: ReadonlyMap<string, Target>;
  readonly actors: Actors;
  readonly closed: boolean;
  /** Runs `fn` inside the dispatcher (records committed, effects performed); nothing once closed. */
  act(fn: () => void): void;
  /** A fact no machine emits (only inside the dispatcher). */
  commit(event: DomainEvent): void;
}

/**
 * What the pipeline tells the effects that wait on turns (interrupt holds, the silence watchdog),
 * and the one provider call it makes, tracked with theirs so `close()` waits for it too.
 */
export interface AttemptTracking {
  sawEvent(attemptId: string): void;
  attemptEnded(attemptId: string): void;
  forgetAttempt(attemptId: string): void;
  trackCall(call: Promise<unknown>): void;
}

export class Inbound {
  constructor(
    private readonly rt: InboundHost,
    private readonly attempts: AttemptTracking,
  ) {}

  /**
   * Consumes a target's event stream: validate, normalize, route. One bad frame never stops
   * it; if the stream itself ends or fails, the target's sessions are lost (their runs fail,
   * never stay running) and the target refuses new sessions.
   */
  async pump(target: Target): Promise<void> {
    const { rt } = this;
    const warn = (message: string) =>
      rt.act(() => rt.commit({ type: "warning", threadId: null, runId: null, message: redact(message) }));
    let ended = "provider event stream ended";
    try {
      for await (const frame of target.adapter.streamEvents()) {
        if (rt.closed) return;
        const read = readFrame(frame);
        if (!read.ok) {
          warn(`protocol_error: ${target.id} sent an invalid ${read.type} event: ${read.why}`);
          continue;
        }
        const { sessionId, event } = read;
        try {
          rt.act(() => this.route(target, sessionId, target.normalizer.ingest(sessionId, event)));
        } catch (error) {
          warn(`${target.id} ${event.type} could not be applied: ${safeString(error)}`);
        }
      }
    } catch (error) {
      ended = `provider event stream failed: ${String(error)}`;
    }
    if (rt.closed) return;
    target.markUnavailable(ended);
    warn(`${target.id}: ${ended}`);
    for (const session of target.liveSessions())
      rt.act(() => this.#sessionLost(target, session.sessionId, "error", ended));
  }

  /** Normalizer output -> actors. Events for runs that already ended are recorded as fenced. */
  route(target: Target, sessionId: string, routed: Routed[]): void {
    const { rt } = this;
    for (const r of routed) {
      switch (r.to) {
        case "log":
          rt.commit(r.event);
          break;
        case "request":
          rt.actors.requests.get(r.requestId)?.send({ type: "PROVIDER_RESOLVED", outcome: r.outcome });
          break;
        case "fenced": {
          const { threadId, runId, attemptId, providerEventType } = r;
          rt.commit({ type: "event.fenced", threadId, runId, attemptId, providerEventType });
          break;
        }
        case "session":
          this.#sessionLost(target, sessionId, r.state, r.message);
          break;
        case "decline":
          this.#decline(target, r);
          break;
        case "run": {
          if ("attemptId" in r.event && typeof r.event.attemptId === "string")
            this.attempts.sawEvent(r.event.attemptId);
          const actor = rt.actors.runs.get(r.runId);
          // Streamed deltas are the bulk of all traffic: the run's own fencing predicate decides
          // them here, without a machine step (they change no run state). So does every provider
          // event of the active attempt in a state where it only records itself (an item's start
          // and end while the turn runs). Everything else, fenced events included, goes through
          // the run actor.
          if (actor && r.event.type === "PROVIDER" && appliesWithoutStep(actor.getSnapshot(), r.event)) {
            rt.commit(r.event.event);
          } else if (actor) {
            actor.send(r.event);
          } else if ("attemptId" in r.event) {
            const run = rt.views.runs.get(r.runId);
            if (run)
              rt.commit({
                type: "event.fenced",
                threadId: run.threadId,
                runId: r.runId,
                attemptId: r.event.attemptId,
                providerEventType: eventName(r.event),
              });
          }
          break;
        }
      }
    }
  }

  /**
   * Declines, back to the provider, a request its record says it cannot ask: the provider waits on an answer no user
   * is shown. The one provider call made here (no machine asks for it): a failure is a warning, never a stuck turn.
   */
  #decline(target: Target, decline: Decline): void {
    const { rt } = this;
    const { sessionId, threadId, runId, request } = decline;
    const answer = async () => {
      const session = target.session(sessionId);
      if (!session) throw new Error("the session that asked is gone");
      const loaded = await target.ensureThread(threadId, session);
      const response = { kind: "decision", decision: "decline" } as const;
      await target.adapter.respondToRequest({ sessionId, thread: loaded.handle, request, response });
    };
    this.attempts.trackCall(
      answer().catch((error: unknown) => {
        if (rt.closed) return;
        const message = redact(`declining an undeclared request failed: ${safeString(error)}`);
        rt.act(() => rt.commit({ type: "warning", threadId, runId, message }));
      }),
    );
  }

  #sessionLost(target: Target, sessionId: string, state: "stopped" | "error", message: string | null): void {
    const { rt } = this;
    const lost =
      state === "stopped"
        ? { type: "STOPPED" as const, message }
        : { type: "FAILED" as const, message: message ?? "session error" };
    Actors.sendIfActive(rt.actors.sessions.get(sessionId), lost);
    target.dropSession(sessionId);
    // Whatever this session asked can never be answered now: not resumable, not merely cancelled.
    for (const request of [...rt.actors.requests.values()]) {
      const cap = request.getSnapshot().context.responseCapability;
      if (cap.kind === "live" && cap.sessionId === sessionId)
        request.send({
          type: "EXPIRE",
          reason: `not_resumable: provider session ${state} (${(message ?? "no detail").split("\n")[0]})`,
        });
    }
    for (const actor of [...rt.actors.runs.values()]) {
      const ctx = actor.getSnapshot().context;
      const attemptId = ctx.activeAttemptId ?? ctx.supersededAttemptId;
      const binding = attemptId ? target.normalizer.binding(attemptId) : undefined;
      // The run's failure says what happened; the session's own record keeps the full report (recent host frames).
      if (binding?.sessionId === sessionId)
        actor.send({ type: "SESSION_LOST", message: message?.split("\n")[0] ?? `provider session ${state}` });
    }
  }

  /** Completion barrier: close the attempt's open nodes, then cancel its pending requests. */
  settleAttempt(settle: Settle): void {
    const { rt } = this;
    this.attempts.attemptEnded(settle.attemptId);
    const target = targetOfRun(this.rt, settle.runId);
    const open = target.normalizer.takeOpenNodes(settle.attemptId);
    const binding = target.normalizer.binding(settle.attemptId);
    const caps = target.capabilitiesOfAttempt(settle.attemptId);
    const lifecycle = itemLifecycle(caps);
    if (lifecycle.messageCompleted === "at_terminal" && open.some((n) => n.kind === "assistant_message")) {
      const detail =
        "the provider sends no message-completed events: its assistant messages are closed at the root terminal";
      rt.commit(policyEvent(settle, "messages_closed_at_terminal", detail));
    }
    // A provider that never completes its tools leaves every tool open: it ends with its turn, never cancelled.
    const toolsEndWithTurn = lifecycle.tools.completed === "at_terminal";
    if (toolsEndWithTurn && open.some((n) => isToolKind(n.kind))) {
      const detail = "the provider sends no tool-completed events: its tool items are closed at the root terminal";
      rt.commit(policyEvent(settle, "tools_closed_at_terminal", detail));
    }
    const endingWithTurn = toolsEndWithTurn ? ENDS_WITH_TURN_OR_TOOL : ENDS_WITH_TURN;
    // Each closing node by what it shows as (the root turn is the run itself: it ends with it).
    const closing = open.map((n) => ({ nodeId: n.nodeId, kind: TURN_ITEM_KIND_OF_NODE[n.kind] }));
    // A node whose provider completion was fenced (it came after the attempt was superseded) is
    // closed for the normalizer but still streams in the read model: close it too.
    const known = new Set(closing.map((n) => n.nodeId));
    for (const item of rt.views.runs.get(settle.runId)?.items ?? []) {
      if (item.attemptId === settle.attemptId && item.status === "streaming" && !known.has(item.id))
        closing.push({ nodeId: item.id, kind: item.kind });
    }
    for (const node of closing) {
      const endsWithTurn = node.kind === null || endingWithTurn.has(node.kind);
      const status = endsWithTurn || settle.status !== "completed" ? settle.status : "cancelled";
      const { threadId, runId } = settle;
      rt.commit({
        type: "node.completed",
        threadId,
        runId,
        nodeId: node.nodeId,
        status,
        text: null,
        output: null,
        exitCode: null,
        settledBy: "runtime",
      });
    }
    for (const request of rt.actors.requestsOfRun(settle.runId))
      request.send({ type: "CANCEL", reason: settle.reason });
    // Events held for a reply the turn ended without: decided now, as if they came after its end.
    const held = target.normalizer.decideHeld(settle.attemptId);
    if (held) this.route(target, held.sessionId, held.routed);
    if (binding) {
      const threadActor = rt.actors.providerThreads.get(Actors.providerThreadKey(binding.threadId, target.id));
      Actors.sendIfActive(threadActor, { type: "TURN_ENDED" });
      target.release(binding.sessionId);
    }
  }

  /** A run ended: drop its attempts' correlation state. */
  releaseRun(context: RunContext): void {
    const target = targetOfRun(this.rt, context.runId);
    for (const attempt of context.attempts) {
      const held = target.normalizer.decideHeld(attempt.attemptId);
      if (held) this.route(target, held.sessionId, held.routed);
      target.normalizer.release(attempt.attemptId);
      this.attempts.forgetAttempt(attempt.attemptId);
    }
  }
}

/** A provider event the run's machine would only record: the runtime commits it itself. */
function appliesWithoutStep(snapshot: RunSnapshot, event: Extract<RunEvent, { type: "PROVIDER" }>): boolean {
  if (!ownsRun(snapshot.context, event.attemptId)) return false;
  return event.event.type === "node.delta" || providerEventOnlyRecords(snapshot);
}

function eventName(event: { type: string; event?: { type: string } }): string {
  return event.event ? event.event.type : event.type;
}
