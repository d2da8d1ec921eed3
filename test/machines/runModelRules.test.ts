import { describe, expect, it } from "vitest";
import { ownsRun } from "../../src/machines/run.js";
import { noInterrupt, noSteer, open, running, steerRecord } from "./runHarness.js";

/**
 * The run machine's guards (runModel.ts) that run.test.ts and runInterventions.test.ts leave open (issue 14: each
 * decision pinned by a behaviour test). Expectations come from the domain model: only the root node of the attempt
 * that owns the run ends it (invariant 4); an interrupt-restart waits for the superseded attempt's own root terminal;
 * an interrupt falls back to stopping the session only where allowed and only when no other thread shares it; a held
 * steer that will never reach the provider is said so, with its text.
 */

describe("run machine: whose terminal ends the run (invariant 4)", () => {
  it("a terminal naming the active attempt's root node but another attempt is fenced: the run goes on", () => {
    const r = running();
    r.actor.send({
      type: "TURN_TERMINAL",
      attemptId: "att_other",
      nodeId: r.first.rootNodeId,
      status: "completed",
      failure: null,
    });
    expect(r.state()).toEqual({ active: "running" });
    expect(r.records()).toEqual([
      expect.objectContaining({ type: "event.fenced", attemptId: "att_other", providerEventType: "TURN_TERMINAL" }),
    ]);
  });

  it("while the turn starts, only the attempt's root terminal ends the run; a child's is fenced", () => {
    const r = open();
    r.actor.send({ type: "START" });
    r.clear();
    r.terminal("failed", r.attempt(), "nod_child");
    expect(r.state()).toBe("starting");
    expect(r.types()).toEqual(["event.fenced"]);
    r.terminal("failed", r.attempt());
    expect(r.state()).toBe("failed");
  });

  it("each attempt has its own root node, and ids read as what they are (att_, nod_)", () => {
    const r = running(noSteer);
    r.actor.send({ type: "STEER", text: "go left", messageId: "msg_2" });
    r.terminal("interrupted", r.first);
    const second = r.attempt();
    expect(second.ordinal).toBe(2);
    for (const a of [r.first, second]) {
      expect(a.attemptId).toMatch(/^att_/);
      expect(a.rootNodeId).toMatch(/^nod_/);
    }
    expect(second.rootNodeId).not.toBe(r.first.rootNodeId);
    // The first attempt's root no longer ends the run; the second's does.
    r.accept(second);
    r.terminal("completed", second, r.first.rootNodeId);
    expect(r.state()).toEqual({ active: "running" });
    r.terminal("completed", second);
    expect(r.state()).toBe("completed");
  });

  it("the same run and ordinal always give the same attempt and root ids (a replay yields the same ids)", () => {
    const ids = () => {
      const r = open();
      r.actor.send({ type: "START" });
      return [r.attempt().attemptId, r.attempt().rootNodeId];
    };
    expect(ids()).toEqual(ids());
    const other = open({}, { runId: "run_2" });
    other.actor.send({ type: "START" });
    expect(other.attempt().attemptId).not.toBe(ids()[0]);
  });

  it("a run with no attempt owning it (queued, or between attempts) is owned by no attempt, named or not", () => {
    const queued = open();
    expect(ownsRun(queued.actor.getSnapshot().context, null)).toBe(false);
    const restarting = running(noSteer);
    restarting.actor.send({ type: "STEER", text: "go left", messageId: "msg_2" });
    const context = restarting.actor.getSnapshot().context;
    expect(context.activeAttemptId).toBeNull();
    expect(ownsRun(context, null)).toBe(false);
    expect(ownsRun(context, restarting.first.attemptId)).toBe(false);
  });
});

