import { describe, expect, it } from "vitest";
import { defineCapabilities, fullCapabilities } from "../../src/capabilities/index.js";
import { openThread } from "./threadHarness.js";

/**
 * The thread machine alone: an app thread serializes its runs. Expectations come from the
 * domain model's follow-up flow (`auto` starts if idle, steers if active and steerable, else
 * queues; `queue` waits for the turn boundary; `steer`; `restart`), its rollback flow (provider
 * first, then files; without provider rollback the thread is divergent), the capability seed's
 * model-switch policy, and the degradation registry (each missing capability a named
 * `policy.applied`, each refusal a typed outcome).
 */

const open = openThread;

const noSteer = defineCapabilities({ turns: { supportsActiveSteering: false } });
const noInterrupt = defineCapabilities({ turns: { supportsInterrupt: false } });

describe("thread machine: runs and follow-ups", () => {
  it("a message to an idle thread creates run 1 and starts it at once", () => {
    const t = open();
    expect(t.state()).toBe("idle");
    t.submit("run_1");
    expect(t.state()).toBe("busy");
    expect(t.records()).toEqual([
      {
        type: "run.created",
        threadId: "thr_1",
        runId: "run_1",
        ordinal: 1,
        providerTarget: "alpha",
        userMessageId: "msg_run_1",
        text: "text of run_1",
        mode: "auto",
      },
    ]);
    expect(t.effects()).toEqual([{ type: "startRun", threadId: "thr_1", runId: "run_1" }]);
    expect(t.outcomes()).toEqual([{ command: "submit", disposition: "started", runId: "run_1", queuePosition: 0 }]);
  });

  it("runs are counted per thread, and a thread rebuilt from its log goes on counting where it left off", () => {
    const t = open();
    t.submit("run_1");
    t.submit("run_2", "queue");
    const ordinals = t.records().flatMap((r) => (r.type === "run.created" ? [r.ordinal] : []));
    expect(ordinals).toEqual([1, 2]);

    const rebuilt = open({ nextOrdinal: 7 });
    rebuilt.submit("run_7");
    expect(rebuilt.records()[0]).toMatchObject({ type: "run.created", ordinal: 7 });
  });

  it(
    "a queued follow-up waits for the turn boundary, never mid-turn; " +
      "the runtime holds it when the provider cannot queue, and says so",
    () => {
      const t = open();
      t.submit("run_1");
      t.submit("run_2", "queue");
      t.submit("run_3", "queue");
      expect(t.outcomes().slice(1)).toEqual([
        { command: "submit", disposition: "queued", runId: "run_2", queuePosition: 1 },
        { command: "submit", disposition: "queued", runId: "run_3", queuePosition: 2 },
      ]);
      expect(t.started()).toEqual(["run_1"]);
      expect(t.policies()).toEqual([
        expect.objectContaining({
          policy: "queue_held_by_runtime",
          capability: "turns.supportsQueuedMessages",
          outcome: "fallback",
          threadId: "thr_1",
          runId: "run_2",
        }),
        expect.objectContaining({ policy: "queue_held_by_runtime", runId: "run_3" }),
      ]);
      t.actor.send({ type: "RUN_FINISHED", runId: "run_1" });
      expect(t.started()).toEqual(["run_1", "run_2"]);
      t.actor.send({ type: "RUN_FINISHED", runId: "run_2" });
      expect(t.started()).toEqual(["run_1", "run_2", "run_3"]);
      t.actor.send({ type: "RUN_FINISHED", runId: "run_3" });
      expect(t.state()).toBe("idle");
    },
  );

  it("a provider that queues follow-ups itself is handed them at once, in order, with no degradation", () => {
    const queues = defineCapabilities({ turns: { supportsQueuedMessages: true } });
    const t = open();
    t.submit("run_1", "auto", queues);
    t.submit("run_2", "queue", queues);
    t.submit("run_3", "queue", queues);
    expect(t.outcomes().slice(1)).toMatchObject([
      { disposition: "queued", queuePosition: 1 },
      { disposition: "queued", queuePosition: 2 },
    ]);
    expect(t.policies()).toEqual([]);
    // The provider holds them: each is handed over now, marked as waiting in the provider's queue.
    expect(t.effects().filter((e) => e.type === "startRun")).toEqual([
      { type: "startRun", threadId: "thr_1", runId: "run_1" },
      { type: "startRun", threadId: "thr_1", runId: "run_2", queued: true },
      { type: "startRun", threadId: "thr_1", runId: "run_3", queued: true },
    ]);
    // At the boundary nothing is started again: the provider's next turn is the next active run.
    t.actor.send({ type: "RUN_FINISHED", runId: "run_1" });
    expect(t.actor.getSnapshot().context.activeRunId).toBe("run_2");
    // One the provider dropped from its queue (interrupted there) never becomes active.
    t.actor.send({ type: "RUN_FINISHED", runId: "run_3" });
    t.actor.send({ type: "RUN_FINISHED", runId: "run_2" });
    expect(t.state()).toBe("idle");
    expect(t.started()).toEqual(["run_1", "run_2", "run_3"]);
  });

  it("a follow-up the provider's queue cannot take (the model changed since) waits in the runtime", () => {
    const queues = defineCapabilities({ turns: { supportsQueuedMessages: true } });
    const t = open();
    t.submit("run_1", "auto", queues);
    t.actor.send({ type: "CHANGE_MODEL", model: "other", capabilities: queues });
    t.submit("run_2", "queue", queues);
    expect(t.started()).toEqual(["run_1"]);
    t.actor.send({ type: "RUN_FINISHED", runId: "run_1" });
    expect(
      t
        .effects()
        .filter((e) => e.type === "startRun")
        .at(-1),
    ).toEqual({
      type: "startRun",
      threadId: "thr_1",
      runId: "run_2",
    });
  });

  it("`auto` steers the active run when its provider steers natively, and queues when it does not", () => {
    const t = open();
    t.submit("run_1");
    t.submit("run_2", "auto");
    expect(t.outcomes()[1]).toEqual({ command: "submit", disposition: "steer", runId: "run_1" });
    expect(t.effects()[1]).toEqual({
      type: "steerRun",
      threadId: "thr_1",
      runId: "run_1",
      text: "text of run_2",
      messageId: "msg_run_2",
    });
    expect(t.records().filter((r) => r.type === "run.created")).toHaveLength(1);

    const q = open();
    q.submit("run_1", "auto", noSteer);
    q.submit("run_2", "auto", noSteer);
    expect(q.outcomes()[1]).toEqual({ command: "submit", disposition: "queued", runId: "run_2", queuePosition: 1 });
    expect(q.effects().map((e) => e.type)).toEqual(["startRun"]);
  });

  it(
    "`auto` reads the record the active run's session announced, " +
      "not the one declared at submit (and only the active run's)",
    () => {
      const t = open();
      t.submit("run_1");
      t.actor.send({ type: "RUN_CAPABILITIES", runId: "run_other", capabilities: noSteer });
      t.submit("run_2", "auto");
      expect(t.outcomes()[1]).toMatchObject({ disposition: "steer" });
      t.actor.send({ type: "RUN_CAPABILITIES", runId: "run_1", capabilities: noSteer });
      t.submit("run_3", "auto");
      expect(t.outcomes()[2]).toMatchObject({ disposition: "queued", runId: "run_3" });
    },
  );

  it("`steer` always goes to the active run, which decides how (natively or by interrupt-restart)", () => {
    const t = open();
    t.submit("run_1", "auto", noSteer);
    t.submit("run_2", "steer", noSteer);
    expect(t.outcomes()[1]).toEqual({ command: "submit", disposition: "steer", runId: "run_1" });
    expect(t.effects()[1]).toMatchObject({ type: "steerRun", runId: "run_1", text: "text of run_2" });
  });

  it("`restart` puts the new run first in line and interrupts the active one; it starts when that run ends", () => {
    const t = open();
    t.submit("run_1");
    t.submit("run_2", "queue");
    t.submit("run_3", "restart");
    expect(t.outcomes()[2]).toEqual({ command: "submit", disposition: "restart", runId: "run_3" });
    expect(t.effects().at(-1)).toEqual({ type: "interruptRun", threadId: "thr_1", runId: "run_1" });
    expect(t.records().at(-1)).toMatchObject({ type: "run.created", runId: "run_3", mode: "restart", ordinal: 3 });
    t.actor.send({ type: "RUN_FINISHED", runId: "run_1" });
    expect(t.started()).toEqual(["run_1", "run_3"]);
    t.actor.send({ type: "RUN_FINISHED", runId: "run_3" });
    expect(t.started()).toEqual(["run_1", "run_3", "run_2"]);
  });

  it("`restart` without a native interrupt goes by session stop where the caller allowed it", () => {
    const t = open({ allowSessionStopInterrupt: true });
    t.submit("run_1", "auto", noInterrupt);
    t.submit("run_2", "restart", noInterrupt);
    expect(t.outcomes()[1]).toEqual({ command: "submit", disposition: "restart", runId: "run_2" });
    expect(t.effects().at(-1)).toEqual({ type: "interruptRun", threadId: "thr_1", runId: "run_1" });
  });

  it("`restart` without any way to interrupt is refused, typed, as the named policy; nothing is created", () => {
    const t = open();
    t.submit("run_1", "auto", noInterrupt);
    t.clear();
    t.submit("run_2", "restart", noInterrupt);
    expect(t.records()).toEqual([
      expect.objectContaining({
        type: "policy.applied",
        policy: "interrupt_unsupported",
        capability: "turns.supportsInterrupt",
        outcome: "refused",
        runId: "run_1",
      }),
    ]);
    expect(t.outcomes()).toEqual([
      expect.objectContaining({
        command: "submit",
        refused: "capability_unsupported",
        capability: "turns.supportsInterrupt",
      }),
    ]);
    expect(t.effects()).toEqual([]);
    t.actor.send({ type: "RUN_FINISHED", runId: "run_1" });
    expect(t.state()).toBe("idle");
  });

  it("a queued run cancelled before it started leaves the queue and never starts", () => {
    const t = open();
    t.submit("run_1");
    t.submit("run_2", "queue");
    t.submit("run_3", "queue");
    t.actor.send({ type: "RUN_FINISHED", runId: "run_2" });
    expect(t.state()).toBe("busy");
    t.actor.send({ type: "RUN_FINISHED", runId: "run_1" });
    expect(t.started()).toEqual(["run_1", "run_3"]);
  });

  it(
    "after a restart, RESUME starts the queue recovered from the log, " + "in order; with nothing queued it stays idle",
    () => {
      const queue = [
        { runId: "run_3", providerTarget: "alpha", capabilities: fullCapabilities() },
        { runId: "run_4", providerTarget: "alpha", capabilities: fullCapabilities() },
      ];
      const t = open({ queue, nextOrdinal: 5 });
      expect(t.state()).toBe("idle");
      t.actor.send({ type: "RESUME" });
      expect(t.state()).toBe("busy");
      expect(t.started()).toEqual(["run_3"]);
      t.actor.send({ type: "RUN_FINISHED", runId: "run_3" });
      expect(t.started()).toEqual(["run_3", "run_4"]);

      const empty = open();
      empty.actor.send({ type: "RESUME" });
      expect([empty.state(), empty.effects()]).toEqual(["idle", []]);
    },
  );
});

