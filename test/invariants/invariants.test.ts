import { describe, expect, it } from "vitest";
import { createScriptedAdapter, keyedScript, ScriptedBackend } from "../../src/index.js";
import { gateEvents, nextEvent, ofType, openTestRuntime, recordCalls } from "../support/runtime.js";

/** The ten invariants of the domain model, each shown end to end on the real runtime. */

const hang = [{ type: "text" as const, text: "working" }, { type: "hang" as const }];

describe("invariant 1: app ids are identity, provider ids are evidence", () => {
  it("derives app ids for nodes and requests and keeps native ids only as refs", async () => {
    // Weak item ids repeat every turn ("item-1"...): evidence, not identity.
    const adapter = createScriptedAdapter({
      capabilities: {
        identity: {
          nativeThreadIds: "strong",
          nativeTurnIds: "strong",
          nativeItemIds: "weak",
          nativeRequestIds: "strong",
        },
      },
      script: keyedScript({ "[ask]": [{ type: "command", command: "ls", output: "x", approval: true }] }),
    });
    const { rt, events, cleanup } = await openTestRuntime({ scripted: adapter });
    try {
      const { threadId } = await rt.createThread({ providerTarget: "scripted" });
      await rt.waitForRun((await rt.sendMessage({ threadId, text: "one" })).runId);
      await rt.waitForRun((await rt.sendMessage({ threadId, text: "two" })).runId);
      const messages = ofType(events, "node.started").filter((e) => e.kind === "assistant_message");
      expect(messages.map((m) => m.nativeRef)).toEqual(["item-1", "item-1"]);
      expect(new Set(messages.map((m) => m.nodeId)).size).toBe(2);
      for (const m of messages) expect(m.nodeId).toMatch(/^nod_/);

      const asked = await rt.sendMessage({ threadId, text: "[ask]" });
      const opened = await nextEvent(rt, "request.opened", (e) => e.runId === asked.runId);
      expect(opened.event.requestId).toMatch(/^req_/);
      expect(opened.event.nativeRef).toMatch(/^sreq-/);
      const bound = ofType(events, "provider_thread.bound")[0]!;
      expect(bound.providerThreadId).toMatch(/^pth_/);
      expect(bound.nativeThreadRef).toMatch(/^sthread-/);
      await rt.respond({ requestId: opened.event.requestId, response: { kind: "decision", decision: "accept" } });
      await rt.waitForRun(asked.runId);
    } finally {
      await cleanup();
    }
  });
});

describe("invariant 2: one provider's events are never rewritten to look like another's", () => {
  it("keeps each node's origin target after a provider switch", async () => {
    const alpha = createScriptedAdapter({ script: () => [{ type: "text", text: "from alpha" }] });
    const beta = createScriptedAdapter({
      script: () => [{ type: "text", text: "from beta" }],
      capabilities: {
        identity: { nativeThreadIds: "none", nativeTurnIds: "none", nativeItemIds: "none", nativeRequestIds: "none" },
      },
    });
    const { rt, events, cleanup } = await openTestRuntime({ alpha, beta });
    try {
      const { threadId } = await rt.createThread({ providerTarget: "alpha" });
      await rt.waitForRun((await rt.sendMessage({ threadId, text: "a" })).runId);
      await rt.waitForRun((await rt.sendMessage({ threadId, text: "b", providerTarget: "beta" })).runId);
      const snapshot = await rt.readThread(threadId);
      const origins = ofType(events, "node.started")
        .filter((e) => e.kind === "assistant_message")
        .map((e) => [e.providerTarget, e.nativeRef]);
      expect(origins).toEqual([
        ["alpha", expect.stringMatching(/^sitem-/)],
        ["beta", null],
      ]);
      expect(snapshot.runs.map((r) => r.providerTarget)).toEqual(["alpha", "beta"]);
      expect(snapshot.runs[0]!.items.find((i) => i.kind === "assistant_message")!.text).toBe("from alpha");
    } finally {
      await cleanup();
    }
  });
});