describe("run machine: the terminal an interrupt-restart waits for", () => {
  /** A run on its second attempt, restarting it for a second steer. */
  function secondRestart() {
    const r = running(noSteer);
    r.actor.send({ type: "STEER", text: "go left", messageId: "msg_2" });
    r.terminal("interrupted", r.first);
    const second = r.attempt();
    r.accept(second);
    r.actor.send({ type: "STEER", text: "go right", messageId: "msg_3" });
    expect(r.state()).toBe("restarting");
    r.clear();
    return { ...r, second };
  }

  it("a late root terminal of an attempt superseded earlier is fenced: the restart waits for its own", () => {
    const r = secondRestart();
    r.terminal("interrupted", r.first);
    expect(r.state()).toBe("restarting");
    expect(r.types()).toEqual(["event.fenced"]);
    expect(r.attempts()).toHaveLength(2);
    r.terminal("interrupted", r.second);
    expect(r.state()).toBe("starting");
    expect(r.attempt()).toMatchObject({ ordinal: 3, text: "go right", reason: "steering_restart" });
  });

  it("a child's terminal of the superseded attempt is fenced: the restart waits for its root", () => {
    const r = running(noSteer);
    r.actor.send({ type: "STEER", text: "go left", messageId: "msg_2" });
    r.clear();
    r.terminal("interrupted", r.first, "nod_child");
    expect(r.state()).toBe("restarting");
    expect(r.types()).toEqual(["event.fenced"]);
    expect(r.effects()).toEqual([]);
  });

  it("interrupted during the second restart: only that restart's superseded root ends the run", () => {
    const r = secondRestart();
    r.actor.send({ type: "INTERRUPT" });
    expect(r.state()).toBe("interruptingRestart");
    r.terminal("interrupted", r.first);
    r.terminal("interrupted", r.second, "nod_child");
    expect(r.state()).toBe("interruptingRestart");
    r.terminal("interrupted", r.second);
    expect(r.state()).toBe("interrupted");
    expect(r.attempts()).toHaveLength(2);
  });
});

describe("run machine: which interrupt fallback applies", () => {
  it("where stopping the session is not allowed, a shared session changes nothing: the plain refusal", () => {
    const r = running(noInterrupt);
    r.actor.send({ type: "INTERRUPT", sharedWith: ["thr_2"] });
    expect(r.records()).toEqual([expect.objectContaining({ policy: "interrupt_unsupported", outcome: "refused" })]);
    expect([r.effects(), r.state()]).toEqual([[], { active: "running" }]);
  });

  it("where it is allowed, a session shared with other threads is not stopped: refused, naming them", () => {
    const r = running(noInterrupt, { allowSessionStopInterrupt: true });
    r.actor.send({ type: "INTERRUPT", sharedWith: ["thr_2", "thr_3"] });
    expect(r.records()).toEqual([
      expect.objectContaining({
        policy: "session_stop_refused_shared",
        outcome: "refused",
        detail: expect.stringContaining("threads thr_2, thr_3"),
      }),
    ]);
    expect([r.effects(), r.state()]).toEqual([[], { active: "running" }]);
  });

  it("where it is allowed, a session shared with nobody (an empty list) is stopped", () => {
    const r = running(noInterrupt, { allowSessionStopInterrupt: true });
    r.actor.send({ type: "INTERRUPT", sharedWith: [] });
    expect(r.effects()).toEqual([
      { type: "stopSession", threadId: "thr_1", runId: "run_1", attemptId: r.first.attemptId },
    ]);
  });

  it("a native interrupt is used whenever the provider has one, shared session or not", () => {
    const r = running({}, { allowSessionStopInterrupt: true });
    r.actor.send({ type: "INTERRUPT", sharedWith: ["thr_2"] });
    expect(r.effects()).toEqual([
      { type: "interruptTurn", threadId: "thr_1", runId: "run_1", attemptId: r.first.attemptId },
    ]);
  });
});

describe("run machine: a held steer that is dropped is said so, with its text", () => {
  it("interrupted while the turn starts: the warning names why and quotes the steer", () => {
    const r = open();
    r.actor.send({ type: "START" });
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
});
