import { existsSync } from "node:fs";
import { join } from "node:path";
import { describe, expect, it } from "vitest";
import { keyedScript, ScriptedBackend } from "../../src/index.js";
import type { ScriptSource, ScriptStep } from "../../src/index.js";
import { crashedWorld } from "../model/models/threadPolicies.js";
import { nextEvent, ofType, openTestRuntime, recordCalls, said } from "../support/runtime.js";
import { tempDir } from "../support/files.js";
import { hang, noApprovals, policies, rejectsWith, row, scripted, streaming } from "../support/policies.js";

/**
 * One test per degradation of the registry (src/machines/policies.ts): the caller's typed result and the
 * `policy.applied` record.
 */

describe("interrupt and steer degradations", () => {
  it(
    "interrupt_by_session_stop: no native interrupt, allowed by option: " +
      "the session stops and the run ends interrupted",
    async () => {
      const { rt, events, cleanup } = await openTestRuntime(
        { s: scripted({ turns: { supportsInterrupt: false } }, () => hang) },
        { allowSessionStopInterrupt: true },
      );
      try {
        const { threadId } = await rt.createThread({ providerTarget: "s" });
        const { runId } = await rt.sendMessage({ threadId, text: "go" });
        await streaming(rt, runId);
        expect(await rt.interrupt({ runId })).toMatchObject({ runId, via: "session_stop" });
        const run = await rt.waitForRun(runId);
        expect(run.status).toBe("interrupted");
        expect(policies(events, "interrupt_by_session_stop").map(row)).toEqual([
          [threadId, runId, "turns.supportsInterrupt", "fallback"],
        ]);
        expect(run.fallbacks.map((f) => f.policy)).toContain("interrupt_by_session_stop");
        expect(ofType(events, "interrupt.requested").map((e) => e.via)).toEqual(["session_stop"]);
      } finally {
        await cleanup();
      }
    },
  );

  it("interrupt_unsupported: without the option the interrupt is refused and the run keeps running", async () => {
    const { rt, events, cleanup } = await openTestRuntime({
      s: scripted({ turns: { supportsInterrupt: false } }, () => hang),
    });
    try {
      const { threadId } = await rt.createThread({ providerTarget: "s" });
      const { runId } = await rt.sendMessage({ threadId, text: "go" });
      await streaming(rt, runId);
      const error = await rejectsWith(rt.interrupt({ runId }), "capability_unsupported");
      expect(error.details).toMatchObject({ capability: "turns.supportsInterrupt" });
      const policy = await nextEvent(rt, "policy.applied", (e) => e.policy === "interrupt_unsupported");
      expect(row(policy.event)).toEqual([threadId, runId, "turns.supportsInterrupt", "refused"]);
      expect((await rt.readThread(threadId)).runs.map((r) => r.status)).toEqual(["running"]);
      expect(ofType(events, "interrupt.requested")).toEqual([]);
    } finally {
      await cleanup();
    }
  });

  it("steer_by_interrupt_restart: the attempt is superseded and a second attempt carries the steer text", async () => {
    const script: ScriptSource = ({ text }) => (text === "go" ? hang : [{ type: "text", text: `steered to ${text}` }]);
    const { rt, events, cleanup } = await openTestRuntime({
      s: scripted({ turns: { supportsActiveSteering: false } }, script),
    });
    try {
      const { threadId } = await rt.createThread({ providerTarget: "s" });
      const { runId } = await rt.sendMessage({ threadId, text: "go" });
      await streaming(rt, runId);
      const receipt = await rt.sendMessage({ threadId, text: "change course", mode: "steer" });
      expect(receipt).toMatchObject({ runId, disposition: "steered", via: "interrupt_restart" });
      const run = await rt.waitForRun(runId);
      expect(run.status).toBe("completed");
      expect(run.attempts.map((a) => [a.ordinal, a.reason, a.status])).toEqual([
        [1, "initial", "superseded"],
        [2, "steering_restart", "completed"],
      ]);
      const second = run.attempts[1]!.attemptId;
      expect(
        run.items.filter((i) => i.kind === "assistant_message" && i.attemptId === second).map((i) => i.text),
      ).toEqual(["steered to change course"]);
      expect(ofType(events, "attempt.started").map((e) => e.text)).toEqual(["go", "change course"]);
      expect(ofType(events, "steer.applied").map((e) => [e.runId, e.text, e.via])).toEqual([
        [runId, "change course", "interrupt_restart"],
      ]);
      expect(policies(events, "steer_by_interrupt_restart").map(row)).toEqual([
        [threadId, runId, "turns.supportsActiveSteering", "fallback"],
      ]);
      expect((await rt.readThread(threadId)).runs).toHaveLength(1);
    } finally {
      await cleanup();
    }
  });

  it("steer_unsupported: neither native steering nor interrupt-restart: the steer is refused", async () => {
    const caps = { turns: { supportsActiveSteering: false, supportsSteeringByInterruptRestart: false } };
    const { rt, events, cleanup } = await openTestRuntime({ s: scripted(caps, () => hang) });
    try {
      const { threadId } = await rt.createThread({ providerTarget: "s" });
      const { runId } = await rt.sendMessage({ threadId, text: "go" });
      await streaming(rt, runId);
      const error = await rejectsWith(
        rt.sendMessage({ threadId, text: "change course", mode: "steer" }),
        "capability_unsupported",
      );
      expect(error.details).toMatchObject({ capability: "turns.supportsActiveSteering" });
      const policy = await nextEvent(rt, "policy.applied", (e) => e.policy === "steer_unsupported");
      expect(row(policy.event)).toEqual([threadId, runId, "turns.supportsActiveSteering", "refused"]);
      const snapshot = await rt.readThread(threadId);
      expect(snapshot.runs.map((r) => [r.runId, r.status, r.attempts.length])).toEqual([[runId, "running", 1]]);
      expect(ofType(events, "steer.applied")).toEqual([]);
    } finally {
      await cleanup();
    }
  });

  it(
    "queue_held_by_runtime: " + "the queued message waits in the runtime and starts after the first run's terminal",
    async () => {
      const script = keyedScript({ "[hang]": hang });
      const { rt, events, cleanup } = await openTestRuntime({
        s: scripted({ turns: { supportsQueuedMessages: false } }, script),
      });
      try {
        const { threadId } = await rt.createThread({ providerTarget: "s" });
        const first = await rt.sendMessage({ threadId, text: "[hang] first" });
        await streaming(rt, first.runId);
        const second = await rt.sendMessage({ threadId, text: "second", mode: "queue" });
        expect(second).toMatchObject({ disposition: "queued", queuePosition: 1, via: null });
        expect(second.runId).not.toBe(first.runId);
        expect((await rt.readThread(threadId)).runs.map((r) => r.status)).toEqual(["running", "queued"]);
        expect(policies(events, "queue_held_by_runtime").map(row)).toEqual([
          [threadId, second.runId, "turns.supportsQueuedMessages", "fallback"],
        ]);

        await rt.interrupt({ runId: first.runId });
        expect((await rt.waitForRun(first.runId)).status).toBe("interrupted");
        const run = await rt.waitForRun(second.runId);
        expect([run.status, said(run.items)]).toEqual(["completed", "You said: second"]);
        const at = (type: string, runId: string) =>
          events.findIndex((r) => r.event.type === type && "runId" in r.event && r.event.runId === runId);
        expect(at("run.terminal", first.runId)).toBeGreaterThanOrEqual(0);
        expect(at("attempt.started", second.runId)).toBeGreaterThan(at("run.terminal", first.runId));
      } finally {
        await cleanup();
      }
    },
  );
});

