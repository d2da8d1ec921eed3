import { describe, expect, it } from "vitest";
import { noInterrupt, noSteer, open, opened, running, steerRecord } from "./runHarness.js";

/**
 * The run machine's decisions that run.test.ts, runInterventions.test.ts and runModelRules.test.ts leave open
 * (issue 14: each decision pinned by a behaviour test), first among them the provider's own queue. Expectations come
 * from the domain model (the Run lifecycle queued → starting → running; a queued follow-up runs at the turn boundary,
 * never mid-turn; an interrupt acknowledgement is not a terminal), the capability seed (`turns.supportsQueuedMessages`:
 * the provider holds the follow-up itself) and the degradation registry (an interrupt without a native one is a
 * session stop where allowed, else refused, typed).
 */

/** A run handed to a provider that holds its turn in its own queue, behind the thread's active turn. */
function queuedAtProvider(overrides = {}, input = {}) {
  const r = open(overrides, input);
  r.actor.send({ type: "START", queued: true });
  return r;
}

const runStates = (r: ReturnType<typeof open>) =>
  r.records().flatMap((e) => (e.type === "run.state" ? [e.status] : []));

describe("run machine: a turn the provider holds in its queue", () => {
  it("is handed over at once, marked queued, and the run is not starting: it waits, still queued", () => {
    const r = queuedAtProvider();
    const a = r.attempt();
    expect(a).toMatchObject({ ordinal: 1, reason: "initial", text: "hello" });
    expect(r.types()).toEqual(["attempt.started"]);
    expect(r.effects()).toEqual([
      { type: "startTurn", threadId: "thr_1", runId: "run_1", attemptId: a.attemptId, text: "hello", queued: true },
    ]);
  });

  it("a run started without `queued` (or with it false) starts at once and its turn is not marked queued", () => {
    for (const start of [{ type: "START" } as const, { type: "START", queued: false } as const]) {
      const r = open();
      r.actor.send(start);
      expect(runStates(r)).toEqual(["starting"]);
      expect(r.effects()).toEqual([
        { type: "startTurn", threadId: "thr_1", runId: "run_1", attemptId: r.attempt().attemptId, text: "hello" },
      ]);
      r.accept();
      expect(r.state()).toEqual({ active: "running" });
    }
  });

  it("the provider accepting the queued turn binds it, but the run does not run yet", () => {
    const r = queuedAtProvider();
    r.accept();
    expect(r.state()).toBe("queuedAtProvider");
    expect(r.types()).toEqual(["attempt.started", "attempt.turn_bound"]);
  });

  it("it runs once the provider announces the turn: running is recorded then", () => {
    const r = queuedAtProvider();
    r.accept();
    r.actor.send({ type: "TURN_STARTED", attemptId: "att_other" });
    expect(r.state()).toBe("queuedAtProvider");
    r.actor.send({ type: "TURN_STARTED", attemptId: r.attempt().attemptId });
    expect(r.state()).toEqual({ active: "running" });
    expect(runStates(r)).toEqual(["running"]);
  });

  it("a provider that announces nothing: its first event for the turn is the sign it runs, and is recorded", () => {
    const r = queuedAtProvider();
    r.accept();
    const { attemptId } = r.attempt();
    r.actor.send({ type: "PROVIDER", attemptId: "att_other", event: r.delta("att_other", "not mine") });
    expect(r.state()).toBe("queuedAtProvider");
    expect(r.records().at(-1)).toMatchObject({ type: "event.fenced", attemptId: "att_other" });
    r.clear();
    r.actor.send({ type: "PROVIDER", attemptId, event: r.delta(attemptId, "hi") });
    expect(r.state()).toEqual({ active: "running" });
    expect(r.records()).toEqual([
      r.delta(attemptId, "hi"),
      { type: "run.state", threadId: "thr_1", runId: "run_1", status: "running" },
    ]);
  });

  it("a request for the queued turn is a sign it runs, and the run waits on it", () => {
    const r = queuedAtProvider();
    r.accept();
    const { attemptId } = r.attempt();
    r.actor.send({ type: "REQUEST_OPENED", attemptId: "att_other", requestId: "req_0", event: opened("req_0") });
    expect(r.state()).toBe("queuedAtProvider");
    r.actor.send({ type: "REQUEST_OPENED", attemptId, requestId: "req_1", event: opened("req_1") });
    expect(r.state()).toEqual({ active: "waiting" });
    expect(r.records().filter((e) => e.type === "request.opened")).toEqual([opened("req_1")]);
    r.actor.send({ type: "REQUEST_SETTLED", requestId: "req_1" });
    expect(r.state()).toEqual({ active: "running" });
  });

  it("the queued turn's terminal ends the run like any other (the provider dropped it, or ran it silently)", () => {
    const r = queuedAtProvider();
    r.accept();
    r.terminal("interrupted", r.attempt(), "nod_child");
    expect(r.state()).toBe("queuedAtProvider");
    r.terminal("interrupted");
    expect(r.state()).toBe("interrupted");
    expect(r.records().at(-1)).toMatchObject({ type: "run.terminal", status: "interrupted", reason: null });
  });

  it("a queued turn whose session is lost, or which the runtime gives up on, ends the run (never left queued)", () => {
    const lost = queuedAtProvider();
    lost.accept();
    lost.actor.send({ type: "SESSION_LOST", message: "host exited" });
    expect(lost.state()).toBe("failed");

    const cancelled = queuedAtProvider();
    cancelled.accept();
    cancelled.actor.send({ type: "CANCEL", reason: "runtime_closing" });
    expect(cancelled.state()).toBe("cancelled");
    expect(cancelled.records().at(-1)).toMatchObject({ status: "cancelled", reason: "runtime_closing" });
  });
});

