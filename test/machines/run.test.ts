import { describe, expect, it } from "vitest";
import { open, opened, running } from "./runHarness.js";

/**
 * The run machine alone: one user turn and its attempts, from start to terminal.
 * Expectations come from the domain model: the Run and RunAttempt lifecycles, invariants 3
 * and 4, the start-run flow (root terminal, then the completion barrier, then the terminal)
 * and the approvals flow (a request puts the run waiting). What a caller does to a running
 * turn (interrupt, steer) is in runInterventions.test.ts.
 */

describe("run machine: lifecycle", () => {
  it("a started run begins attempt 1 with its root node, is starting, and asks for the turn", () => {
    const r = open();
    expect(r.state()).toBe("queued");
    r.actor.send({ type: "START" });
    expect(r.state()).toBe("starting");
    const a = r.attempt();
    expect(a).toEqual({
      type: "attempt.started",
      threadId: "thr_1",
      runId: "run_1",
      attemptId: expect.any(String),
      ordinal: 1,
      reason: "initial",
      rootNodeId: expect.any(String),
      text: "hello",
    });
    expect(r.types()).toEqual(["attempt.started", "run.state"]);
    expect(r.records()[1]).toMatchObject({ type: "run.state", status: "starting" });
    expect(r.effects()).toEqual([
      { type: "startTurn", threadId: "thr_1", runId: "run_1", attemptId: a.attemptId, text: "hello" },
    ]);
  });

  it("the provider accepting the turn binds it to the attempt, and the run is running", () => {
    const r = open();
    r.actor.send({ type: "START" });
    r.accept();
    expect(r.state()).toEqual({ active: "running" });
    expect(r.records().slice(2)).toEqual([
      {
        type: "attempt.turn_bound",
        threadId: "thr_1",
        runId: "run_1",
        attemptId: r.attempt().attemptId,
        providerThreadId: "pth_1",
        providerTurnId: "ptu_1",
        nativeTurnRef: "turn-1",
      },
      { type: "run.state", threadId: "thr_1", runId: "run_1", status: "running" },
    ]);

    const started = open();
    started.actor.send({ type: "START" });
    started.actor.send({ type: "TURN_STARTED", attemptId: "att_other" });
    expect(started.state()).toBe("starting");
    started.actor.send({ type: "TURN_STARTED", attemptId: started.attempt().attemptId });
    expect(started.state()).toEqual({ active: "running" });
  });

  it(
    "the active attempt's provider events are recorded as they come; " + "another attempt's are fenced, never applied",
    () => {
      const r = running();
      r.actor.send({ type: "PROVIDER", attemptId: r.first.attemptId, event: r.delta(r.first.attemptId, "hi") });
      r.actor.send({ type: "PROVIDER", attemptId: "att_stale", event: r.delta("att_stale", "late") });
      expect(r.records()).toEqual([
        r.delta(r.first.attemptId, "hi"),
        {
          type: "event.fenced",
          threadId: "thr_1",
          runId: "run_1",
          attemptId: "att_stale",
          providerEventType: "node.delta",
        },
      ]);
    },
  );

  it.each(["completed", "interrupted", "failed", "cancelled"] as const)(
    "the active attempt's root terminal (%s) ends the run with that status: " +
      "settled first, then the attempt and run terminals, then the thread is told",
    (status) => {
      const r = running();
      const failure =
        status === "failed" ? { failureClass: "provider_error", message: "boom", retryable: false } : null;
      r.terminal(status, r.first, r.first.rootNodeId, failure);
      expect([r.state(), r.actor.getSnapshot().status]).toEqual([status, "done"]);
      const { attemptId } = r.first;
      expect(r.emitted).toEqual([
        { type: "settle", threadId: "thr_1", runId: "run_1", attemptId, status, reason: `run_${status}` },
        { type: "record", event: { type: "attempt.terminal", threadId: "thr_1", runId: "run_1", attemptId, status } },
        {
          type: "record",
          event: {
            type: "run.terminal",
            threadId: "thr_1",
            runId: "run_1",
            status,
            reason: null,
            failure,
            correlation: "strong",
          },
        },
        { type: "effect", effect: { type: "runFinished", threadId: "thr_1", runId: "run_1" } },
      ]);
    },
  );

  it("a child's terminal never ends the run (invariant 3): it is fenced and the run goes on", () => {
    const r = running();
    r.terminal("completed", r.first, "nod_child");
    expect(r.state()).toEqual({ active: "running" });
    expect(r.records()).toEqual([
      {
        type: "event.fenced",
        threadId: "thr_1",
        runId: "run_1",
        attemptId: r.first.attemptId,
        providerEventType: "TURN_TERMINAL",
      },
    ]);
  });

  it("a request puts the run waiting; it runs again once the last pending request settled", () => {
    const r = running();
    r.actor.send({ type: "REQUEST_OPENED", attemptId: r.first.attemptId, requestId: "req_1", event: opened("req_1") });
    expect(r.state()).toEqual({ active: "waiting" });
    r.actor.send({ type: "REQUEST_OPENED", attemptId: r.first.attemptId, requestId: "req_2", event: opened("req_2") });
    r.actor.send({ type: "REQUEST_SETTLED", requestId: "req_1" });
    expect(r.state()).toEqual({ active: "waiting" });
    r.actor.send({ type: "REQUEST_SETTLED", requestId: "req_2" });
    expect(r.state()).toEqual({ active: "running" });
    const states = r.records().flatMap((e) => (e.type === "run.state" ? [e.status] : []));
    expect([states[0], states.at(-1)]).toEqual(["waiting", "running"]);
    expect(r.records().filter((e) => e.type === "request.opened")).toEqual([opened("req_1"), opened("req_2")]);
  });

  it("a request while the turn is still starting is evidence it runs: the run is waiting", () => {
    const r = open();
    r.actor.send({ type: "START" });
    r.actor.send({
      type: "REQUEST_OPENED",
      attemptId: r.attempt().attemptId,
      requestId: "req_1",
      event: opened("req_1"),
    });
    expect(r.state()).toEqual({ active: "waiting" });
    expect(
      r
        .records()
        .filter((e) => e.type === "run.state")
        .at(-1),
    ).toMatchObject({ status: "waiting" });
  });

  it("a turn that failed to start fails the run with the provider's failure", () => {
    const r = open();
    r.actor.send({ type: "START" });
    const failure = { failureClass: "thread_unavailable", message: "no thread", retryable: true };
    r.actor.send({ type: "START_FAILED", attemptId: r.attempt().attemptId, failure });
    expect(r.state()).toBe("failed");
    expect(r.records().at(-1)).toEqual({
      type: "run.terminal",
      threadId: "thr_1",
      runId: "run_1",
      status: "failed",
      reason: "start_failed",
      failure,
      correlation: "runtime",
    });
  });

  it("a lost session fails the run, retryable; so does a turn gone silent (never left running)", () => {
    const lost = running();
    lost.actor.send({ type: "SESSION_LOST", message: "host exited" });
    expect(lost.state()).toBe("failed");
    expect(lost.emitted[0]).toMatchObject({ type: "settle", status: "failed", attemptId: lost.first.attemptId });
    expect(lost.records().at(-1)).toMatchObject({
      type: "run.terminal",
      status: "failed",
      reason: "provider_session_lost",
      failure: { failureClass: "provider_session_lost", message: "host exited", retryable: true },
    });

    const silent = running();
    silent.actor.send({ type: "TURN_SILENT", attemptId: "att_other", message: "quiet" });
    expect(silent.state()).toEqual({ active: "running" });
    silent.actor.send({ type: "TURN_SILENT", attemptId: silent.first.attemptId, message: "quiet for 60 s" });
    expect(silent.state()).toBe("failed");
    expect(silent.records().at(-1)).toMatchObject({
      reason: "turn_silent",
      failure: { failureClass: "turn_silent", retryable: true },
    });
  });

  it("the runtime giving up on a started run ends it cancelled and settled, with the runtime's reason", () => {
    const r = running();
    r.actor.send({ type: "CANCEL", reason: "runtime_closing" });
    expect(r.state()).toBe("cancelled");
    expect(r.emitted[0]).toMatchObject({ type: "settle", status: "cancelled" });
    expect(r.records().at(-1)).toMatchObject({
      type: "run.terminal",
      status: "cancelled",
      reason: "runtime_closing",
      failure: null,
    });
  });

  it(
    "a queued run cancelled or interrupted never started: " +
      "no attempt, nothing to settle; the interrupt is answered not_started",
    () => {
      const c = open();
      c.actor.send({ type: "CANCEL", reason: "thread_deleted" });
      expect(c.state()).toBe("cancelled");
      expect(c.emitted).toEqual([
        {
          type: "record",
          event: {
            type: "run.terminal",
            threadId: "thr_1",
            runId: "run_1",
            status: "cancelled",
            reason: "thread_deleted",
            failure: null,
            correlation: "runtime",
          },
        },
        { type: "effect", effect: { type: "runFinished", threadId: "thr_1", runId: "run_1" } },
      ]);

      const i = open();
      i.actor.send({ type: "INTERRUPT" });
      expect(i.records()).toEqual([
        { type: "interrupt.requested", threadId: "thr_1", runId: "run_1", attemptId: null, via: "not_started" },
        {
          type: "run.terminal",
          threadId: "thr_1",
          runId: "run_1",
          status: "cancelled",
          reason: "interrupted_before_start",
          failure: null,
          correlation: "runtime",
        },
      ]);
      expect(i.outcomes()).toEqual([{ command: "interrupt", via: "not_started", runId: "run_1" }]);
      expect(i.emitted.some((e) => e.type === "settle")).toBe(false);
    },
  );
});
