import { describe, expect, it } from "vitest";
import { defineCapabilities, fullCapabilities } from "../../src/capabilities/index.js";
import { openThread } from "./threadHarness.js";

/**
 * The thread machine's decisions that thread.test.ts leaves open (issue 14: each decision pinned by a behaviour test).
 * Expectations come from the domain model's follow-up flow (a queued follow-up waits for the turn boundary; a provider
 * that queues natively holds it itself, behind the active turn, in order), the capability seed (a model or mode change
 * the provider cannot make in its session gets a new session; a queue the provider cannot hold is held by the
 * runtime), its rollback flow, and the degradation registry (each fallback or refusal a named `policy.applied`, naming
 * the capability the decision read, and a detail that says what happened to what).
 */

const open = openThread;

const queues = defineCapabilities({ turns: { supportsQueuedMessages: true } });
const queuesNoSteer = defineCapabilities({ turns: { supportsQueuedMessages: true, supportsActiveSteering: false } });
const queuesNoInterrupt = defineCapabilities({ turns: { supportsQueuedMessages: true, supportsInterrupt: false } });
const noInterrupt = defineCapabilities({ turns: { supportsInterrupt: false } });

describe("thread machine: a run in the provider's queue keeps the record its session announced (regression)", () => {
  it("`auto` steers it as that record says once it is active, not as the record declared at submit", () => {
    const t = open();
    t.submit("run_1", "auto", queues);
    t.submit("run_2", "queue", queues);
    // run_2's session announces it cannot steer while run_1 is still the active run.
    t.actor.send({ type: "RUN_CAPABILITIES", runId: "run_2", capabilities: queuesNoSteer });
    t.finish("run_1");
    expect(t.active()).toBe("run_2");
    t.clear();
    t.submit("run_3", "auto", queues);
    expect(t.outcomes()).toMatchObject([{ disposition: "queued" }]);
  });
});