describe("thread machine: model changes", () => {
  it(
    "a model change stays in the session where the provider can switch; " +
      "otherwise it gets a new provider session, named",
    () => {
      const t = open();
      t.actor.send({ type: "CHANGE_MODEL", model: "model-b", capabilities: fullCapabilities() });
      expect(t.records()).toEqual([
        { type: "thread.model_changed", threadId: "thr_1", model: "model-b", via: "in_session" },
      ]);

      const n = open();
      n.submit("run_1");
      n.clear();
      const noSwitch = defineCapabilities({ sessions: { supportsModelSwitchInSession: false } });
      n.actor.send({ type: "CHANGE_MODEL", model: "model-b", capabilities: noSwitch });
      expect(n.records()).toEqual([
        expect.objectContaining({
          type: "policy.applied",
          policy: "model_switch_new_session",
          capability: "sessions.supportsModelSwitchInSession",
          outcome: "fallback",
          threadId: "thr_1",
          runId: null,
        }),
        { type: "thread.model_changed", threadId: "thr_1", model: "model-b", via: "new_session" },
      ]);
      expect(n.state()).toBe("busy");
    },
  );
});

describe("thread machine: rollback", () => {
  it("when no later run reached a provider, only the files are restored", () => {
    const t = open();
    t.rollback({ laterTurns: 0 });
    expect(t.state()).toBe("rollingBack");
    expect(t.effects()).toEqual([{ type: "rollbackThread", threadId: "thr_1", toRunId: "run_1", via: "files_only" }]);
    expect(t.outcomes()).toEqual([{ command: "rollback", via: "files_only", threadId: "thr_1" }]);
    expect(t.policies()).toEqual([]);
  });

  it("a provider that rolls back and shows its conversation rolls back first, with no degradation", () => {
    const t = open();
    t.rollback();
    expect(t.effects()).toEqual([
      { type: "rollbackThread", threadId: "thr_1", toRunId: "run_1", via: "provider_rollback" },
    ]);
    expect(t.outcomes()).toEqual([{ command: "rollback", via: "provider_rollback", threadId: "thr_1" }]);
    expect(t.policies()).toEqual([]);
  });

  it("a provider that rolls back but neither returns nor shows the result rolls back by resume, trusted, named", () => {
    const noSnapshot = { providerRollbackReturnsSnapshot: false };
    for (const capabilities of [
      defineCapabilities({ checkpointing: { ...noSnapshot, providerCanReadConversationSnapshot: false } }),
      defineCapabilities({ checkpointing: noSnapshot, threads: { canReadThreadSnapshot: false } }),
    ]) {
      const t = open();
      t.rollback({ capabilities });
      expect(t.policies()).toEqual([
        expect.objectContaining({
          policy: "rollback_by_resume",
          capability: "checkpointing.providerCanReadConversationSnapshot",
          outcome: "fallback",
          runId: "run_1",
        }),
      ]);
      expect(t.effects()).toEqual([expect.objectContaining({ type: "rollbackThread", via: "provider_rollback" })]);
    }
  });

  it(
    "a provider that cannot roll back: " + "files restored from the checkpoint, the provider thread divergent, named",
    () => {
      const t = open();
      t.rollback({ capabilities: defineCapabilities({ threads: { canRollbackThread: false } }) });
      expect(t.policies()).toEqual([
        expect.objectContaining({
          policy: "rollback_divergent",
          capability: "threads.canRollbackThread",
          outcome: "fallback",
          runId: "run_1",
          detail: expect.stringContaining("cannot roll"),
        }),
      ]);
      expect(t.effects()).toEqual([{ type: "rollbackThread", threadId: "thr_1", toRunId: "run_1", via: "divergent" }]);
      expect(t.outcomes()).toEqual([{ command: "rollback", via: "divergent", threadId: "thr_1" }]);
    },
  );

  it("later runs on another provider thread make it divergent even where the provider can roll back", () => {
    const t = open();
    t.rollback({ laterElsewhere: true });
    expect(t.policies()).toEqual([
      expect.objectContaining({
        policy: "rollback_divergent",
        // No capability is missing: the record names none (a client would otherwise see a gap that is not there).
        capability: null,
        detail: expect.stringContaining("another provider thread"),
      }),
    ]);
    expect(t.effects()).toEqual([expect.objectContaining({ via: "divergent" })]);
  });

  it("no checkpoint and no provider rollback: refused, typed, as the named policy", () => {
    const t = open();
    t.rollback({ capabilities: defineCapabilities({ threads: { canRollbackThread: false } }), hasCheckpoint: false });
    expect(t.state()).toBe("idle");
    expect(t.effects()).toEqual([]);
    expect(t.policies()).toEqual([
      expect.objectContaining({
        policy: "rollback_unsupported",
        capability: "checkpointing.appCanCheckpointFilesystem",
        outcome: "refused",
      }),
    ]);
    expect(t.outcomes()).toEqual([
      expect.objectContaining({
        command: "rollback",
        refused: "capability_unsupported",
        capability: "checkpointing.appCanCheckpointFilesystem",
      }),
    ]);
  });

  it("a thread with an active run, or already rolling back, refuses a rollback as a conflict", () => {
    const t = open();
    t.submit("run_2");
    t.clear();
    t.rollback();
    expect([t.state(), t.effects(), t.outcomes()]).toEqual([
      "busy",
      [],
      [expect.objectContaining({ command: "rollback", refused: "conflict" })],
    ]);

    const r = open();
    r.rollback();
    r.clear();
    r.rollback();
    expect([r.state(), r.effects(), r.outcomes()]).toEqual([
      "rollingBack",
      [],
      [expect.objectContaining({ command: "rollback", refused: "conflict" })],
    ]);
  });

  it("messages sent during a rollback wait for it, then run in order; a cancelled one is dropped", () => {
    const t = open();
    t.rollback();
    t.submit("run_2");
    t.submit("run_3");
    t.submit("run_4");
    expect(t.outcomes().slice(1)).toEqual([
      { command: "submit", disposition: "queued", runId: "run_2", queuePosition: 1 },
      { command: "submit", disposition: "queued", runId: "run_3", queuePosition: 2 },
      { command: "submit", disposition: "queued", runId: "run_4", queuePosition: 3 },
    ]);
    t.actor.send({ type: "RUN_FINISHED", runId: "run_3" });
    expect(t.started()).toEqual([]);
    t.actor.send({ type: "ROLLBACK_DONE" });
    expect([t.state(), t.started()]).toEqual(["busy", ["run_2"]]);
    t.actor.send({ type: "RUN_FINISHED", runId: "run_2" });
    expect(t.started()).toEqual(["run_2", "run_4"]);
  });

  it("a rollback with nothing waiting behind it leaves the thread idle", () => {
    const t = open();
    t.rollback();
    t.actor.send({ type: "ROLLBACK_DONE" });
    expect(t.state()).toBe("idle");
    t.submit("run_2");
    expect(t.started()).toEqual(["run_2"]);
  });
});