describe("fork and handoff degradations", () => {
  it.each([false, true])(
    "synthetic_fork: canForkThread=%s: the fork affordance, then a portable or native fork at its first run",
    async (canForkThread) => {
      const { rt, events, cleanup } = await openTestRuntime({ s: scripted({ threads: { canForkThread } }) });
      try {
        const { threadId } = await rt.createThread({ providerTarget: "s" });
        const first = await rt.waitForRun((await rt.sendMessage({ threadId, text: "parent run" })).runId);
        // The affordance offers the fork the runtime will realise.
        const source = canForkThread ? "native" : "synthetic";
        expect(rt.affordances(threadId).fork).toEqual([
          { afterRunId: first.runId, source, reason: canForkThread ? null : expect.any(String) },
        ]);
        const fork = await rt.forkThread({ threadId });
        expect(fork.parentThreadId).toBe(threadId);
        const run = await rt.waitForRun((await rt.sendMessage({ threadId: fork.threadId, text: "in the fork" })).runId);
        expect(run.status).toBe("completed");
        const resolved = ofType(events, "fork.resolved").map((e) => [e.threadId, e.transferId, e.resolution]);
        expect(resolved).toEqual([[fork.threadId, fork.transferId, canForkThread ? "native" : "portable"]]);
        const handoffs = ofType(events, "handoff.created").filter((h) => h.threadId === fork.threadId);
        const bound = ofType(events, "provider_thread.bound").filter((b) => b.threadId === fork.threadId);
        if (canForkThread) {
          expect(bound.map((b) => b.via)).toEqual(["forked"]);
          expect(handoffs).toEqual([]);
          expect(policies(events, "synthetic_fork")).toEqual([]);
        } else {
          expect(handoffs.map((h) => [h.reason, h.runId, h.coveredRunIds])).toEqual([
            ["fork", run.runId, [first.runId]],
          ]);
          expect(handoffs[0]!.text).toContain("parent run");
          expect(policies(events, "synthetic_fork").map(row)).toEqual([
            [fork.threadId, null, "threads.canForkThread", "fallback"],
          ]);
        }
      } finally {
        await cleanup();
      }
    },
  );

  it("a fork from a run that has not finished is refused with conflict", async () => {
    const { rt, cleanup } = await openTestRuntime({ s: scripted({}, () => hang) });
    try {
      const { threadId } = await rt.createThread({ providerTarget: "s" });
      const { runId } = await rt.sendMessage({ threadId, text: "go" });
      await streaming(rt, runId);
      await rejectsWith(rt.forkThread({ threadId }), "conflict");
      await rejectsWith(rt.forkThread({ threadId, afterRunId: runId }), "conflict");
      expect(rt.listThreads()).toHaveLength(1);
    } finally {
      await cleanup();
    }
  });

  it.each([false, true])("handoff_fresh_thread: returning to a target with supportsDeltaHandoff=%s", async (delta) => {
    const { rt, events, cleanup } = await openTestRuntime({
      a: scripted({ context: { supportsDeltaHandoff: delta } }),
      b: scripted(),
    });
    try {
      const { threadId } = await rt.createThread({ providerTarget: "a" });
      const r1 = await rt.waitForRun((await rt.sendMessage({ threadId, text: "one" })).runId);
      const r2 = await rt.waitForRun((await rt.sendMessage({ threadId, text: "two", providerTarget: "b" })).runId);
      const r3 = await rt.waitForRun((await rt.sendMessage({ threadId, text: "three", providerTarget: "a" })).runId);
      expect([r1, r2, r3].map((r) => [r.providerTarget, r.status])).toEqual([
        ["a", "completed"],
        ["b", "completed"],
        ["a", "completed"],
      ]);
      const onA = ofType(events, "provider_thread.bound").filter((b) => b.providerTarget === "a");
      const old = onA[0]!.providerThreadId;
      const back = ofType(events, "handoff.created").filter((h) => h.toTarget === "a");
      if (delta) {
        expect(r3.attempts[0]!.providerThreadId).toBe(old);
        expect(onA.map((b) => [b.via, b.providerThreadId]).slice(1)).toEqual(onA.slice(1).map(() => ["resumed", old]));
        expect(back.map((h) => [h.runId, h.strategy, h.coveredRunIds])).toEqual([
          [r3.runId, "delta_since_last_seen", [r2.runId]],
        ]);
        expect(policies(events, "handoff_fresh_thread")).toEqual([]);
      } else {
        expect(onA.map((b) => b.via)).toEqual(["created", "refreshed"]);
        expect(r3.attempts[0]!.providerThreadId).toBe(onA[1]?.providerThreadId);
        expect(r3.attempts[0]!.providerThreadId).not.toBe(old);
        expect(back.map((h) => [h.runId, h.strategy, h.coveredRunIds])).toEqual([
          [r3.runId, "full_thread_summary", [r1.runId, r2.runId]],
        ]);
        expect(policies(events, "handoff_fresh_thread").map(row)).toEqual([
          [threadId, null, "context.supportsDeltaHandoff", "fallback"],
        ]);
      }
    } finally {
      await cleanup();
    }
  });

  it(
    "handoff_as_user_context: " + "a target without system or developer context gets the handoff as a user message",
    async () => {
      const backend = new ScriptedBackend();
      const b = scripted(
        { context: { acceptsSystemContext: false, acceptsDeveloperContext: false, acceptsSyntheticUserContext: true } },
        undefined,
        backend,
      );
      const { rt, events, cleanup } = await openTestRuntime({ a: scripted(), b });
      try {
        const { threadId } = await rt.createThread({ providerTarget: "a" });
        await rt.waitForRun((await rt.sendMessage({ threadId, text: "first question" })).runId);
        const run = await rt.waitForRun(
          (await rt.sendMessage({ threadId, text: "second question", providerTarget: "b" })).runId,
        );
        expect([run.status, said(run.items)]).toEqual(["completed", "You said: second question"]);
        expect(policies(events, "handoff_as_user_context").map(row)).toEqual([
          [threadId, run.runId, "context.acceptsDeveloperContext", "fallback"],
        ]);
        const turns = [...backend.threads.values()].flatMap((t) => t.turns);
        expect(turns.map((t) => [t.userText, t.context?.kind, t.context?.delivery])).toEqual([
          ["second question", "handoff", "synthetic_user"],
        ]);
        expect(turns[0]!.context!.text).toContain("first question");
        expect(ofType(events, "handoff.created").map((h) => [h.toTarget, h.reason, h.runId])).toEqual([
          ["b", "provider_switch", run.runId],
        ]);
      } finally {
        await cleanup();
      }
    },
  );

  it(
    "handoff_unsupported: " + "switching to a target that takes no context is refused before any run is recorded",
    async () => {
      const b = scripted({
        context: { acceptsSystemContext: false, acceptsDeveloperContext: false, acceptsSyntheticUserContext: false },
      });
      const { rt, events, cleanup } = await openTestRuntime({ a: scripted(), b });
      try {
        const { threadId } = await rt.createThread({ providerTarget: "a" });
        await rt.waitForRun((await rt.sendMessage({ threadId, text: "first" })).runId);
        const error = await rejectsWith(
          rt.sendMessage({ threadId, text: "to b", providerTarget: "b" }),
          "capability_unsupported",
        );
        expect(error.details).toMatchObject({ capability: "context.acceptsSyntheticUserContext" });
        const policy = await nextEvent(rt, "policy.applied", (e) => e.policy === "handoff_unsupported");
        expect(row(policy.event)).toEqual([threadId, null, "context.acceptsSyntheticUserContext", "refused"]);
        expect((await rt.readThread(threadId)).runs.map((r) => r.providerTarget)).toEqual(["a"]);
        expect(ofType(events, "run.created").map((e) => e.providerTarget)).toEqual(["a"]);
      } finally {
        await cleanup();
      }
    },
  );
});