describe("thread machine: which follow-ups the provider's own queue holds", () => {
  it("a follow-up for another target waits in the runtime: not that provider's to hold, and no degradation", () => {
    const t = open();
    t.submit("run_1", "auto", queues);
    t.submit("run_2", "queue", queues, "beta");
    expect(t.outcomes()[1]).toEqual({ command: "submit", disposition: "queued", runId: "run_2", queuePosition: 1 });
    expect(t.handed()).toEqual([["run_1", false]]);
    // Nothing is missing: the provider queues, the follow-up is just not for its session.
    expect(t.policies()).toEqual([]);
    t.finish("run_1");
    expect(t.handed()).toEqual([
      ["run_1", false],
      ["run_2", false],
    ]);
    expect(t.active()).toBe("run_2");
  });

  it("once one waits in the runtime, later follow-ups wait behind it there, even ones the provider could hold", () => {
    const t = open();
    t.submit("run_1", "auto", queues);
    t.submit("run_2", "queue", queues, "beta");
    t.submit("run_3", "queue", queues);
    expect(t.outcomes()[2]).toEqual({ command: "submit", disposition: "queued", runId: "run_3", queuePosition: 2 });
    expect(t.handed()).toEqual([["run_1", false]]);
    t.finish("run_1");
    t.finish("run_2");
    expect(t.handed().map(([runId]) => runId)).toEqual(["run_1", "run_2", "run_3"]);
  });

  it("a mode change since the active run started keeps its follow-ups out of the provider's queue", () => {
    const t = open();
    t.submit("run_1", "auto", queues);
    t.actor.send({
      type: "CHANGE_MODE",
      runtimeMode: { interaction: "plan", approvals: "never" },
      capabilities: queues,
    });
    t.submit("run_2", "queue", queues);
    expect(t.handed()).toEqual([["run_1", false]]);
    t.finish("run_1");
    expect(t.handed().at(-1)).toEqual(["run_2", false]);
  });

  it("changed settings are the next run's own: once it starts, its follow-ups go to the provider's queue again", () => {
    // Changed while idle: the next run starts with them.
    const idle = open();
    idle.actor.send({ type: "CHANGE_MODEL", model: "model-b", capabilities: queues });
    idle.submit("run_1", "auto", queues);
    idle.submit("run_2", "queue", queues);
    expect(idle.handed()).toEqual([
      ["run_1", false],
      ["run_2", true],
    ]);

    // Changed mid-run: the follow-up held by the runtime starts with them, and its own follow-ups queue natively.
    const busy = open();
    busy.submit("run_1", "auto", queues);
    busy.actor.send({ type: "CHANGE_MODEL", model: "model-b", capabilities: queues });
    busy.submit("run_2", "queue", queues);
    busy.finish("run_1");
    busy.submit("run_3", "queue", queues);
    expect(busy.handed()).toEqual([
      ["run_1", false],
      ["run_2", false],
      ["run_3", true],
    ]);
    expect(busy.outcomes().at(-1)).toEqual({
      command: "submit",
      disposition: "queued",
      runId: "run_3",
      queuePosition: 1,
    });
  });

  it("a run the provider held becomes the active one with its own record: `auto` then reads that record", () => {
    const t = open();
    t.submit("run_1", "auto", queues);
    t.submit("run_2", "queue", queuesNoSteer);
    t.finish("run_1");
    expect(t.active()).toBe("run_2");
    t.clear();
    // run_1's provider steered; run_2's record says it cannot: `auto` queues behind run_2.
    t.submit("run_3", "auto", queuesNoSteer);
    expect(t.outcomes()).toEqual([{ command: "submit", disposition: "queued", runId: "run_3", queuePosition: 1 }]);
    expect(t.effects()).toEqual([{ type: "startRun", threadId: "thr_1", runId: "run_3", queued: true }]);
  });

  it("a restart of a run the provider held reads that run's record: no interrupt there, refused", () => {
    const t = open();
    t.submit("run_1", "auto", queues);
    t.submit("run_2", "queue", queuesNoInterrupt);
    t.finish("run_1");
    t.clear();
    t.submit("run_3", "restart", queuesNoInterrupt);
    expect(t.outcomes()).toEqual([expect.objectContaining({ command: "submit", refused: "capability_unsupported" })]);
    expect(t.policies()).toEqual([expect.objectContaining({ policy: "interrupt_unsupported", runId: "run_2" })]);
  });

  it("the runs the provider holds become active one by one, in order, and each only once", () => {
    const t = open();
    t.submit("run_1", "auto", queues);
    t.submit("run_2", "queue", queues);
    t.submit("run_3", "queue", queues);
    t.submit("run_4", "queue", queues);
    expect(t.outcomes().at(-1)).toMatchObject({ runId: "run_4", queuePosition: 3 });
    const order = [t.active()];
    for (const runId of ["run_1", "run_2", "run_3"]) {
      t.finish(runId);
      order.push(t.active());
    }
    expect(order).toEqual(["run_1", "run_2", "run_3", "run_4"]);
    expect(t.state()).toBe("busy");
    t.finish("run_4");
    expect([t.state(), t.active()]).toEqual(["idle", null]);
    // Nothing was handed over twice.
    expect(t.handed().map(([runId]) => runId)).toEqual(["run_1", "run_2", "run_3", "run_4"]);
    // Runs the provider held are counted like any other: the next one is run 5.
    t.submit("run_5", "auto", queues);
    const ordinals = t.records().flatMap((r) => (r.type === "run.created" ? [r.ordinal] : []));
    expect(ordinals).toEqual([1, 2, 3, 4, 5]);
  });

  it("the provider's queue empties before the runtime's: a run the runtime held starts after those", () => {
    const t = open();
    t.submit("run_1", "auto", queues);
    t.submit("run_2", "queue", queues);
    t.submit("run_3", "queue", queues, "beta");
    t.finish("run_1");
    expect([t.active(), t.handed().length]).toEqual(["run_2", 2]);
    t.finish("run_2");
    expect(t.active()).toBe("run_3");
    expect(t.handed().at(-1)).toEqual(["run_3", false]);
  });

  it("a held run the provider dropped before it ran never becomes active; the next one does", () => {
    const t = open();
    t.submit("run_1", "auto", queues);
    t.submit("run_2", "queue", queues);
    t.submit("run_3", "queue", queues);
    t.finish("run_2");
    expect(t.active()).toBe("run_1");
    t.finish("run_1");
    expect(t.active()).toBe("run_3");
    t.finish("run_3");
    expect(t.state()).toBe("idle");
  });

  it("the runtime holds a queue only for a provider that cannot: the policy names the waiting run", () => {
    const t = open();
    t.submit("run_1", "auto", fullCapabilities());
    t.submit("run_2", "queue", fullCapabilities());
    expect(t.policies()).toEqual([
      expect.objectContaining({
        policy: "queue_held_by_runtime",
        runId: "run_2",
        detail: expect.stringContaining("run_2"),
      }),
    ]);
  });
});