describe("invariant 3: a child execution completing never closes its parent", () => {
  it("keeps the run running after its subagent and the subagent's child turn complete", async () => {
    const adapter = createScriptedAdapter({
      script: () => [
        {
          type: "subagent",
          agent: "explorer",
          prompt: "look",
          steps: [
            { type: "tool", name: "grep", output: "hit" },
            { type: "text", text: "found it" },
          ],
        },
        { type: "hang" },
      ],
    });
    const { rt, events, cleanup } = await openTestRuntime({ scripted: adapter });
    try {
      const { threadId } = await rt.createThread({ providerTarget: "scripted" });
      const { runId } = await rt.sendMessage({ threadId, text: "go" });
      const subagent = await nextEvent(rt, "node.started", (e) => e.kind === "subagent");
      await nextEvent(rt, "node.completed", (e) => e.nodeId === subagent.event.nodeId);
      const snapshot = await rt.readThread(threadId);
      expect(snapshot.runs[0]!.status).toBe("running");
      const child = ofType(events, "node.started").filter((e) => e.parentNodeId === subagent.event.nodeId);
      expect(child.map((e) => e.kind)).toEqual(["tool_call", "assistant_message"]);
      await rt.interrupt({ runId });
      expect((await rt.waitForRun(runId)).status).toBe("interrupted");
    } finally {
      await cleanup();
    }
  });
});

describe("invariant 4: only the root node of the active attempt makes a run terminal", () => {
  it("steers by interrupt-restart: attempt 1's terminal does not end the run, attempt 2's does", async () => {
    let turns = 0;
    const adapter = createScriptedAdapter({
      capabilities: { turns: { supportsActiveSteering: false } },
      script: ({ text }) => (turns++ === 0 ? hang : [{ type: "text", text: `steered: ${text}` }]),
    });
    const { rt, events, cleanup } = await openTestRuntime({ scripted: adapter });
    try {
      const { threadId } = await rt.createThread({ providerTarget: "scripted" });
      const { runId } = await rt.sendMessage({ threadId, text: "start" });
      await nextEvent(rt, "node.delta", (e) => e.runId === runId);
      const steer = await rt.sendMessage({ threadId, text: "go left", mode: "steer" });
      expect(steer).toMatchObject({ disposition: "steered", via: "interrupt_restart", runId });
      const run = await rt.waitForRun(runId);
      expect(run.status).toBe("completed");
      expect(run.attempts.map((a) => [a.ordinal, a.reason, a.status])).toEqual([
        [1, "initial", "superseded"],
        [2, "steering_restart", "completed"],
      ]);
      expect(ofType(events, "run.terminal").filter((e) => e.runId === runId)).toHaveLength(1);
      expect(ofType(events, "policy.applied").map((e) => e.policy)).toContain("steer_by_interrupt_restart");
      expect(
        run.items.find((i) => i.kind === "assistant_message" && i.attemptId === run.attempts[1]!.attemptId)?.text,
      ).toBe("steered: go left");
    } finally {
      await cleanup();
    }
  });
});

describe("invariant 5: an interrupt acknowledgement is not a terminal", () => {
  it("keeps the run running between the acknowledgement and the provider's terminal", async () => {
    const gated = gateEvents(createScriptedAdapter({ script: () => hang }), (e) => e.event.type === "turn.terminal");
    const { rt, events, cleanup } = await openTestRuntime({ scripted: gated.adapter });
    try {
      const { threadId } = await rt.createThread({ providerTarget: "scripted" });
      const { runId } = await rt.sendMessage({ threadId, text: "go" });
      await nextEvent(rt, "node.delta", (e) => e.runId === runId);
      await rt.interrupt({ runId });
      await nextEvent(rt, "interrupt.acknowledged", (e) => e.runId === runId);
      expect((await rt.readThread(threadId)).runs[0]!.status).toBe("running");
      gated.release();
      expect((await rt.waitForRun(runId)).status).toBe("interrupted");
      const order = events
        .map((r) => r.event.type)
        .filter((t) => t === "interrupt.acknowledged" || t === "run.terminal");
      expect(order).toEqual(["interrupt.acknowledged", "run.terminal"]);
    } finally {
      await cleanup();
    }
  });
});

describe("invariant 6: commands target app ids; adapters get native refs at the edge", () => {
  it("rejects native ids at the API and hands the adapter the native request ref", async () => {
    const recorded = recordCalls(
      createScriptedAdapter({
        script: () => [{ type: "command", command: "rm -rf build", output: "", approval: true }],
      }),
    );
    const { rt, cleanup } = await openTestRuntime({ scripted: recorded.adapter });
    try {
      const { threadId } = await rt.createThread({ providerTarget: "scripted" });
      const { runId } = await rt.sendMessage({ threadId, text: "clean" });
      const opened = await nextEvent(rt, "request.opened");
      const nativeRef = opened.event.nativeRef!;
      await expect(
        rt.respond({ requestId: nativeRef, response: { kind: "decision", decision: "accept" } }),
      ).rejects.toMatchObject({ code: "invalid_input", field: "requestId" });
      await expect(rt.interrupt({ runId: "sturn-3" })).rejects.toMatchObject({ code: "invalid_input", field: "runId" });
      await rt.respond({ requestId: opened.event.requestId, response: { kind: "decision", decision: "decline" } });
      await rt.waitForRun(runId);
      const call = recorded.calls.find((c) => c.method === "respondToRequest")!;
      expect(call.input.request.requestRef).toBe(nativeRef);
    } finally {
      await cleanup();
    }
  });
});