describe("run machine: a queued turn taken up before the provider's reply (regressions)", () => {
  it("a request while starting takes the turn up: a later interrupt-restart's attempt runs, never queued", () => {
    const r = queuedAtProvider({ turns: { supportsActiveSteering: false } });
    const first = r.attempt();
    r.actor.send({ type: "REQUEST_OPENED", attemptId: first.attemptId, requestId: "req_1", event: opened("req_1") });
    r.actor.send({ type: "REQUEST_SETTLED", requestId: "req_1" });
    r.accept(first);
    expect(r.state()).toEqual({ active: "running" });
    r.actor.send({ type: "STEER", text: "go left", messageId: "msg_2" });
    r.terminal("interrupted", first);
    const second = r.attempt();
    expect(second.reason).toBe("steering_restart");
    r.clear();
    r.accept(second);
    expect(r.state()).toEqual({ active: "running" });
    expect(runStates(r)).toEqual(["running"]);
  });

  it("any event of the turn while starting takes it up: accepted afterwards, the run runs", () => {
    const r = queuedAtProvider();
    const { attemptId } = r.attempt();
    r.actor.send({ type: "PROVIDER", attemptId, event: r.delta(attemptId, "hi") });
    r.accept();
    expect(r.state()).toEqual({ active: "running" });
  });

  it("a steer while the provider holds the turn is kept and replayed once it runs, never dropped", () => {
    const r = queuedAtProvider();
    r.accept();
    r.actor.send({ type: "STEER", text: "and then left", messageId: "msg_2" });
    // Answered (not refused), and held: nothing reaches the provider before it runs the turn.
    expect(r.outcomes()).toMatchObject([{ command: "steer", via: "native" }]);
    expect(r.effects().filter((e) => e.type === "steerTurn")).toEqual([]);
    r.actor.send({ type: "TURN_STARTED", attemptId: r.attempt().attemptId });
    expect(r.effects().filter((e) => e.type === "steerTurn")).toMatchObject([{ text: "and then left" }]);
  });
});

