import { describe, expect, it } from "vitest";
import { keyedScript, ScriptedBackend } from "../../src/index.js";
import type { CapabilityOverrides, ScriptStep } from "../../src/index.js";
import type { ProviderAdapter } from "../../src/adapters/contract.js";
import { tempDir } from "../support/files.js";
import { hang, rejectsWith, scripted, streaming } from "../support/policies.js";
import { heldRollback } from "../support/rollbacks.js";
import {
  deferred,
  nextEvent,
  openTestRuntime,
  override,
  recordCalls,
  rejection,
  sendAndWait,
} from "../support/runtime.js";

/**
 * The capability-driven UI contract (`affordances()`), held to the capability seed's "Capability-Driven UI" section
 * and to what the runtime then does: steer shown as native, interrupt-restart or unavailable (the seed's degradation
 * "active steering unsupported -> interrupt active turn and restart"); a fork action per stable point, by source;
 * rollback only where an app checkpoint exists, annotated with what the provider's conversation does; panels only for
 * structured artifacts; subagents as the record shows them. Each affordance is checked against the command it offers:
 * the UI must never offer what the runtime would refuse, nor hide what it would do.
 */

/** A steer on a hanging run: the affordance, then what the runtime does with the steer. */
async function steerOn(caps: CapabilityOverrides) {
  const script = keyedScript({ go: hang });
  const t = await openTestRuntime({ s: scripted(caps, script) });
  const { threadId } = await t.rt.createThread({ providerTarget: "s" });
  const before = t.rt.affordances(threadId).steer;
  const { runId } = await t.rt.sendMessage({ threadId, text: "go" });
  await streaming(t.rt, runId);
  return { ...t, threadId, runId, before, during: t.rt.affordances(threadId).steer };
}

describe("steer", () => {
  it(
    "native where the provider steers an in-flight turn itself: " + "offered without a caveat, and delivered natively",
    async () => {
      const { rt, threadId, runId, before, during, cleanup } = await steerOn({});
      try {
        expect(before).toEqual({ state: "native", reason: null });
        expect(during).toEqual(before);
        const receipt = await rt.sendMessage({ threadId, text: "change course", mode: "steer" });
        expect(receipt).toMatchObject({ runId, disposition: "steered", via: "native" });
      } finally {
        await cleanup();
      }
    },
  );

  it(
    "interrupt-restart without active steering: offered with the caveat that the run restarts as a new attempt, " +
      "naming the missing capability, and carried out that way",
    async () => {
      const { rt, threadId, runId, before, during, cleanup } = await steerOn({
        turns: { supportsActiveSteering: false },
      });
      try {
        expect(before.state).toBe("interrupt_restart");
        expect(during).toEqual(before);
        expect(before.reason).toMatch(/restart/);
        expect(before.reason).toMatch(/attempt/);
        expect(before.reason).toContain("turns.supportsActiveSteering");
        const receipt = await rt.sendMessage({ threadId, text: "change course", mode: "steer" });
        expect(receipt).toMatchObject({ runId, disposition: "steered", via: "interrupt_restart" });
        const run = await rt.waitForRun(runId);
        expect(run.attempts.map((a) => a.reason)).toEqual(["initial", "steering_restart"]);
      } finally {
        await cleanup();
      }
    },
  );

  it.each([
    [
      "the record offers no interrupt-restart",
      { supportsActiveSteering: false, supportsSteeringByInterruptRestart: false },
    ],
    // The seed: interrupt-restart is app-level steering built on interruption; without an interrupt there is none.
    ["the provider cannot be interrupted", { supportsActiveSteering: false, supportsInterrupt: false }],
  ] as const)(
    "unavailable where %s: the reason says neither route exists, and the steer is refused",
    async (_, turns) => {
      const { rt, threadId, runId, before, during, cleanup } = await steerOn({ turns });
      try {
        expect(before.state).toBe("unavailable");
        expect(during).toEqual(before);
        expect(before.reason).toMatch(/steering/);
        expect(before.reason).toMatch(/interrupt-restart/);
        // It names the fields a UI can point at, as the interrupt and interrupt-restart reasons do.
        expect(before.reason).toContain("turns.supportsActiveSteering");
        expect(before.reason).toContain("turns.supportsSteeringByInterruptRestart");
        const error = await rejectsWith(
          rt.sendMessage({ threadId, text: "change course", mode: "steer" }),
          "capability_unsupported",
        );
        expect(error.details).toMatchObject({ capability: "turns.supportsActiveSteering" });
        expect((await rt.readThread(threadId)).runs.map((r) => [r.runId, r.status])).toEqual([[runId, "running"]]);
      } finally {
        await cleanup();
      }
    },
  );
});