describe("invariant 7: a missing capability is a named policy with a typed result", () => {
  it(
    "refuses a steer the provider cannot do, " + "and falls back to a session stop for interrupt when allowed",
    async () => {
      const adapter = createScriptedAdapter({
        capabilities: {
          turns: { supportsActiveSteering: false, supportsSteeringByInterruptRestart: false, supportsInterrupt: false },
        },
        script: () => hang,
      });
      const { rt, events, cleanup } = await openTestRuntime({ scripted: adapter }, { allowSessionStopInterrupt: true });
      try {
        const { threadId } = await rt.createThread({ providerTarget: "scripted" });
        const { runId } = await rt.sendMessage({ threadId, text: "go" });
        await nextEvent(rt, "node.delta", (e) => e.runId === runId);
        await expect(rt.sendMessage({ threadId, text: "turn", mode: "steer" })).rejects.toMatchObject({
          code: "capability_unsupported",
          capability: "turns.supportsActiveSteering",
        });
        expect(await rt.interrupt({ runId })).toMatchObject({ via: "session_stop" });
        const run = await rt.waitForRun(runId);
        expect([run.status, run.reason]).toEqual(["interrupted", "session_stopped_for_interrupt"]);
        expect(ofType(events, "policy.applied").map((e) => [e.policy, e.outcome])).toEqual([
          ["steer_unsupported", "refused"],
          ["interrupt_by_session_stop", "fallback"],
        ]);
      } finally {
        await cleanup();
      }
    },
  );

  it("refuses an interrupt when stopping the session is not allowed", async () => {
    // The turn waits at a gate, not for a while: the refusal must meet a running run on any disk.
    const backend = new ScriptedBackend();
    const adapter = createScriptedAdapter({
      backend,
      capabilities: { turns: { supportsInterrupt: false } },
      script: () => [{ type: "gate", name: "refused" }],
    });
    const { rt, cleanup } = await openTestRuntime({ scripted: adapter });
    try {
      const { threadId } = await rt.createThread({ providerTarget: "scripted" });
      const { runId } = await rt.sendMessage({ threadId, text: "go" });
      await expect(rt.interrupt({ runId })).rejects.toMatchObject({
        code: "capability_unsupported",
        capability: "turns.supportsInterrupt",
      });
      expect(rt.views.runs.get(runId)!.status).not.toMatch(/completed|interrupted|failed|cancelled/);
      backend.openGate("refused");
      expect((await rt.waitForRun(runId)).status).toBe("completed");
    } finally {
      await cleanup();
    }
  });
});

describe("invariant 8: a provider switch creates an explicit handoff record", () => {
  it("records the handoff before the new provider's first turn and hands it the summary", async () => {
    const beta = recordCalls(createScriptedAdapter());
    const { rt, events, cleanup } = await openTestRuntime({ alpha: createScriptedAdapter(), beta: beta.adapter });
    try {
      const { threadId } = await rt.createThread({ providerTarget: "alpha" });
      await rt.waitForRun((await rt.sendMessage({ threadId, text: "remember 42" })).runId);
      const { runId } = await rt.sendMessage({ threadId, text: "what number?", providerTarget: "beta" });
      await rt.waitForRun(runId);
      const handoff = ofType(events, "handoff.created")[0]!;
      expect(handoff).toMatchObject({
        fromTarget: "alpha",
        toTarget: "beta",
        reason: "provider_switch",
        strategy: "full_thread_summary",
        coveredRunOrdinals: [1],
      });
      expect(handoff.text).toContain("remember 42");
      const send = beta.calls.find((c) => c.method === "sendRun")!;
      expect(send.input.context).toEqual({ kind: "handoff", text: handoff.text, delivery: "developer" });
      const types = events.map((r) => r.event.type);
      expect(types.indexOf("handoff.created")).toBeLessThan(types.lastIndexOf("attempt.turn_bound"));
    } finally {
      await cleanup();
    }
  });
});

