import type { HandoffContext, ProviderThreadAddress } from "../adapters/contract.js";
import type { ProviderCapabilities } from "../capabilities/schema.js";
import { isTillerError, ProviderError } from "../domain/errors.js";
import { redact } from "../domain/redact.js";
import { interruptWaitsForTurnStart } from "../capabilities/predicates.js";
import type { Effect } from "../machines/emitted.js";
import { ownsRun } from "../machines/run.js";
import { Actors } from "./actors.js";
import { performRollback, type RollbackHost, type RollbackReceipt } from "./rollback.js";
import { targetOfRun, type Target } from "./targets.js";
import { planTurnContext, providerSummary } from "./turnContext.js";
import type { AttemptTracking, Inbound } from "./ingest/inbound.js";
import { TurnStarts, type TurnWait } from "./turnStarts.js";
import { SilentTurns } from "./silentTurns.js";

/** What effects need of the runtime beyond rollback's port: lifecycle, settings, and where errors with no caller go. */
export interface EffectsHost extends RollbackHost {
  readonly closed: boolean;
  readonly turnSilenceMs: number | null;
  /** The latest rollback started per thread (the API awaits its receipt). */
  readonly rollbacks: Map<string, Promise<RollbackReceipt>>;
  /** Where provider events the normalizer held for a turn's reply go once it came. */
  readonly inbound: Pick<Inbound, "route">;
  escaped(error: unknown): void;
}

/** How long an interrupt is held for the provider to announce its turn before it is sent anyway. */
const TURN_START_HOLD_MS = 30_000;
/** Pauses between retries of an interrupt the provider refused while its turn was live (6 tries in all). */
const INTERRUPT_RETRY_PAUSES_MS = [25, 50, 100, 200, 400];

/**
 * The one way out: performs what machines ask for. Effects between actors run synchronously,
 * in order, after the event that caused them; provider calls run asynchronously and report
 * back to the actors as events. Every provider call is tracked so `close()` can wait for it.
 * (Provider events come in through `ingest/`.)
 */
export class Effects implements AttemptTracking {
  #queue: Effect[] = [];
  #inflight = new Set<Promise<unknown>>();
  /** Which attempts' turns the provider has announced (interrupts wait on it). */
  readonly turns = new TurnStarts();
  /** Turns that go silent are checked, never left running forever. */
  readonly silentTurns: SilentTurns;