describe("interrupt", () => {
  it(
    "without the native interrupt and without the session-stop option: " +
      "unavailable for the active run, naming the capability",
    async () => {
      const { rt, cleanup } = await openTestRuntime({
        s: scripted({ turns: { supportsInterrupt: false } }, () => hang),
      });
      try {
        const { threadId } = await rt.createThread({ providerTarget: "s" });
        const idle = rt.affordances(threadId).interrupt;
        expect([idle.state, idle.runId]).toEqual(["unavailable", null]);
        expect(idle.reason).toMatch(/no active run/);
        const { runId } = await rt.sendMessage({ threadId, text: "go" });
        await streaming(rt, runId);
        const offered = rt.affordances(threadId).interrupt;
        expect([offered.state, offered.runId]).toEqual(["unavailable", runId]);
        expect(offered.reason).toContain("turns.supportsInterrupt");
        await rejectsWith(rt.interrupt({ runId }), "capability_unsupported");
      } finally {
        await cleanup();
      }
    },
  );

  it("the destructive fallback refused for a session shared with other threads names each of them", async () => {
    // One session for every thread, no native interrupt: stopping it would end the runs of b and c too.
    const backend = new ScriptedBackend();
    const script = keyedScript({ a: hang, b: [{ type: "gate", name: "b" }], c: [{ type: "gate", name: "c" }] });
    const { rt, cleanup } = await openTestRuntime(
      { s: scripted({ turns: { supportsInterrupt: false } }, script, backend) },
      { allowSessionStopInterrupt: true },
    );
    try {
      const threads = [];
      for (const text of ["a", "b", "c"]) {
        const { threadId } = await rt.createThread({ providerTarget: "s" });
        const { runId } = await rt.sendMessage({ threadId, text });
        await nextEvent(rt, "attempt.turn_bound", (e) => e.runId === runId);
        threads.push(threadId);
      }
      const [a, b, c] = threads as [string, string, string];
      const offered = rt.affordances(a).interrupt;
      expect(offered.state).toBe("unavailable");
      expect(offered.reason).toMatch(/session/);
      expect(new Set(offered.reason!.match(/thr_[A-Za-z0-9_-]+/g))).toEqual(new Set([b, c]));
    } finally {
      backend.openGate("b");
      backend.openGate("c");
      await cleanup();
    }
  });

  it("the destructive fallback says what it destroys (the provider session) and why it is the fallback", async () => {
    const { rt, cleanup } = await openTestRuntime(
      { s: scripted({ turns: { supportsInterrupt: false } }, () => hang) },
      { allowSessionStopInterrupt: true },
    );
    try {
      const { threadId } = await rt.createThread({ providerTarget: "s" });
      const { runId } = await rt.sendMessage({ threadId, text: "go" });
      await streaming(rt, runId);
      const offered = rt.affordances(threadId).interrupt;
      expect([offered.state, offered.runId]).toEqual(["destructive_fallback", runId]);
      expect(offered.reason).toMatch(/session/);
      expect(offered.reason).toContain("turns.supportsInterrupt");
      expect(await rt.interrupt({ runId })).toMatchObject({ via: "session_stop" });
    } finally {
      await cleanup();
    }
  });
});

/** A runtime with app checkpoints, a thread in a fresh directory, and the runs sent on it (text, target). */
async function checkpointed(providers: Record<string, ProviderAdapter>, sends: Array<[string, string]>) {
  const work = await tempDir("tiller-affordances-");
  const t = await openTestRuntime(providers, { checkpoints: true });
  const { threadId } = await t.rt.createThread({ providerTarget: sends[0]![1], cwd: work.dir });
  const runs = [];
  for (const [text, providerTarget] of sends) runs.push(await sendAndWait(t.rt, threadId, text, { providerTarget }));
  expect(runs.map((r) => r.status)).toEqual(sends.map(() => "completed"));
  const cleanup = async () => {
    await t.cleanup();
    await work.cleanup();
  };
  return { ...t, cleanup, threadId, runIds: runs.map((r) => r.runId) };
}