describe("run machine: interrupting a turn the provider holds in its queue", () => {
  it("once accepted, the interrupt goes to the provider at once, which drops the turn; its terminal ends it", () => {
    const r = queuedAtProvider();
    r.accept();
    const { attemptId } = r.attempt();
    r.clear();
    r.actor.send({ type: "INTERRUPT" });
    expect(r.records()).toEqual([
      { type: "interrupt.requested", threadId: "thr_1", runId: "run_1", attemptId, via: "native" },
    ]);
    expect(r.effects()).toEqual([{ type: "interruptTurn", threadId: "thr_1", runId: "run_1", attemptId }]);
    expect(r.outcomes()).toEqual([{ command: "interrupt", via: "native", runId: "run_1" }]);
    r.actor.send({ type: "INTERRUPT" });
    expect(r.outcomes().at(-1)).toEqual({ command: "interrupt", via: "already_requested", runId: "run_1" });
    expect(r.effects()).toHaveLength(1);
    r.actor.send({ type: "INTERRUPT_ACKED", attemptId });
    expect(r.state()).toBe("queuedAtProvider");
    r.terminal("interrupted");
    expect(r.state()).toBe("interrupted");
  });

  it("before it is accepted, the interrupt is answered at once and delivered once the provider has the turn", () => {
    const r = queuedAtProvider();
    r.actor.send({ type: "INTERRUPT" });
    expect(r.outcomes()).toEqual([{ command: "interrupt", via: "native", runId: "run_1" }]);
    expect(r.effects().map((e) => e.type)).toEqual(["startTurn"]);
    r.actor.send({ type: "INTERRUPT" });
    expect(r.outcomes().at(-1)).toMatchObject({ via: "already_requested" });
    r.accept();
    expect(r.state()).toBe("queuedAtProvider");
    expect(r.effects().at(-1)).toEqual({
      type: "interruptTurn",
      threadId: "thr_1",
      runId: "run_1",
      attemptId: r.attempt().attemptId,
    });
    expect(r.effects()).toHaveLength(2);
  });

  it("without a native interrupt: refused, even where a session stop is allowed (it would end the turn ahead)", () => {
    for (const accepted of [false, true]) {
      const r = queuedAtProvider(noInterrupt, { allowSessionStopInterrupt: true });
      if (accepted) r.accept();
      r.clear();
      r.actor.send({ type: "INTERRUPT" });
      expect(r.records()).toEqual([
        expect.objectContaining({ policy: "interrupt_unsupported", outcome: "refused", runId: "run_1" }),
      ]);
      expect(r.outcomes()).toEqual([
        expect.objectContaining({ command: "interrupt", refused: "capability_unsupported" }),
      ]);
      expect(r.effects()).toEqual([]);
    }
  });

  it("an interrupt the provider never took for the queued turn is reported, and the caller can try again", () => {
    const r = queuedAtProvider();
    r.accept();
    const { attemptId } = r.attempt();
    r.actor.send({ type: "INTERRUPT" });
    r.actor.send({ type: "INTERRUPT_FAILED", attemptId: "att_other", message: "not mine", attempts: 1 });
    expect(r.records().some((e) => e.type === "interrupt.failed")).toBe(false);
    r.actor.send({ type: "INTERRUPT_FAILED", attemptId, message: "no such turn", attempts: 2 });
    expect(r.records().at(-1)).toMatchObject({ type: "interrupt.failed", attemptId, attempts: 2 });
    r.actor.send({ type: "INTERRUPT" });
    expect(r.outcomes().at(-1)).toEqual({ command: "interrupt", via: "native", runId: "run_1" });
  });

  it("a turn the provider took up is interrupted like any running turn: by session stop where allowed", () => {
    const r = queuedAtProvider(noInterrupt, { allowSessionStopInterrupt: true });
    r.accept();
    r.actor.send({ type: "TURN_STARTED", attemptId: r.attempt().attemptId });
    r.clear();
    r.actor.send({ type: "INTERRUPT" });
    expect(r.outcomes()).toEqual([{ command: "interrupt", via: "session_stop", runId: "run_1" }]);
  });

  it("a turn announced before the provider's reply was taken up: a later restart's attempt is not queued", () => {
    const r = queuedAtProvider(noSteer);
    r.actor.send({ type: "TURN_STARTED", attemptId: r.attempt().attemptId });
    expect(r.state()).toEqual({ active: "running" });
    r.actor.send({ type: "STEER", text: "go left", messageId: "msg_2" });
    r.terminal("interrupted", r.attempt());
    const second = r.attempt();
    expect(second).toMatchObject({ ordinal: 2, reason: "steering_restart" });
    expect(r.effects().at(-1)).toEqual({
      type: "startTurn",
      threadId: "thr_1",
      runId: "run_1",
      attemptId: second.attemptId,
      text: "go left",
    });
    r.accept(second);
    expect(r.state()).toEqual({ active: "running" });
  });
});