  constructor(private readonly rt: EffectsHost) {
    this.silentTurns = new SilentTurns(rt, this.turns, (check) => this.#track(check));
  }

  enqueue(effect: Effect): void {
    this.#queue.push(effect);
  }

  drain(): void {
    for (let effect = this.#queue.shift(); effect; effect = this.#queue.shift()) this.#perform(effect);
  }

  async settle(): Promise<void> {
    while (this.#inflight.size > 0) await Promise.allSettled([...this.#inflight]);
  }

  #perform(effect: Effect): void {
    const { rt } = this;
    switch (effect.type) {
      case "startRun":
        return void rt.actors.runs.get(effect.runId)?.send({ type: "START", queued: effect.queued });
      case "steerRun":
        return void rt.actors.runs
          .get(effect.runId)
          ?.send({ type: "STEER", text: effect.text, messageId: effect.messageId });
      case "interruptRun":
        return void rt.actors.runs.get(effect.runId)?.send({ type: "INTERRUPT" });
      case "runFinished":
        return void rt.actors.threads.get(effect.threadId)?.send({ type: "RUN_FINISHED", runId: effect.runId });
      case "startTurn":
        return this.#track(this.#startTurn(effect));
      case "steerTurn":
        return this.#track(this.#steerTurn(effect));
      case "interruptTurn":
      case "stopSession":
        return this.#track(this.#interruptTurn(effect));
      case "respond":
        return this.#track(this.#respond(effect));
      case "rollbackThread": {
        const done = performRollback(rt, effect);
        rt.rollbacks.set(effect.threadId, done);
        return this.#track(done);
      }
    }
  }

  #track(promise: Promise<unknown>): void {
    this.#inflight.add(promise);
    const done = () => void this.#inflight.delete(promise);
    // Never `finally` here: its derived promise would reject unhandled when the call fails.
    promise.then(done, (error: unknown) => {
      done();
      this.rt.escaped(error);
    });
  }

  /** Session, provider thread (resumed, forked or created), then the turn itself. */
  async #startTurn(effect: Extract<Effect, { type: "startTurn" }>): Promise<void> {
    const { rt } = this;
    const { threadId, runId, attemptId, text, queued } = effect;
    const target = targetOfRun(this.rt, runId);
    const thread = rt.views.threads.get(threadId)!;
    let sent: { sessionId: string; thread: ProviderThreadAddress } | null = null;
    // The session is claimed from the moment the turn has it (no idle stop under a turn being set
    // up); settle releases it once the turn began, this method if it never did.
    let claimed: string | null = null;
    // A thread this turn was to make (no empty threads) and that the provider has not named yet.
    let making = false;
    try {
      // The pre-run baseline is taken before the provider can touch a file.
      if (rt.views.runs.get(runId)?.attempts.length === 1) await rt.checkpoints.baseline(runId, target.capabilities());
      const { model, runtimeMode } = rt.views.runs.get(runId)!;
      const session = await target.ensureSession(threadId, thread.cwd, model, runtimeMode);
      claimed = session.sessionId;
      rt.act(() => target.claim(session.sessionId));
      rt.act(() => {
        rt.actors.runs.get(runId)?.send({ type: "SESSION_BOUND", capabilities: session.capabilities });
        rt.actors.threads.get(threadId)?.send({ type: "RUN_CAPABILITIES", runId, capabilities: session.capabilities });
      });
      const loaded = await target.ensureThread(threadId, session);
      making = !!loaded.unmade;
      // What the turn must be told, and the summary of it the provider writes where its record says it does.
      const plan = planTurnContext(rt.views, target.id, { threadId, runId }, loaded, session);
      const written = plan ? await providerSummary(target.adapter, plan, session) : null;
      const run = rt.actors.runs.get(runId);
      if (!run || run.getSnapshot().context.activeAttemptId !== attemptId) {
        rt.act(() => target.release(session.sessionId));
        return; // cancelled meanwhile
      }
      const rootNodeId = run.getSnapshot().context.attempts.find((a) => a.attemptId === attemptId)!.rootNodeId;
      const { binding, rootStarted } = target.normalizer.beginTurn({
        threadId,
        runId,
        attemptId,
        rootNodeId,
        providerThreadId: loaded.providerThreadId,
        sessionId: session.sessionId,
        threadRef: loaded.handle.threadRef,
        makingThread: !!loaded.unmade,
        queued,
      });
      // From here settle balances the claim, however the turn ends (even before sendRun replies).
      claimed = null;
      rt.act(() => {
        run.send({ type: "PROVIDER", attemptId, event: rootStarted });
        Actors.sendIfActive(rt.actors.providerThread(threadId, target.id), { type: "TURN_BEGAN" });
      });
      // The handoff it carries is recorded first (once, inside the dispatcher).
      let context: HandoffContext | null = null;
      if (plan) rt.run(() => void (context = target.recordContext(plan, written)));
      sent = { sessionId: session.sessionId, thread: loaded.handle };
      // Silence counts from here: starting a host or a session has its own timeouts.
      this.silentTurns.watch(runId, attemptId);
      const reply = await target.adapter.sendRun({
        sessionId: session.sessionId,
        thread: loaded.handle,
        text,
        context,
        model,
        runtimeMode,
        ...(loaded.unmade ? { newThread: true } : {}),
      });
      const { turnRef } = reply;
      if (loaded.unmade) {
        if (!reply.thread) throw new ProviderError(`${target.id} made a thread with the turn and did not name it`);
        target.bindMadeThread(threadId, loaded, reply.thread, attemptId);
        making = false;
        sent = { sessionId: session.sessionId, thread: { ...reply.thread, cwd: loaded.handle.cwd } };
      }
      const accepted = {
        attemptId,
        providerThreadId: loaded.providerThreadId,
        providerTurnId: binding.providerTurnId,
        nativeTurnRef: turnRef,
      };
      rt.act(() => {
        // What arrived before the reply and waited on it (a weak ref in doubt) goes first, as it came first.
        const held = target.normalizer.acceptTurn(attemptId, turnRef);
        if (held) rt.inbound.route(target, held.sessionId, held.routed);
        const current = rt.actors.runs.get(runId);
        if (current && ownsRun(current.getSnapshot().context, attemptId))
          return current.send({ type: "TURN_ACCEPTED", ...accepted });
        // The reply came after the turn already ended (or was superseded): still a provider fact to keep.
        if (rt.views.runs.get(runId)?.attempts.some((a) => a.attemptId === attemptId && a.providerTurnId === null)) {
          rt.commit({ type: "attempt.turn_bound", threadId, runId, ...accepted });
        }
      });
    } catch (error) {
      const unclaimed = claimed;
      if (unclaimed) rt.act(() => target.release(unclaimed));
      if (making) target.madeThreadFailed(threadId);
      const failure = {
        failureClass: isTillerError(error) ? error.code : "provider_error",
        message: redact(error instanceof Error ? error.message : String(error)),
        retryable: false,
      };
      // The provider may have started the turn before failing its reply: stop it (best effort),
      // so it does not block the thread's next turn. Never a turn it was to queue and named no ref
      // for: that interrupt could only address the thread's turn, which is the one ahead of it.
      const turnRef = target.normalizer.binding(attemptId)?.nativeTurnRef ?? null;
      const addressable = turnRef !== null || !target.normalizer.isWaiting(attemptId);
      if (sent && addressable && target.normalizer.binding(attemptId)?.closed === false) {
        await target.adapter.interrupt({ ...sent, turnRef }).catch(() => undefined);
      }
      rt.act(() => rt.actors.runs.get(runId)?.send({ type: "START_FAILED", attemptId, failure }));
    }
  }