describe("session-wide and artifact degradations", () => {
  it("approvals_by_sandbox: a provider without structured approvals runs its command without asking", async () => {
    const script = (): ScriptStep[] => [
      { type: "command", command: "ls", output: "x", approval: true },
      { type: "text", text: "listed" },
    ];
    const { rt, events, cleanup } = await openTestRuntime({ s: scripted(noApprovals, script) });
    try {
      const { threadId } = await rt.createThread({ providerTarget: "s" });
      const run = await rt.waitForRun((await rt.sendMessage({ threadId, text: "go" })).runId);
      expect([run.status, said(run.items)]).toEqual(["completed", "listed"]);
      expect(ofType(events, "request.opened")).toEqual([]);
      expect(run.items.find((i) => i.kind === "command")).toMatchObject({
        status: "complete",
        output: "x",
        detail: { status: "completed" },
      });
      const applied = policies(events, "approvals_by_sandbox");
      expect(applied.map(row)).toEqual([[null, null, "approvals.supportsCommandApproval", "fallback"]]);
      expect(applied[0]!.detail).toContain("workspace-write");
      expect(rt.affordances(threadId).approvals).toBe("sandbox_only");
    } finally {
      await cleanup();
    }
  });

  it("approvals_by_sandbox under a read-only sandbox: the file change is declined and nothing is written", async () => {
    const work = await tempDir("tiller-sandbox-");
    const script = (): ScriptStep[] => [
      { type: "file_change", path: "a.txt", diff: "+x", content: "x" },
      { type: "text", text: "tried" },
    ];
    const { rt, events, cleanup } = await openTestRuntime(
      { s: scripted(noApprovals, script) },
      { sandbox: "read-only" },
    );
    try {
      const { threadId } = await rt.createThread({ providerTarget: "s", cwd: work.dir });
      const run = await rt.waitForRun((await rt.sendMessage({ threadId, text: "write" })).runId);
      expect(run.status).toBe("completed");
      expect(existsSync(join(work.dir, "a.txt"))).toBe(false);
      expect(run.items.find((i) => i.kind === "file_change")).toMatchObject({
        status: "complete",
        detail: { status: "declined" },
      });
      expect(ofType(events, "request.opened")).toEqual([]);
      expect(policies(events, "approvals_by_sandbox").map((p) => p.detail)).toEqual([
        expect.stringContaining("read-only"),
      ]);
    } finally {
      await cleanup();
      await work.cleanup();
    }
  });

  it.each([false, true])("no_plan_artifacts / no_todo_artifacts: plan and todo emitted=%s", async (emits) => {
    const steps: ScriptStep[] = [
      { type: "plan", steps: [{ step: "look", status: "in_progress" }] },
      { type: "todo", items: [{ text: "fix", status: "pending" }] },
      { type: "text", text: "planned" },
    ];
    const { rt, events, cleanup } = await openTestRuntime({
      s: scripted({ planning: { emitsPlanUpdated: emits, emitsTodoList: emits } }, () => steps),
    });
    try {
      const { threadId } = await rt.createThread({ providerTarget: "s" });
      expect(rt.affordances(threadId).panels).toEqual({ plan: false, todo: false });
      const run = await rt.waitForRun((await rt.sendMessage({ threadId, text: "plan it" })).runId);
      expect([run.status, said(run.items)]).toEqual(["completed", "planned"]);
      const kinds = run.items.map((i) => i.kind).filter((k) => k === "plan" || k === "todo_list");
      expect(kinds).toEqual(emits ? ["plan", "todo_list"] : []);
      expect(rt.affordances(threadId).panels).toEqual({ plan: emits, todo: emits });
      const applied = [...policies(events, "no_plan_artifacts"), ...policies(events, "no_todo_artifacts")].map(row);
      const expected = [
        [null, null, "planning.emitsPlanUpdated", "fallback"],
        [null, null, "planning.emitsTodoList", "fallback"],
      ];
      expect(applied).toEqual(emits ? [] : expected);
    } finally {
      await cleanup();
    }
  });

  it.each([
    ["terminal_inferred_from_idle", { turns: { emitsTurnCompleted: false } }, "turns.emitsTurnCompleted"],
    ["terminal_weak_correlation", { turns: { terminalStatusQuality: "weak" } }, "turns.terminalStatusQuality"],
    ["messages_closed_at_terminal", { streaming: { emitsMessageCompleted: false } }, "streaming.emitsMessageCompleted"],
  ] as const)("%s: the run completes with its reply and the policy is recorded", async (policy, caps, capability) => {
    const { rt, events, cleanup } = await openTestRuntime({ s: scripted(caps) });
    try {
      const { threadId } = await rt.createThread({ providerTarget: "s" });
      const run = await rt.waitForRun((await rt.sendMessage({ threadId, text: "hello" })).runId);
      expect([run.status, said(run.items)]).toEqual(["completed", "You said: hello"]);
      expect(run.items.filter((i) => i.kind === "assistant_message").map((i) => [i.status, i.text])).toEqual([
        ["complete", "You said: hello"],
      ]);
      expect(policies(events, policy).map(row)).toEqual([[threadId, run.runId, capability, "fallback"]]);
      expect(run.fallbacks.map((f) => f.policy)).toContain(policy);
    } finally {
      await cleanup();
    }
  });

  it.each([false, true])("model_switch_new_session: supportsModelSwitchInSession=%s", async (inSession) => {
    const { adapter, calls } = recordCalls(scripted({ sessions: { supportsModelSwitchInSession: inSession } }));
    const { rt, events, cleanup } = await openTestRuntime({ s: adapter });
    try {
      const { threadId } = await rt.createThread({ providerTarget: "s", model: "m1" });
      const r1 = await rt.waitForRun((await rt.sendMessage({ threadId, text: "one" })).runId);
      const r2 = await rt.waitForRun((await rt.sendMessage({ threadId, text: "two", model: "m2" })).runId);
      expect([r1.status, r2.status]).toEqual(["completed", "completed"]);
      expect((await rt.readThread(threadId)).thread.model).toBe("m2");
      expect(ofType(events, "thread.model_changed").map((e) => [e.threadId, e.model, e.via])).toEqual([
        [threadId, "m2", inSession ? "in_session" : "new_session"],
      ]);
      const sessions = ofType(events, "session.started").map((e) => e.sessionId);
      const bound = ofType(events, "provider_thread.bound");
      const pth = bound[0]!.providerThreadId;
      expect(r2.attempts[0]!.providerThreadId).toBe(pth);
      expect(calls.filter((c) => c.method === "startSession").map((c) => c.input.model)).toEqual(
        inSession ? ["m1"] : ["m1", "m2"],
      );
      expect(rt.affordances(threadId).modelSwitch).toBe(inSession ? "in_session" : "new_session");
      if (inSession) {
        expect(sessions).toHaveLength(1);
        expect(bound.map((b) => b.via)).toEqual(["created"]);
        expect(policies(events, "model_switch_new_session")).toEqual([]);
      } else {
        expect(sessions).toHaveLength(2);
        expect(bound.map((b) => [b.via, b.providerThreadId, b.sessionId])).toEqual([
          ["created", pth, sessions[0]],
          ["resumed", pth, sessions[1]],
        ]);
        expect(policies(events, "model_switch_new_session").map(row)).toEqual([
          [threadId, null, "sessions.supportsModelSwitchInSession", "fallback"],
        ]);
      }
    } finally {
      await cleanup();
    }
  });
});