describe("run machine: what a refusal, a fallback or a dropped steer says", () => {
  it("a session stop refused for one other thread names it (singular)", () => {
    const r = running(noInterrupt, { allowSessionStopInterrupt: true });
    r.actor.send({ type: "INTERRUPT", sharedWith: ["thr_2"] });
    const [policy] = r.records();
    expect(policy).toMatchObject({
      policy: "session_stop_refused_shared",
      detail: expect.stringMatching(/would also end the runs of thread thr_2$/),
    });
    expect(r.outcomes()).toEqual([
      {
        command: "interrupt",
        refused: "capability_unsupported",
        capability: "turns.supportsInterrupt",
        detail: (policy as { detail: string }).detail,
      },
    ]);
  });

  it("an interrupt refused outright says stopping the session is not allowed", () => {
    const r = running(noInterrupt);
    r.actor.send({ type: "INTERRUPT" });
    expect(r.outcomes()).toEqual([
      expect.objectContaining({ detail: expect.stringMatching(/cannot interrupt.*session is not allowed/) }),
    ]);
  });

  it("a session stop says it is destructive", () => {
    const r = running(noInterrupt, { allowSessionStopInterrupt: true });
    r.actor.send({ type: "INTERRUPT" });
    expect(r.records()[0]).toMatchObject({
      policy: "interrupt_by_session_stop",
      detail: expect.stringMatching(/stopping its session \(destructive\)/),
    });
  });

  it("an interrupt-restart says which attempt is superseded and which carries the steer", () => {
    const r = running(noSteer);
    r.actor.send({ type: "STEER", text: "go left", messageId: "msg_2" });
    expect(r.records()[0]).toMatchObject({
      policy: "steer_by_interrupt_restart",
      detail: "attempt 1 superseded; attempt 2 will carry the steer",
    });
  });

  it("a steer refused outright says neither way to steer exists", () => {
    const r = running({ turns: { supportsActiveSteering: false, supportsSteeringByInterruptRestart: false } });
    r.actor.send({ type: "STEER", text: "go left", messageId: "msg_2" });
    expect(r.outcomes()).toEqual([
      expect.objectContaining({ detail: expect.stringMatching(/neither native steering nor interrupt-restart/) }),
    ]);
  });

  it("each steer conflict says what it conflicts with", () => {
    const starting = open();
    starting.actor.send({ type: "START" });
    starting.actor.send({ type: "STEER", text: "a", messageId: "msg_2" });
    starting.actor.send({ type: "STEER", text: "b", messageId: "msg_3" });
    const interrupting = running();
    interrupting.actor.send({ type: "INTERRUPT" });
    interrupting.actor.send({ type: "STEER", text: "a", messageId: "msg_2" });
    const restarting = running(noSteer);
    restarting.actor.send({ type: "STEER", text: "a", messageId: "msg_2" });
    restarting.actor.send({ type: "STEER", text: "b", messageId: "msg_3" });
    expect([starting, interrupting, restarting].map((r) => r.outcomes().at(-1))).toEqual([
      { command: "steer", refused: "conflict", detail: expect.stringMatching(/already waiting.*turn to start/) },
      { command: "steer", refused: "conflict", detail: expect.stringMatching(/interrupt of this run is pending/) },
      { command: "steer", refused: "conflict", detail: expect.stringMatching(/already restarting this run/) },
    ]);
  });

  it("an interrupt while the turn starts refuses a steer sent after it, and holds none", () => {
    const r = open();
    r.actor.send({ type: "START" });
    r.actor.send({ type: "INTERRUPT" });
    r.actor.send({ type: "STEER", text: "a", messageId: "msg_2" });
    expect(r.outcomes().at(-1)).toMatchObject({ refused: "conflict", detail: expect.stringMatching(/interrupt/) });
    r.accept();
    expect(r.effects().map((e) => e.type)).toEqual(["startTurn", "interruptTurn"]);
  });

  it("a steer the provider did not take is a warning naming why", () => {
    const r = running();
    r.actor.send({ type: "STEER_FAILED", attemptId: r.first.attemptId, message: "turn ended" });
    expect(r.records()).toEqual([
      { type: "warning", threadId: "thr_1", runId: "run_1", message: "steer was not delivered: turn ended" },
    ]);
  });

  it("a restart undone because the old attempt kept running says the steer was not delivered, and why", () => {
    const r = running(noSteer);
    r.actor.send({ type: "STEER", text: "go left", messageId: "msg_2" });
    r.actor.send({ type: "INTERRUPT_FAILED", attemptId: "att_other", message: "not mine", attempts: 1 });
    expect(r.state()).toBe("restarting");
    r.actor.send({ type: "INTERRUPT_FAILED", attemptId: r.first.attemptId, message: "no active turn", attempts: 3 });
    expect(steerRecord(r)).toEqual([
      {
        type: "warning",
        threadId: "thr_1",
        runId: "run_1",
        message: "steer was not delivered: the active attempt could not be interrupted (no active turn)",
      },
    ]);
    // The old attempt owns the run again: it can be steered (restarted) anew, and interrupted.
    r.actor.send({ type: "INTERRUPT" });
    expect(r.outcomes().at(-1)).toEqual({ command: "interrupt", via: "native", runId: "run_1" });
    expect(r.effects().at(-1)).toEqual({
      type: "interruptTurn",
      threadId: "thr_1",
      runId: "run_1",
      attemptId: r.first.attemptId,
    });
  });

  it("a steer held while the turn starts, then the run ending, says it ended before its turn ran", () => {
    const r = open();
    r.actor.send({ type: "START" });
    r.actor.send({ type: "STEER", text: "go left", messageId: "msg_2" });
    r.actor.send({ type: "CANCEL", reason: "runtime_closing" });
    expect(steerRecord(r)).toEqual([
      expect.objectContaining({
        message: 'steer was not delivered: the run ended cancelled before its turn ran ("go left")',
      }),
    ]);
  });

  it("a steer held for a restart, then the run ending, says it ended before it restarted", () => {
    const r = running(noSteer);
    r.actor.send({ type: "STEER", text: "go left", messageId: "msg_2" });
    r.actor.send({ type: "CANCEL", reason: "runtime_closing" });
    expect(steerRecord(r)).toEqual([
      expect.objectContaining({
        message: 'steer was not delivered: the run ended cancelled before it restarted ("go left")',
      }),
    ]);
    // The superseded attempt is the one settled.
    expect(r.emitted.find((e) => e.type === "settle")).toMatchObject({
      attemptId: r.first.attemptId,
      status: "cancelled",
      reason: "run_cancelled",
    });
  });

  it("a steer applied by a restart is not said dropped when attempt 2 ends", () => {
    const r = running(noSteer);
    r.actor.send({ type: "STEER", text: "go left", messageId: "msg_2" });
    r.terminal("interrupted", r.first);
    r.accept();
    r.actor.send({ type: "SESSION_LOST", message: "host exited" });
    expect(r.state()).toBe("failed");
    expect(steerRecord(r)).toEqual([]);
  });
});