/** The rollback affordance as [toRunId, provider, available, reason]. */
const rollbackRows = (a: {
  rollback: Array<{ toRunId: string; provider: string; available: boolean; reason: string | null }>;
}) => a.rollback.map((r) => [r.toRunId, r.provider, r.available, r.reason]);

describe("rollback: only where an app checkpoint exists, annotated with the provider's conversation", () => {
  it("no checkpoints, no rollback offered", async () => {
    const { rt, cleanup } = await openTestRuntime({ s: scripted() });
    try {
      const { threadId } = await rt.createThread({ providerTarget: "s" });
      await sendAndWait(rt, threadId, "one");
      expect(rt.affordances(threadId).rollback).toEqual([]);
    } finally {
      await cleanup();
    }
  });

  it(
    "a provider that rolls back its conversation: native where later turns exist, not needed to the latest run; " +
      "each as the rollback then reports",
    async () => {
      const s = await checkpointed({ s: scripted() }, [
        ["one", "s"],
        ["two", "s"],
        ["three", "s"],
      ]);
      const { rt, threadId, runIds, cleanup } = s;
      const [r1, r2, r3] = runIds as [string, string, string];
      try {
        const offered = rt.affordances(threadId);
        expect(rollbackRows(offered)).toEqual([
          [r1, "native", true, null],
          [r2, "native", true, null],
          [r3, "not_needed", true, null],
        ]);
        expect(new Set(offered.rollback.map((r) => r.checkpointId)).size).toBe(3);
        // Rolling back to the latest run restores its files only: the conversation already ends there.
        expect(await rt.rollback({ threadId, toRunId: r3 })).toMatchObject({ provider: "not_needed" });
        expect(await rt.rollback({ threadId, toRunId: r1 })).toMatchObject({
          provider: "rolled_back",
          rolledBackRunIds: [r2, r3],
        });
        // Rolled-back runs are no rollback target any more; run 1 is now the latest.
        expect(rollbackRows(rt.affordances(threadId))).toEqual([[r1, "not_needed", true, null]]);
      } finally {
        await cleanup();
      }
    },
  );

  it("a provider that cannot roll back its conversation: divergent, saying the conversation is rebuilt", async () => {
    const s = await checkpointed({ s: scripted({ threads: { canRollbackThread: false } }) }, [
      ["one", "s"],
      ["two", "s"],
    ]);
    const { rt, threadId, runIds, cleanup } = s;
    const [r1, r2] = runIds as [string, string];
    try {
      const [first, latest] = rt.affordances(threadId).rollback;
      expect([first!.toRunId, first!.provider, first!.available]).toEqual([r1, "divergent", true]);
      expect(first!.reason).toMatch(/rebuilt/);
      // Nothing to diverge from when no later turn exists.
      expect(latest).toMatchObject({ toRunId: r2, provider: "not_needed", available: true, reason: null });
      expect(await rt.rollback({ threadId, toRunId: r1 })).toMatchObject({ provider: "divergent" });
    } finally {
      await cleanup();
    }
  });

  it("later turns on two providers: no single native rollback covers them, so divergent", async () => {
    const s = await checkpointed({ a: scripted(), b: scripted() }, [
      ["one", "a"],
      ["two", "b"],
      ["three", "a"],
    ]);
    const { rt, threadId, runIds, cleanup } = s;
    const [r1, r2, r3] = runIds as [string, string, string];
    try {
      const rows = rollbackRows(rt.affordances(threadId));
      expect(rows.map(([run, provider]) => [run, provider])).toEqual([
        [r1, "divergent"],
        [r2, "native"],
        [r3, "not_needed"],
      ]);
      expect(await rt.rollback({ threadId, toRunId: r1 })).toMatchObject({ provider: "divergent" });
    } finally {
      await cleanup();
    }
  });
});