describe("requests_expire_on_restart", () => {
  it(
    "a request pending when the runtime died expires as not_resumable on reopen, " + "and answering it is refused",
    async () => {
      // The runtime runs in a child process that is SIGKILLed with the approval pending (shared with the model-based
      // suite).
      const world = await crashedWorld({ "main.sessions.pendingRequestsSurviveRestart": false });
      try {
        const { rt } = world;
        const [requestId] = [...rt.views.requests.keys()];
        const request = rt.views.requests.get(requestId!)!;
        expect(request.status).toBe("expired");
        expect(request.closedReason).toMatch(/^not_resumable/);
        const policy = await nextEvent(rt, "policy.applied", (e) => e.policy === "requests_expire_on_restart");
        expect(row(policy.event)).toEqual([
          request.threadId,
          request.runId,
          "sessions.pendingRequestsSurviveRestart",
          "fallback",
        ]);
        const snapshot = await rt.readThread(request.threadId);
        expect(snapshot.pendingRequests).toEqual([]);
        expect(snapshot.runs.map((r) => [r.status, r.reason])).toEqual([["cancelled", "runtime_restarted"]]);
        expect(rt.affordances(request.threadId).requests).toEqual([{ requestId, kind: "command", state: "expired" }]);
        await rejectsWith(
          rt.respond({ requestId: requestId!, response: { kind: "decision", decision: "accept" } }),
          "not_resumable",
        );
      } finally {
        await world.close();
      }
    },
    60_000,
  );
});