describe("invariant 9: a fork records lineage first and resolves native vs portable at its first run", () => {
  it("resolves natively when the provider can fork, portably when it cannot", async () => {
    for (const canForkThread of [true, false]) {
      const recorded = recordCalls(
        createScriptedAdapter({ capabilities: { threads: { canForkThread, canForkFromTurn: canForkThread } } }),
      );
      const { rt, events, cleanup } = await openTestRuntime({ scripted: recorded.adapter });
      try {
        const { threadId } = await rt.createThread({ providerTarget: "scripted" });
        await rt.waitForRun((await rt.sendMessage({ threadId, text: "base" })).runId);
        const fork = await rt.forkThread({ threadId });
        expect(ofType(events, "fork.recorded")).toEqual([
          expect.objectContaining({ threadId: fork.threadId, parentThreadId: threadId }),
        ]);
        expect(ofType(events, "fork.resolved")).toEqual([]);
        await rt.waitForRun((await rt.sendMessage({ threadId: fork.threadId, text: "branch" })).runId);
        const resolved = ofType(events, "fork.resolved")[0]!;
        expect(resolved.resolution).toBe(canForkThread ? "native" : "portable");
        expect(recorded.calls.some((c) => c.method === "forkThread")).toBe(canForkThread);
        const bound = ofType(events, "provider_thread.bound").filter((e) => e.threadId === fork.threadId);
        expect(bound[0]!.via).toBe(canForkThread ? "forked" : "created");
        if (!canForkThread) expect(ofType(events, "policy.applied").map((e) => e.policy)).toContain("synthetic_fork");
      } finally {
        await cleanup();
      }
    }
  });

  it("refuses to fork from a run that is still active", async () => {
    const { rt, cleanup } = await openTestRuntime({ scripted: createScriptedAdapter({ script: () => hang }) });
    try {
      const { threadId } = await rt.createThread({ providerTarget: "scripted" });
      const { runId } = await rt.sendMessage({ threadId, text: "go" });
      await expect(rt.forkThread({ threadId })).rejects.toMatchObject({ code: "conflict" });
      await rt.interrupt({ runId });
      await rt.waitForRun(runId);
    } finally {
      await cleanup();
    }
  });
});

describe("invariant 10: nothing that must survive a restart lives only in adapter memory", () => {
  it("resumes the provider thread from the stored cursor in a new runtime", async () => {
    const backend = new ScriptedBackend();
    const first = await openTestRuntime({ scripted: createScriptedAdapter({ backend }) });
    const { threadId } = await first.rt.createThread({ providerTarget: "scripted", commandId: "create-1" });
    await first.rt.waitForRun((await first.rt.sendMessage({ threadId, text: "one" })).runId);
    const cursor = ofType(first.events, "provider_thread.bound")[0]!.resumeCursor;
    await first.rt.close();

    const recorded = recordCalls(createScriptedAdapter({ backend }));
    const second = await openTestRuntime({ scripted: recorded.adapter }, { dataDir: first.dataDir });
    try {
      expect(await second.rt.createThread({ providerTarget: "scripted", commandId: "create-1" })).toEqual({
        commandId: "create-1",
        threadId,
      });
      await second.rt.waitForRun((await second.rt.sendMessage({ threadId, text: "two" })).runId);
      expect(recorded.calls.find((c) => c.method === "ensureProviderThread")!.input.resume).toEqual({ cursor });
      expect(ofType(second.events, "provider_thread.bound")[0]).toMatchObject({ via: "resumed", resumeCursor: cursor });
      expect(backend.threads.get(cursor)!.turns.map((t) => t.userText)).toEqual(["one", "two"]);
    } finally {
      await second.cleanup();
    }
  });

  it("rebuilds from app context, visibly, when the provider cannot resume", async () => {
    const first = await openTestRuntime({ scripted: createScriptedAdapter() });
    const { threadId } = await first.rt.createThread({ providerTarget: "scripted" });
    await first.rt.waitForRun((await first.rt.sendMessage({ threadId, text: "remember 42" })).runId);
    await first.rt.close();

    const recorded = recordCalls(createScriptedAdapter()); // a provider that forgot everything
    const second = await openTestRuntime({ scripted: recorded.adapter }, { dataDir: first.dataDir });
    try {
      await second.rt.waitForRun((await second.rt.sendMessage({ threadId, text: "and now?" })).runId);
      expect(ofType(second.events, "warning")[0]!.message).toMatch(/could not be resumed/);
      expect(ofType(second.events, "handoff.created")[0]).toMatchObject({
        reason: "resume_failed",
        coveredRunOrdinals: [1],
      });
      const send = recorded.calls.find((c) => c.method === "sendRun")!;
      expect(send.input.context).toMatchObject({ kind: "rebuild", text: expect.stringContaining("remember 42") });
    } finally {
      await second.cleanup();
    }
  });
});