describe("while a rollback is in flight", () => {
  it(
    "nothing is offered that the thread would refuse: no rollback (busy), no interrupt of the message queued " +
      "behind it, no fork from that message",
    async () => {
      const held = heldRollback(new ScriptedBackend());
      const s = await checkpointed({ s: held.adapter }, [
        ["one", "s"],
        ["two", "s"],
      ]);
      const { rt, threadId, runIds, cleanup } = s;
      const [r1, r2] = runIds as [string, string];
      try {
        const rollback = rt.rollback({ threadId, toRunId: r1 });
        await held.called;
        // No run of the thread is active: the thread itself is busy rolling back.
        for (const r of rt.affordances(threadId).rollback) {
          expect(r.available).toBe(false);
          expect(r.reason).toMatch(/busy/);
        }
        await rejectsWith(rt.rollback({ threadId, toRunId: r1 }), "conflict");

        const queued = await rt.sendMessage({ threadId, text: "three" });
        expect(queued.disposition).toBe("queued");
        const during = rt.affordances(threadId);
        // A queued message has not started: there is no active run to interrupt.
        expect([during.interrupt.state, during.interrupt.runId]).toEqual(["unavailable", null]);
        const fromQueued = during.fork.find((f) => f.afterRunId === queued.runId)!;
        expect(fromQueued.source).toBe("unavailable");
        expect(fromQueued.reason).toContain("queued");
        await rejectsWith(rt.forkThread({ threadId, afterRunId: queued.runId }), "conflict");

        held.release();
        expect(await rollback).toMatchObject({ provider: "rolled_back", rolledBackRunIds: [r2] });
        expect((await rt.waitForRun(queued.runId)).status).toBe("completed");
      } finally {
        held.release();
        await cleanup();
      }
    },
  );
});

describe("fork: one action per stable point, by source", () => {
  it("a rolled-back run is no fork point, nor is a run still running; a finished one forks natively", async () => {
    const s = await checkpointed({ s: scripted({}, keyedScript({ "[hang]": hang })) }, [
      ["one", "s"],
      ["two", "s"],
    ]);
    const { rt, threadId, runIds, cleanup } = s;
    const [r1, r2] = runIds as [string, string];
    try {
      await rt.rollback({ threadId, toRunId: r1 });
      const { runId: r3 } = await rt.sendMessage({ threadId, text: "[hang]" });
      await streaming(rt, r3);
      const fork = rt.affordances(threadId).fork;
      expect(fork.map((f) => [f.afterRunId, f.source])).toEqual([
        [r1, "native"],
        [r2, "unavailable"],
        [r3, "unavailable"],
      ]);
      expect(fork[0]!.reason).toBeNull();
      expect(fork[1]!.reason).toMatch(/rolled back/);
      expect(fork[2]!.reason).toContain("running");
      await rejectsWith(rt.forkThread({ threadId, afterRunId: r2 }), "conflict");
      await rejectsWith(rt.forkThread({ threadId, afterRunId: r3 }), "conflict");
      expect((await rt.forkThread({ threadId, afterRunId: r1 })).parentThreadId).toBe(threadId);
    } finally {
      await cleanup();
    }
  });

  it("a provider that cannot fork: synthetic, saying why and that the fork gets portable context", async () => {
    const { rt, cleanup } = await openTestRuntime({ s: scripted({ threads: { canForkThread: false } }) });
    try {
      const { threadId } = await rt.createThread({ providerTarget: "s" });
      const r1 = await sendAndWait(rt, threadId, "one");
      const [fork] = rt.affordances(threadId).fork;
      expect([fork!.afterRunId, fork!.source]).toEqual([r1.runId, "synthetic"]);
      expect(fork!.reason).toContain("threads.canForkThread");
      expect(fork!.reason).toMatch(/portable context/);
    } finally {
      await cleanup();
    }
  });
});

/** A subagent that says something, then waits at the gate `sub` until the test opens it; its parent then replies. */
const gatedSubagent: ScriptStep[] = [
  {
    type: "subagent",
    agent: "helper",
    prompt: "look around",
    steps: [
      { type: "text", text: "child says hi" },
      { type: "gate", name: "sub" },
    ],
  },
  { type: "text", text: "parent done" },
];

/** A thread whose "go" starts the gated subagent; resolves once its node has started. */
async function withSubagent(caps: CapabilityOverrides, adapterOf: (a: ProviderAdapter) => ProviderAdapter = (a) => a) {
  const backend = new ScriptedBackend();
  const script = keyedScript({ go: gatedSubagent });
  const t = await openTestRuntime({ s: adapterOf(scripted(caps, script, backend)) });
  const { threadId } = await t.rt.createThread({ providerTarget: "s" });
  const { runId } = await t.rt.sendMessage({ threadId, text: "go" });
  const started = await nextEvent(t.rt, "node.started", (e) => e.runId === runId && e.kind === "subagent");
  const cleanup = async () => {
    backend.openGate("sub");
    await t.cleanup();
  };
  return { ...t, cleanup, backend, threadId, runId, nodeId: started.event.nodeId };
}