describe("thread machine: runtime mode changes", () => {
  const plan = { interaction: "plan", approvals: "never" } as const;

  it("a mode change stays in the session where the provider can switch modes there, with no degradation", () => {
    const t = open();
    t.actor.send({ type: "CHANGE_MODE", runtimeMode: plan, capabilities: fullCapabilities() });
    expect(t.records()).toEqual([
      { type: "thread.mode_changed", threadId: "thr_1", runtimeMode: plan, via: "in_session" },
    ]);
  });

  it("otherwise it gets a new provider session, named, the detail saying which mode", () => {
    const t = open();
    t.submit("run_1", "auto", fullCapabilities());
    t.clear();
    const noSwitch = defineCapabilities({ sessions: { supportsRuntimeModeSwitchInSession: false } });
    t.actor.send({ type: "CHANGE_MODE", runtimeMode: plan, capabilities: noSwitch });
    expect(t.records()).toEqual([
      {
        type: "policy.applied",
        threadId: "thr_1",
        runId: null,
        policy: "mode_switch_new_session",
        capability: "sessions.supportsRuntimeModeSwitchInSession",
        outcome: "fallback",
        detail: expect.stringMatching(/cannot switch runtime modes in a session; mode plan with approvals never/),
      },
      { type: "thread.mode_changed", threadId: "thr_1", runtimeMode: plan, via: "new_session" },
    ]);
    expect(t.state()).toBe("busy");
  });

  it("a model change the provider cannot make in its session says which model gets the new session", () => {
    const t = open();
    const noSwitch = defineCapabilities({ sessions: { supportsModelSwitchInSession: false } });
    t.actor.send({ type: "CHANGE_MODEL", model: "model-b", capabilities: noSwitch });
    expect(t.policies()).toEqual([
      expect.objectContaining({ detail: expect.stringMatching(/cannot switch models.*model-b.*new provider session/) }),
    ]);
  });
});

describe("thread machine: what a refusal says", () => {
  it("a restart refused for want of an interrupt names the active run and why, in the record and the result", () => {
    const t = open();
    t.submit("run_1", "auto", noInterrupt);
    t.clear();
    t.submit("run_2", "restart", noInterrupt);
    const [policy] = t.policies();
    expect(policy).toMatchObject({ threadId: "thr_1", runId: "run_1", detail: expect.stringContaining("interrupt") });
    expect(t.outcomes()).toEqual([
      {
        command: "submit",
        refused: "capability_unsupported",
        capability: "turns.supportsInterrupt",
        detail: policy!.detail,
      },
    ]);
    // Refused: nothing queued; the next follow-up is the first in line.
    t.submit("run_3", "queue", noInterrupt);
    expect(t.outcomes().at(-1)).toMatchObject({ runId: "run_3", queuePosition: 1 });
  });

  it("a rollback refused as a conflict says what it conflicts with", () => {
    const t = open();
    t.submit("run_2", "auto", fullCapabilities());
    t.clear();
    t.rollback();
    expect(t.outcomes()).toEqual([
      { command: "rollback", refused: "conflict", detail: expect.stringMatching(/active or queued run/) },
    ]);
  });

  it("a rollback with neither a checkpoint nor a provider rollback names the run and says what is missing", () => {
    const t = open();
    t.rollback({ capabilities: defineCapabilities({ threads: { canRollbackThread: false } }), hasCheckpoint: false });
    const [policy] = t.policies();
    expect(policy).toMatchObject({
      threadId: "thr_1",
      runId: "run_1",
      detail: expect.stringMatching(/no app checkpoint.*cannot roll back/),
    });
    expect(t.outcomes()).toEqual([
      {
        command: "rollback",
        refused: "capability_unsupported",
        capability: "checkpointing.appCanCheckpointFilesystem",
        detail: policy!.detail,
      },
    ]);
  });
});