describe("run machine: how the run's end is known and why", () => {
  it("the provider's terminal keeps its correlation strength; the runtime's own ends say `runtime`", () => {
    for (const correlation of ["weak", "inferred", "strong"] as const) {
      const r = running();
      r.actor.send({
        type: "TURN_TERMINAL",
        attemptId: r.first.attemptId,
        nodeId: r.first.rootNodeId,
        status: "completed",
        failure: null,
        correlation,
      });
      expect(r.records().at(-1)).toMatchObject({ type: "run.terminal", correlation });
    }
    const lost = running();
    lost.actor.send({ type: "SESSION_LOST", message: "gone" });
    expect(lost.records().at(-1)).toMatchObject({ type: "run.terminal", correlation: "runtime" });
  });

  it("a turn that could not start fails with its own failure, not a runtime reason", () => {
    const r = running();
    const failure = { failureClass: "provider_error", message: "late start failure", retryable: false };
    r.actor.send({ type: "START_FAILED", attemptId: "att_other", failure });
    expect(r.state()).toEqual({ active: "running" });
    r.actor.send({ type: "START_FAILED", attemptId: r.first.attemptId, failure });
    expect(r.records().at(-1)).toMatchObject({ status: "failed", reason: "start_failed", failure });
  });

  it("a cancelled run carries no failure", () => {
    const r = running();
    r.actor.send({ type: "CANCEL", reason: "runtime_closing" });
    expect(r.records().at(-1)).toMatchObject({ failure: null, correlation: "runtime" });
  });

  it("a request of another attempt is fenced under its own event type", () => {
    const r = running();
    r.actor.send({ type: "REQUEST_OPENED", attemptId: "att_other", requestId: "req_1", event: opened("req_1") });
    expect(r.records()).toEqual([
      {
        type: "event.fenced",
        threadId: "thr_1",
        runId: "run_1",
        attemptId: "att_other",
        providerEventType: "request.opened",
      },
    ]);
    expect(r.state()).toEqual({ active: "running" });
  });
});