/** A provider whose subagent threads outlive them, so an ended subagent forks natively. */
const forksSubagents: CapabilityOverrides = { subagents: { canForkSubagentThread: true } };

describe("subagents", () => {
  it(
    "addressable, running: wait and close offered, no fork yet (it has not ended); " +
      "once ended: no close, a fork from its conversation",
    async () => {
      const { rt, backend, threadId, runId, nodeId, cleanup } = await withSubagent(forksSubagents);
      try {
        await nextEvent(rt, "subagent.thread_bound", (e) => e.nodeId === nodeId);
        const running = rt.affordances(threadId).subagents;
        expect([running.shown, running.reason]).toEqual(["addressable", null]);
        expect(running.nodes).toEqual([
          {
            nodeId,
            runId,
            ended: false,
            wait: { available: true, reason: null },
            close: { available: true, reason: null },
            fork: { source: "unavailable", reason: expect.stringMatching(/still running/) },
          },
        ]);
        await rejectsWith(rt.forkThread({ threadId, fromSubagentNodeId: nodeId }), "conflict");

        backend.openGate("sub");
        await rt.waitForRun(runId);
        const [ended] = rt.affordances(threadId).subagents.nodes;
        expect(ended).toMatchObject({ nodeId, ended: true, fork: { source: "native", reason: null } });
        expect(ended!.close.available).toBe(false);
        expect(ended!.close.reason).toMatch(/ended/);
        expect((await rt.forkThread({ threadId, fromSubagentNodeId: nodeId })).parentThreadId).toBe(threadId);
      } finally {
        await cleanup();
      }
    },
  );

  it("a close already asked is not offered again while the provider carries it out", async () => {
    const acknowledged = deferred();
    const { rt, threadId, nodeId, cleanup } = await withSubagent({}, (adapter) =>
      override(adapter, {
        closeSubagent: async (input) => {
          await acknowledged.promise;
          return adapter.closeSubagent!(input);
        },
      }),
    );
    try {
      await nextEvent(rt, "subagent.thread_bound", (e) => e.nodeId === nodeId);
      const closing = rt.closeSubagent({ threadId, nodeId });
      await nextEvent(rt, "subagent.close_requested", (e) => e.nodeId === nodeId);
      const [node] = rt.affordances(threadId).subagents.nodes;
      expect(node!.close.available).toBe(false);
      expect(node!.close.reason).toMatch(/close was requested/);
      acknowledged.resolve();
      await closing;
    } finally {
      acknowledged.resolve();
      await cleanup();
    }
  });

  it("not addressable: shown nested, saying why, and wait and close say what is missing", async () => {
    const { rt, threadId, nodeId, cleanup } = await withSubagent({ subagents: { exposesSubagentThreadIds: false } });
    try {
      const { shown, reason, nodes } = rt.affordances(threadId).subagents;
      expect(shown).toBe("nested");
      expect(reason).toContain("subagents.exposesSubagentThreadIds");
      expect(nodes.map((n) => n.nodeId)).toEqual([nodeId]);
      for (const op of [nodes[0]!.wait, nodes[0]!.close]) {
        expect(op.available).toBe(false);
        expect(op.reason).toMatch(/addressable/);
      }
      await rejectsWith(rt.waitForSubagent({ threadId, nodeId }), "capability_unsupported");
    } finally {
      await cleanup();
    }
  });

  it("a provider without subagents: shown inline, saying which capability is missing", async () => {
    const { rt, cleanup } = await openTestRuntime({ s: scripted({ subagents: { supportsSubagents: false } }) });
    try {
      const { threadId } = await rt.createThread({ providerTarget: "s" });
      const { shown, reason, nodes } = rt.affordances(threadId).subagents;
      expect([shown, nodes]).toEqual(["inline", []]);
      expect(reason).toContain("subagents.supportsSubagents");
    } finally {
      await cleanup();
    }
  });

  it("a subagent of a rolled-back run is no fork point", async () => {
    const work = await tempDir("tiller-affordances-");
    const script = keyedScript({ go: gatedSubagent.slice(0, 1).map((s) => ({ ...s, steps: [] })) as ScriptStep[] });
    const { rt, cleanup } = await openTestRuntime({ s: scripted(forksSubagents, script) }, { checkpoints: true });
    try {
      const { threadId } = await rt.createThread({ providerTarget: "s", cwd: work.dir });
      const r1 = await sendAndWait(rt, threadId, "one");
      const r2 = await sendAndWait(rt, threadId, "go");
      const nodeId = r2.items.find((i) => i.kind === "subagent")!.id;
      expect(rt.affordances(threadId).subagents.nodes[0]!.fork.source).toBe("native");
      await rt.rollback({ threadId, toRunId: r1.runId });
      const [node] = rt.affordances(threadId).subagents.nodes;
      expect(node!.fork.source).toBe("unavailable");
      expect(node!.fork.reason).toMatch(/rolled back/);
      await rejectsWith(rt.forkThread({ threadId, fromSubagentNodeId: nodeId }), "conflict");
    } finally {
      await cleanup();
      await work.cleanup();
    }
  });
});