describe("thread machine: which rollback applies", () => {
  it("later runs that reached only another provider thread still make the thread divergent, not files-only", () => {
    const t = open();
    t.rollback({ laterTurns: 0, laterElsewhere: true });
    expect(t.effects()).toEqual([{ type: "rollbackThread", threadId: "thr_1", toRunId: "run_1", via: "divergent" }]);
    expect(t.policies()).toEqual([
      {
        type: "policy.applied",
        threadId: "thr_1",
        runId: "run_1",
        policy: "rollback_divergent",
        // The situation calls for it, not a missing capability: none is named.
        capability: null,
        outcome: "fallback",
        detail: expect.stringMatching(/another provider thread.*divergent/),
      },
    ]);
  });

  it("a thread that rolls back but whose provider cannot roll its conversation back: divergent, naming that", () => {
    const t = open();
    const capabilities = defineCapabilities({ checkpointing: { providerCanRollbackConversation: false } });
    t.rollback({ capabilities });
    expect(t.policies()).toEqual([
      expect.objectContaining({
        policy: "rollback_divergent",
        capability: "checkpointing.providerCanRollbackConversation",
        detail: expect.stringMatching(/cannot roll its conversation back.*restored from the checkpoint/),
      }),
    ]);
    expect(t.outcomes()).toEqual([{ command: "rollback", via: "divergent", threadId: "thr_1" }]);
  });

  it("a provider that cannot roll its threads back is named as such, with its detail", () => {
    const t = open();
    t.rollback({ capabilities: defineCapabilities({ threads: { canRollbackThread: false } }) });
    expect(t.policies()).toEqual([
      expect.objectContaining({
        capability: "threads.canRollbackThread",
        detail: expect.stringMatching(/^the provider cannot roll its threads back; files are restored/),
      }),
    ]);
  });

  it("later runs elsewhere on a provider that could not check its rollback: divergent, not trusted", () => {
    const t = open();
    const untrusted = defineCapabilities({
      checkpointing: { providerRollbackReturnsSnapshot: false, providerCanReadConversationSnapshot: false },
    });
    t.rollback({ capabilities: untrusted, laterElsewhere: true });
    expect(t.policies().map((p) => p.policy)).toEqual(["rollback_divergent"]);
    expect(t.effects()).toEqual([expect.objectContaining({ via: "divergent" })]);
  });

  it("a rollback by resume says how many turns the provider drops", () => {
    const t = open();
    const untrusted = defineCapabilities({
      checkpointing: { providerRollbackReturnsSnapshot: false, providerCanReadConversationSnapshot: false },
    });
    t.rollback({ capabilities: untrusted, laterTurns: 3 });
    expect(t.policies()).toEqual([
      expect.objectContaining({
        policy: "rollback_by_resume",
        threadId: "thr_1",
        detail: expect.stringMatching(/drops the last 3 turn\(s\).*trusted/),
      }),
    ]);
  });

  it("a provider whose rollback returns the result is checked even where it cannot read its conversation", () => {
    const t = open();
    const returns = defineCapabilities({ checkpointing: { providerCanReadConversationSnapshot: false } });
    t.rollback({ capabilities: returns });
    expect(t.policies()).toEqual([]);
    expect(t.effects()).toEqual([expect.objectContaining({ via: "provider_rollback" })]);
  });

  it("a run finishing while the thread rolls back leaves the queue; the others start after it, in order", () => {
    const t = open();
    t.rollback();
    t.submit("run_2", "auto", fullCapabilities());
    t.submit("run_3", "auto", fullCapabilities());
    t.finish("run_2");
    t.actor.send({ type: "ROLLBACK_DONE" });
    expect([t.state(), t.handed()]).toEqual(["busy", [["run_3", false]]]);
    t.finish("run_3");
    expect(t.state()).toBe("idle");
  });
});