  /** Native steer; recorded as applied only once the provider took it. */
  async #steerTurn(effect: Extract<Effect, { type: "steerTurn" }>): Promise<void> {
    const { runId, attemptId, text, messageId } = effect;
    const sentAfterSeq = this.rt.views.head;
    const result = await this.#provider(runId, attemptId, (t, a) => {
      if (!t.adapter.steerRun) throw new Error(`${t.id} has no native steer`);
      return t.adapter.steerRun({ ...a, text });
    });
    const event =
      result === true
        ? { type: "STEER_DELIVERED" as const, attemptId, text, messageId, sentAfterSeq }
        : { type: "STEER_FAILED" as const, attemptId, message: result };
    const { rt } = this;
    rt.act(() => {
      const run = rt.actors.runs.get(runId);
      if (run) return run.send(event);
      // Acknowledged after the run ended: the provider took it, so the transcript must show it.
      const view = rt.views.runs.get(runId);
      if (view && result === true)
        rt.commit({
          type: "steer.applied",
          threadId: view.threadId,
          runId,
          attemptId,
          messageId,
          text,
          via: "native",
          sentAfterSeq,
        });
    });
  }

  /**
   * Native interrupt, or the destructive session stop. Either is an acknowledgement, never the
   * terminal. An interrupt the runtime acknowledged is delivered: held until the provider can
   * take it (its turn-started event, where the record says it sends one), retried (bounded)
   * while the turn is live, and only then reported as failed, typed, with the tries it took.
   */
  async #interruptTurn(effect: Extract<Effect, { type: "interruptTurn" | "stopSession" }>): Promise<void> {
    const { runId, attemptId } = effect;
    const target = targetOfRun(this.rt, runId);
    target.normalizer.noteInterruptSent(attemptId);
    const caps = target.capabilitiesOfAttempt(attemptId);
    if (effect.type === "interruptTurn" && (await this.#holdInterrupt(target, attemptId, caps)) === "ended") return;
    const live = () => !this.rt.closed && target.normalizer.binding(attemptId)?.closed === false;
    let tries = 0;
    let result: true | string;
    for (;;) {
      tries += 1;
      result = await this.#provider(runId, attemptId, (t, a) =>
        effect.type === "interruptTurn" ? t.adapter.interrupt(a) : t.adapter.stopSession({ sessionId: a.sessionId }),
      );
      const pause = INTERRUPT_RETRY_PAUSES_MS[tries - 1];
      if (result === true || pause === undefined || !live()) break;
      if ((await this.turns.pause(attemptId, pause)) === "ended") break;
    }
    // Not delivered, but the turn ended anyway: its terminal is the answer, there is nothing to report.
    if (result !== true && !live()) return;
    const event =
      result === true
        ? { type: "INTERRUPT_ACKED" as const, attemptId }
        : { type: "INTERRUPT_FAILED" as const, attemptId, message: result, attempts: tries };
    this.rt.act(() => this.rt.actors.runs.get(runId)?.send(event));
  }

  /**
   * Whether an interrupt must wait for the provider to take the turn up: where the record says it announces turns
   * (bounded), and for a turn it holds in its own queue that it knows by no ref (unbounded: sent earlier, it could only
   * be addressed as the thread's turn, which is the one ahead of it). A queued turn it named is dropped by that name.
   */
  async #holdInterrupt(target: Target, attemptId: string, caps: ProviderCapabilities): Promise<TurnWait | null> {
    if (target.normalizer.isWaiting(attemptId)) {
      if (target.normalizer.binding(attemptId)?.nativeTurnRef) return null;
      return this.turns.untilStarted(attemptId, null);
    }
    return interruptWaitsForTurnStart(caps) ? this.turns.untilStarted(attemptId, TURN_START_HOLD_MS) : null;
  }

  async #respond(effect: Extract<Effect, { type: "respond" }>): Promise<void> {
    const { rt } = this;
    const view = rt.views.requests.get(effect.requestId)!;
    const target = targetOfRun(this.rt, view.runId);
    const attemptId = rt.actors.runs.get(view.runId)?.getSnapshot().context.activeAttemptId ?? null;
    const address = attemptId ? target.normalizer.requestAddress(attemptId, effect.requestId) : null;
    const binding = attemptId ? target.normalizer.binding(attemptId) : undefined;
    const actor = () => rt.actors.requests.get(effect.requestId);
    if (!address || !binding) {
      rt.act(() => actor()?.send({ type: "RESPOND_FAILED", message: "the turn that asked is no longer active" }));
      return;
    }
    try {
      const session = target.session(binding.sessionId);
      if (!session) throw new Error("the session that asked is gone");
      const loaded = await target.ensureThread(view.threadId, session);
      await target.adapter.respondToRequest({
        sessionId: binding.sessionId,
        thread: loaded.handle,
        request: address,
        response: effect.response,
      });
      rt.act(() => actor()?.send({ type: "RESPONDED" }));
    } catch (error) {
      rt.act(() => actor()?.send({ type: "RESPOND_FAILED", message: redact(String(error)) }));
    }
  }

  /** Calls the adapter for an attempt's turn: true when it succeeded, else the failure message. */
  async #provider(
    runId: string,
    attemptId: string,
    call: (
      target: Target,
      address: { sessionId: string; thread: ProviderThreadAddress; turnRef: string | null },
    ) => Promise<unknown>,
  ): Promise<true | string> {
    const target = targetOfRun(this.rt, runId);
    const binding = target.normalizer.binding(attemptId);
    const session = binding && target.session(binding.sessionId);
    try {
      if (!binding || !session) throw new Error("the attempt has no live provider turn");
      const loaded = await target.ensureThread(binding.threadId, session);
      await call(target, { sessionId: binding.sessionId, thread: loaded.handle, turnRef: binding.nativeTurnRef });
      return true;
    } catch (error) {
      return redact(error instanceof Error ? error.message : String(error));
    }
  }

  // ---- what the inbound pipeline tells about attempts (its AttemptTracking port) ----

  /** The provider said something for this attempt: its turn has started, and it is not silent. */
  sawEvent(attemptId: string): void {
    this.turns.sawEvent(attemptId);
    this.silentTurns.touch(attemptId);
  }

  /** The attempt's completion barrier ran: nothing waits on its turn any more. */
  attemptEnded(attemptId: string): void {
    this.turns.ended(attemptId);
    this.silentTurns.unwatch(attemptId);
  }

  /** A provider call the inbound pipeline makes (declining a request the record denies): `close()` waits for it. */
  trackCall(call: Promise<unknown>): void {
    this.#track(call);
  }

  /** Its run ended: its bookkeeping goes. */
  forgetAttempt(attemptId: string): void {
    this.turns.forget(attemptId);
    this.silentTurns.unwatch(attemptId);
  }
}