describe("panels and plans: only for the structured artifacts the thread holds", () => {
  it(
    "a proposed plan alone: the plan panel, no todo panel; " +
      "the plan listed to implement, and implementPlan runs it",
    async () => {
      const script = keyedScript({ "plan it": [{ type: "proposed_plan", text: "1. write the tests" }] });
      const { rt, cleanup } = await openTestRuntime({ s: scripted({}, script) });
      try {
        const { threadId } = await rt.createThread({ providerTarget: "s" });
        expect(rt.affordances(threadId).plans).toEqual({ proposed: "artifacts", implement: [] });
        const run = await sendAndWait(rt, threadId, "plan it");
        const plan = run.items.find((i) => i.kind === "proposed_plan")!;
        const offered = rt.affordances(threadId);
        expect(offered.panels).toEqual({ plan: true, todo: false });
        expect(offered.plans.implement).toEqual([{ nodeId: plan.id, runId: run.runId, available: true, reason: null }]);
        const implemented = await rt.waitForRun((await rt.implementPlan({ threadId, nodeId: plan.id })).runId);
        expect(implemented.status).toBe("completed");
      } finally {
        await cleanup();
      }
    },
  );

  it("a plan of a rolled-back run is not offered to implement, and implementPlan refuses it (conflict)", async () => {
    const script = keyedScript({ "plan it": [{ type: "proposed_plan", text: "1. write the tests" }] });
    const s = await checkpointed({ s: scripted({}, script) }, [
      ["one", "s"],
      ["plan it", "s"],
    ]);
    const { rt, threadId, runIds, cleanup } = s;
    try {
      const planRun = rt.views.runs.get(runIds[1]!)!;
      const plan = planRun.items.find((i) => i.kind === "proposed_plan")!;
      expect(rt.affordances(threadId).plans.implement).toMatchObject([{ nodeId: plan.id, available: true }]);
      await rt.rollback({ threadId, toRunId: runIds[0]! });
      const [offered] = rt.affordances(threadId).plans.implement;
      expect(offered).toMatchObject({ nodeId: plan.id, available: false });
      expect(offered!.reason).toMatch(/rolled back/);
      await rejectsWith(rt.implementPlan({ threadId, nodeId: plan.id }), "conflict");
      expect(rt.views.threads.get(threadId)!.runs).toHaveLength(2);
    } finally {
      await cleanup();
    }
  });

  it("a todo list alone: the todo panel, no plan panel", async () => {
    const script = keyedScript({ go: [{ type: "todo", items: [{ text: "fix", status: "pending" }] }] });
    const { rt, cleanup } = await openTestRuntime({ s: scripted({}, script) });
    try {
      const { threadId } = await rt.createThread({ providerTarget: "s" });
      await sendAndWait(rt, threadId, "go");
      expect(rt.affordances(threadId).panels).toEqual({ plan: false, todo: true });
    } finally {
      await cleanup();
    }
  });

  it("a provider that proposes no plans: plans come as text, nothing to implement", async () => {
    const { rt, cleanup } = await openTestRuntime({ s: scripted({ planning: { emitsProposedPlan: false } }) });
    try {
      const { threadId } = await rt.createThread({ providerTarget: "s" });
      await sendAndWait(rt, threadId, "plan it");
      expect(rt.affordances(threadId).plans).toEqual({ proposed: "as_text", implement: [] });
    } finally {
      await cleanup();
    }
  });
});