describe("run machine: a held intervention is delivered once", () => {
  it("an interrupt held while the queued turn was handed over is not sent again when the turn runs", () => {
    const r = queuedAtProvider();
    r.actor.send({ type: "INTERRUPT" });
    r.accept();
    r.actor.send({ type: "TURN_STARTED", attemptId: r.attempt().attemptId });
    expect(r.state()).toEqual({ active: "running" });
    expect(r.effects().map((e) => e.type)).toEqual(["startTurn", "interruptTurn"]);
  });

  it("a steer held while the turn started, once delivered, is not said dropped when the run ends", () => {
    const r = open();
    r.actor.send({ type: "START" });
    r.actor.send({ type: "STEER", text: "go left", messageId: "msg_2" });
    r.accept();
    expect(r.effects().at(-1)).toMatchObject({ type: "steerTurn", text: "go left" });
    r.terminal("completed");
    expect(r.state()).toBe("completed");
    expect(steerRecord(r)).toEqual([]);
  });

  it("a steer held for a restart and then interrupted says so, quoting it", () => {
    const r = running(noSteer);
    r.actor.send({ type: "STEER", text: "go left", messageId: "msg_2" });
    r.actor.send({ type: "INTERRUPT" });
    expect(steerRecord(r)).toEqual([
      {
        type: "warning",
        threadId: "thr_1",
        runId: "run_1",
        message: 'steer was not delivered: the run was interrupted first ("go left")',
      },
    ]);
  });

  it("a queued turn whose first sign of life was a request: a restart's attempt is never handed over as queued", () => {
    const r = queuedAtProvider(noSteer);
    const first = r.attempt();
    r.actor.send({ type: "REQUEST_OPENED", attemptId: first.attemptId, requestId: "req_1", event: opened("req_1") });
    expect(r.state()).toEqual({ active: "waiting" });
    r.actor.send({ type: "REQUEST_SETTLED", requestId: "req_1" });
    expect(r.state()).toEqual({ active: "running" });
    r.actor.send({ type: "STEER", text: "go left", messageId: "msg_2" });
    r.clear();
    r.terminal("interrupted", first);
    const second = r.attempt();
    expect(second).toMatchObject({ ordinal: 2, reason: "steering_restart" });
    expect(runStates(r)).toEqual(["starting"]);
    expect(r.effects()).toEqual([
      { type: "startTurn", threadId: "thr_1", runId: "run_1", attemptId: second.attemptId, text: "go left" },
    ]);
  });

  it("a request settling that the run does not wait on leaves it waiting on its own", () => {
    const r = running();
    r.actor.send({ type: "REQUEST_OPENED", attemptId: r.first.attemptId, requestId: "req_1", event: opened("req_1") });
    r.actor.send({ type: "REQUEST_SETTLED", requestId: "req_other" });
    expect(r.state()).toEqual({ active: "waiting" });
    r.actor.send({ type: "REQUEST_SETTLED", requestId: "req_1" });
    expect(r.state()).toEqual({ active: "running" });
  });
});