describe("affordances", () => {
  it.each([
    [{}, false, "available"],
    [{ turns: { supportsInterrupt: false } }, true, "destructive_fallback"],
    [{ turns: { supportsInterrupt: false } }, false, "unavailable"],
  ] as const)(
    "interrupt during a hanging run (%j, allowSessionStopInterrupt=%s): %s",
    async (caps, allowSessionStopInterrupt, state) => {
      const { rt, cleanup } = await openTestRuntime({ s: scripted(caps, () => hang) }, { allowSessionStopInterrupt });
      try {
        const { threadId } = await rt.createThread({ providerTarget: "s" });
        expect(rt.affordances(threadId).interrupt).toEqual({
          state: "unavailable",
          runId: null,
          reason: "no active run",
        });
        const { runId } = await rt.sendMessage({ threadId, text: "go" });
        await streaming(rt, runId);
        expect(rt.affordances(threadId).interrupt).toMatchObject({ state, runId });
      } finally {
        await cleanup();
      }
    },
  );

  it("a pending approval is respondable, and gone once answered", async () => {
    const script = (): ScriptStep[] => [
      { type: "command", command: "make", output: "", approval: true },
      { type: "text", text: "made" },
    ];
    const { rt, cleanup } = await openTestRuntime({ s: scripted({}, script) });
    try {
      const { threadId } = await rt.createThread({ providerTarget: "s" });
      const { runId } = await rt.sendMessage({ threadId, text: "go" });
      const opened = await nextEvent(rt, "request.opened", (e) => e.runId === runId);
      const { requestId } = opened.event;
      expect(rt.affordances(threadId)).toMatchObject({
        approvals: "structured",
        requests: [{ requestId, kind: "command", state: "respondable" }],
      });
      await rt.respond({ requestId, response: { kind: "decision", decision: "accept" } });
      expect((await rt.waitForRun(runId)).status).toBe("completed");
      expect(rt.affordances(threadId).requests).toEqual([]);
    } finally {
      await cleanup();
    }
  });
});