describe("questions and approvals", () => {
  it.each([true, false])("supportsStructuredQuestions=%s: questions shown structured, else as text", async (on) => {
    const { rt, cleanup } = await openTestRuntime({
      s: scripted({ planning: { supportsStructuredQuestions: on } }),
    });
    try {
      const { threadId } = await rt.createThread({ providerTarget: "s" });
      expect(rt.affordances(threadId).questions).toBe(on ? "structured" : "as_text");
    } finally {
      await cleanup();
    }
  });

  it(
    "approvals are structured until the thread's mode never asks; " + "a request is listed on its own thread only",
    async () => {
      const script = keyedScript({
        ask: [
          { type: "command", command: "make", output: "", approval: true },
          { type: "text", text: "made" },
        ],
      });
      const { rt, cleanup } = await openTestRuntime({ s: scripted({}, script) });
      try {
        const { threadId } = await rt.createThread({ providerTarget: "s" });
        const other = await rt.createThread({ providerTarget: "s" });
        expect(rt.affordances(threadId).approvals).toBe("structured");
        const { runId } = await rt.sendMessage({ threadId, text: "ask" });
        const { requestId } = (await nextEvent(rt, "request.opened", (e) => e.runId === runId)).event;
        expect(rt.affordances(threadId).requests).toEqual([{ requestId, kind: "command", state: "respondable" }]);
        expect(rt.affordances(other.threadId).requests).toEqual([]);
        await rt.respond({ requestId, response: { kind: "decision", decision: "accept" } });
        await rt.waitForRun(runId);

        const never = await rt.sendMessage({ threadId, text: "no asking", runtimeMode: { approvals: "never" } });
        await rt.waitForRun(never.runId);
        expect(rt.affordances(threadId).approvals).toBe("sandbox_only");
        expect(rt.affordances(other.threadId).approvals).toBe("structured");
      } finally {
        await cleanup();
      }
    },
  );
});

describe("the target", () => {
  it(
    "before any run, the thread's own target; " + "after a switch, the target of its latest run and that record",
    async () => {
      const { rt, cleanup } = await openTestRuntime({
        a: scripted(),
        b: scripted({ turns: { supportsActiveSteering: false } }),
      });
      try {
        const { threadId } = await rt.createThread({ providerTarget: "a" });
        expect(rt.affordances(threadId)).toMatchObject({ providerTarget: "a", steer: { state: "native" } });
        await sendAndWait(rt, threadId, "one", { providerTarget: "b" });
        const offered = rt.affordances(threadId);
        expect(offered).toMatchObject({ providerTarget: "b", steer: { state: "interrupt_restart" } });
        expect(offered.capabilityVersion).toBe(rt.capabilities("b").version);
        // Back on a: the latest run counts, not an earlier one.
        await sendAndWait(rt, threadId, "two", { providerTarget: "a" });
        expect(rt.affordances(threadId)).toMatchObject({ providerTarget: "a", steer: { state: "native" } });
      } finally {
        await cleanup();
      }
    },
  );
});

describe("mode switch", () => {
  it.each([true, false])(
    "supportsRuntimeModeSwitchInSession=%s: a mode change in the live session, else by a new one",
    async (inSession) => {
      const { adapter, calls } = recordCalls(scripted({ sessions: { supportsRuntimeModeSwitchInSession: inSession } }));
      const { rt, cleanup } = await openTestRuntime({ s: adapter });
      try {
        const { threadId } = await rt.createThread({ providerTarget: "s" });
        expect(rt.affordances(threadId).modeSwitch).toBe(inSession ? "in_session" : "new_session");
        await sendAndWait(rt, threadId, "one");
        const planning = await rt.sendMessage({ threadId, text: "two", runtimeMode: { interaction: "plan" } });
        expect((await rt.waitForRun(planning.runId)).status).toBe("completed");
        expect(calls.filter((c) => c.method === "startSession")).toHaveLength(inSession ? 1 : 2);
      } finally {
        await cleanup();
      }
    },
  );
});

describe("a thread whose target is no longer configured", () => {
  it("is named as not found, not offered anything", async () => {
    const first = await openTestRuntime({ retired: scripted() });
    const { threadId } = await first.rt.createThread({ providerTarget: "retired" });
    await sendAndWait(first.rt, threadId, "one");
    await first.rt.close();
    const { rt, cleanup } = await openTestRuntime({ other: scripted() }, { dataDir: first.dataDir });
    try {
      const error = await rejection(Promise.resolve().then(() => rt.affordances(threadId)));
      expect(error).toMatchObject({ code: "not_found", message: expect.stringMatching(/provider target retired/) });
    } finally {
      await cleanup();
    }
  });
});
