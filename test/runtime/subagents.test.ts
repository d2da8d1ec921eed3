import { describe, expect, it } from "vitest";
import {
  createScriptedAdapter,
  defineCapabilities,
  type CapabilityOverrides,
  type ScriptStep,
} from "../../src/index.js";
import type { ProviderAdapter } from "../../src/adapters/contract.js";
import { ScriptedBackend } from "../../src/adapters/scripted/host/backend.js";
import { declaring } from "./hostileProvider.js";
import {
  injectOnThread,
  nextEvent,
  ofType,
  openTestRuntime,
  override,
  withInjectedFrames,
} from "../support/runtime.js";
import { policies, rejectsWith, row } from "../support/policies.js";

/**
 * The subagent fields govern, through the real runtime and the scripted provider: a subagent's child thread is an
 * addressable provider thread only where the record exposes subagent thread ids; wait and close reach the provider only
 * where the record allows them (else `capability_unsupported`, the policy recorded); a fork of a subagent is native,
 * portable or refused as the thread and subagent fork fields say; a provider without subagents or without their
 * lifecycle degrades by name.
 */

const helper = (steps: ScriptStep[]): ScriptStep => ({
  type: "subagent",
  agent: "helper",
  prompt: "look around",
  steps,
});
/** A subagent that says something, then waits at the gate `sub` (a test's hand on it); its parent then replies. */
const gated: ScriptStep[] = [
  helper([
    { type: "text", text: "child says hi" },
    { type: "gate", name: "sub" },
  ]),
  { type: "text", text: "parent done" },
];

function scriptedWith(capabilities: CapabilityOverrides, steps: ScriptStep[], backend = new ScriptedBackend()) {
  return { adapter: createScriptedAdapter({ capabilities, script: () => steps, backend }), backend };
}

async function open(adapter: ProviderAdapter) {
  const opened = await openTestRuntime({ scripted: adapter });
  const { threadId } = await opened.rt.createThread({ providerTarget: "scripted" });
  return { ...opened, threadId };
}

/** Sends a message and resolves with the run and its subagent node once that node has started. */
async function startWithSubagent(rt: Awaited<ReturnType<typeof open>>["rt"], threadId: string) {
  const { runId } = await rt.sendMessage({ threadId, text: "go" });
  const started = await nextEvent(rt, "node.started", (e) => e.runId === runId && e.kind === "subagent");
  return { runId, nodeId: started.event.nodeId };
}

describe("subagents.exposesSubagentThreadIds", () => {
  it("true: the child thread becomes an addressable provider thread of the subagent's node", async () => {
    const { adapter, backend } = scriptedWith({}, gated);
    const { rt, threadId, events, cleanup } = await open(adapter);
    try {
      const { runId, nodeId } = await startWithSubagent(rt, threadId);
      const bound = await nextEvent(rt, "subagent.thread_bound", (e) => e.nodeId === nodeId);
      expect(bound.event).toMatchObject({ threadId, runId, nodeId, providerTarget: "scripted" });
      // The native ref is the provider's child thread, which holds the subagent's conversation.
      expect(backend.threads.get(bound.event.nativeThreadRef)?.turns[0]?.userText).toBe("look around");
      const item = (await rt.readThread(threadId)).runs[0]!.items.find((i) => i.id === nodeId)!;
      expect(item.detail).toMatchObject({ providerThreadId: bound.event.providerThreadId });
      expect(rt.affordances(threadId).subagents).toMatchObject({
        shown: "addressable",
        nodes: [{ nodeId, ended: false, wait: { available: true }, close: { available: true } }],
      });
      backend.openGate("sub");
      await rt.waitForRun(runId);
      expect(policies(events, "subagent_not_addressable")).toEqual([]);
    } finally {
      await cleanup();
    }
  });

  it("false: the subagent is a nested node only; wait and close are refused as not addressable", async () => {
    const { adapter, backend } = scriptedWith({ subagents: { exposesSubagentThreadIds: false } }, gated);
    const { rt, threadId, events, cleanup } = await open(adapter);
    try {
      const { runId, nodeId } = await startWithSubagent(rt, threadId);
      await nextEvent(rt, "node.delta", (e) => e.runId === runId);
      const error = await rejectsWith(rt.waitForSubagent({ threadId, nodeId }), "capability_unsupported");
      expect(error.details).toMatchObject({
        capability: "subagents.exposesSubagentThreadIds",
        policy: "subagent_wait_unsupported",
      });
      await rejectsWith(rt.closeSubagent({ threadId, nodeId }), "capability_unsupported");
      expect(rt.affordances(threadId).subagents).toMatchObject({
        shown: "nested",
        nodes: [{ nodeId, wait: { available: false }, close: { available: false } }],
      });
      backend.openGate("sub");
      const run = await rt.waitForRun(runId);
      // Still shown nested: the child's message hangs under its subagent.
      expect(run.items.find((i) => i.text === "child says hi")?.parentId).toBe(nodeId);
      expect(ofType(events, "subagent.thread_bound")).toEqual([]);
      expect(policies(events, "subagent_not_addressable").map(row)).toEqual([
        [threadId, runId, "subagents.exposesSubagentThreadIds", "fallback"],
      ]);
      expect(
        ofType(events, "policy.applied")
          .filter((p) => p.outcome === "refused")
          .map((p) => [p.policy, p.capability]),
      ).toEqual([
        ["subagent_wait_unsupported", "subagents.exposesSubagentThreadIds"],
        ["subagent_close_unsupported", "subagents.exposesSubagentThreadIds"],
      ]);
    } finally {
      await cleanup();
    }
  });
});

describe("subagents.canWaitForSubagents", () => {
  it("true: waitForSubagent asks the provider and resolves once the subagent has ended", async () => {
    const { adapter: inner, backend } = scriptedWith({}, gated);
    const asked: string[] = [];
    const adapter = override(inner, {
      waitForSubagent: (input) => {
        asked.push(input.childThreadRef);
        return inner.waitForSubagent!(input);
      },
    });
    const { rt, threadId, cleanup } = await open(adapter);
    try {
      const { runId, nodeId } = await startWithSubagent(rt, threadId);
      const bound = await nextEvent(rt, "subagent.thread_bound", (e) => e.nodeId === nodeId);
      let ended = false;
      const waiting = rt.waitForSubagent({ threadId, nodeId }).finally(() => (ended = true));
      await nextEvent(rt, "node.delta", (e) => e.runId === runId);
      expect(ended).toBe(false);
      backend.openGate("sub");
      expect(await waiting).toEqual({ threadId, runId, nodeId, status: "completed", result: "helper completed" });
      expect(asked).toEqual([bound.event.nativeThreadRef]);
      // Ended: answered from the log, the provider not asked again.
      expect((await rt.waitForSubagent({ threadId, nodeId })).status).toBe("completed");
      expect(asked).toHaveLength(1);
      await rt.waitForRun(runId);
    } finally {
      await cleanup();
    }
  });

  it("true: a wait that outlasts timeoutMs rejects with timeout, the subagent goes on", async () => {
    const { adapter, backend } = scriptedWith({}, gated);
    const { rt, threadId, cleanup } = await open(adapter);
    try {
      const { runId, nodeId } = await startWithSubagent(rt, threadId);
      await nextEvent(rt, "subagent.thread_bound", (e) => e.nodeId === nodeId);
      await rejectsWith(rt.waitForSubagent({ threadId, nodeId, timeoutMs: 1 }), "timeout");
      backend.openGate("sub");
      expect((await rt.waitForRun(runId)).status).toBe("completed");
    } finally {
      await cleanup();
    }
  });

  it("false: refused with capability_unsupported, the policy recorded; the adapter has no wait", async () => {
    const { adapter, backend } = scriptedWith({ subagents: { canWaitForSubagents: false } }, gated);
    expect(adapter.waitForSubagent).toBeUndefined();
    const { rt, threadId, events, cleanup } = await open(adapter);
    try {
      const { runId, nodeId } = await startWithSubagent(rt, threadId);
      await nextEvent(rt, "subagent.thread_bound", (e) => e.nodeId === nodeId);
      const error = await rejectsWith(rt.waitForSubagent({ threadId, nodeId }), "capability_unsupported");
      expect(error.details).toMatchObject({ capability: "subagents.canWaitForSubagents" });
      expect(rt.affordances(threadId).subagents.nodes[0]!.wait).toEqual({
        available: false,
        reason: "scripted: subagents.canWaitForSubagents is false",
      });
      backend.openGate("sub");
      await rt.waitForRun(runId);
      expect(policies(events, "subagent_wait_unsupported").map(row)).toEqual([
        [threadId, runId, "subagents.canWaitForSubagents", "refused"],
      ]);
    } finally {
      await cleanup();
    }
  });

  it("an unknown node is not_found", async () => {
    const { adapter } = scriptedWith({}, [{ type: "text", text: "hi" }]);
    const { rt, threadId, cleanup } = await open(adapter);
    try {
      await rejectsWith(rt.waitForSubagent({ threadId, nodeId: "nod_unknown" }), "not_found");
      await rejectsWith(rt.closeSubagent({ threadId, nodeId: "nod_unknown" }), "not_found");
      await rejectsWith(rt.forkThread({ threadId, fromSubagentNodeId: "nod_unknown" }), "not_found");
    } finally {
      await cleanup();
    }
  });
});

describe("subagents.canCloseSubagents", () => {
  /** A subagent that never ends on its own; its parent replies once it has. */
  const hanging: ScriptStep[] = [
    helper([{ type: "text", text: "child says hi" }, { type: "hang" }]),
    { type: "text", text: "parent done" },
  ];

  it("true: closing ends the subagent interrupted and its run goes on; two closes at once close once", async () => {
    const { adapter: inner } = scriptedWith({}, hanging);
    let closes = 0;
    const adapter = override(inner, {
      closeSubagent: (input) => {
        closes += 1;
        return inner.closeSubagent!(input);
      },
    });
    const { rt, threadId, events, cleanup } = await open(adapter);
    try {
      const { runId, nodeId } = await startWithSubagent(rt, threadId);
      await nextEvent(rt, "subagent.thread_bound", (e) => e.nodeId === nodeId);
      const receipts = await Promise.all([
        rt.closeSubagent({ threadId, nodeId }),
        rt.closeSubagent({ threadId, nodeId }),
      ]);
      expect(receipts.map((r) => r.via).sort()).toEqual(["already_requested", "requested"]);
      expect(closes).toBe(1);
      const run = await rt.waitForRun(runId);
      expect(run.status).toBe("completed");
      const node = run.items.find((i) => i.id === nodeId)!;
      expect([node.status, node.detail?.status, node.result]).toEqual([
        "complete",
        "interrupted",
        "helper interrupted",
      ]);
      expect(run.items.find((i) => i.text === "parent done")?.parentId).not.toBe(nodeId);
      expect(ofType(events, "subagent.close_requested")).toEqual([
        { type: "subagent.close_requested", threadId, runId, nodeId },
      ]);
      expect((await rt.closeSubagent({ threadId, nodeId })).via).toBe("already_ended");
      expect(closes).toBe(1);
    } finally {
      await cleanup();
    }
  });

  it("false: refused with capability_unsupported, the policy recorded, the subagent left running", async () => {
    const { adapter, backend } = scriptedWith({ subagents: { canCloseSubagents: false } }, gated);
    expect(adapter.closeSubagent).toBeUndefined();
    const { rt, threadId, events, cleanup } = await open(adapter);
    try {
      const { runId, nodeId } = await startWithSubagent(rt, threadId);
      await nextEvent(rt, "subagent.thread_bound", (e) => e.nodeId === nodeId);
      const error = await rejectsWith(rt.closeSubagent({ threadId, nodeId }), "capability_unsupported");
      expect(error.details).toMatchObject({
        capability: "subagents.canCloseSubagents",
        policy: "subagent_close_unsupported",
      });
      expect(rt.affordances(threadId).subagents.nodes[0]!.close.available).toBe(false);
      backend.openGate("sub");
      const run = await rt.waitForRun(runId);
      expect(run.items.find((i) => i.id === nodeId)?.detail?.status).toBe("completed");
      expect(policies(events, "subagent_close_unsupported").map(row)).toEqual([
        [threadId, runId, "subagents.canCloseSubagents", "refused"],
      ]);
      expect(ofType(events, "subagent.close_requested")).toEqual([]);
    } finally {
      await cleanup();
    }
  });
});

describe("forkThread({ fromSubagentNodeId }): canForkFromSubagentThread and canForkSubagentThread", () => {
  const work: ScriptStep[] = [
    helper([
      { type: "command", command: "ls", output: "a.txt" },
      { type: "text", text: "found a.txt" },
    ]),
    { type: "text", text: "parent done" },
  ];

  /** Runs the thread's first turn, then forks its subagent and runs the fork's first turn. */
  async function forkSubagent(capabilities: CapabilityOverrides) {
    const backend = new ScriptedBackend();
    const forks: Array<{ threadRef: string | null }> = [];
    const inner = createScriptedAdapter({
      capabilities,
      backend,
      script: ({ text }) => (text === "go" ? work : [{ type: "text", text: "forked reply" }]),
    });
    const adapter = inner.forkThread
      ? override(inner, {
          forkThread: (input) => {
            forks.push({ threadRef: input.thread.threadRef });
            return inner.forkThread!(input);
          },
        })
      : inner;
    const opened = await open(adapter);
    const { rt, threadId } = opened;
    const { runId } = await rt.sendMessage({ threadId, text: "go" });
    const run = await rt.waitForRun(runId);
    const nodeId = run.items.find((i) => i.kind === "subagent")!.id;
    const affordance = rt.affordances(threadId).subagents.nodes[0]!.fork;
    const fork = await rt.forkThread({ threadId, fromSubagentNodeId: nodeId });
    const forkRun = await rt.waitForRun((await rt.sendMessage({ threadId: fork.threadId, text: "continue" })).runId);
    return { ...opened, backend, forks, nodeId, runId, affordance, fork, forkRun };
  }

  it("both true: the fork is native, from the subagent's child thread", async () => {
    const f = await forkSubagent({ subagents: { canForkSubagentThread: true } });
    try {
      expect(f.affordance).toEqual({ source: "native", reason: null });
      const child = ofType(f.events, "subagent.thread_bound")[0]!.nativeThreadRef;
      expect(f.forks).toEqual([{ threadRef: child }]);
      expect(ofType(f.events, "fork.recorded")[0]).toMatchObject({
        threadId: f.fork.threadId,
        forkedFromRunId: f.runId,
        fromSubagentNodeId: f.nodeId,
      });
      expect(ofType(f.events, "fork.resolved")[0]).toMatchObject({ threadId: f.fork.threadId, resolution: "native" });
      // The fork's provider thread is a copy of the subagent's conversation, and it is told nothing more.
      const forked = [...f.backend.threads.values()].find((t) => t.turns.some((turn) => turn.userText === "continue"))!;
      expect(forked.turns.map((t) => [t.userText, t.context?.kind ?? null])).toEqual([
        ["look around", null],
        ["continue", null],
      ]);
      expect(policies(f.events, "subagent_fork_synthetic")).toEqual([]);
      expect(f.forkRun.status).toBe("completed");
    } finally {
      await f.cleanup();
    }
  });

  for (const [capability, overrides] of [
    ["subagents.canForkSubagentThread", { subagents: { canForkSubagentThread: false } }],
    [
      "threads.canForkFromSubagentThread",
      { threads: { canForkFromSubagentThread: false }, subagents: { canForkSubagentThread: true } },
    ],
  ] as const) {
    it(`${capability} false: the fork gets portable context told from the subagent's items`, async () => {
      const f = await forkSubagent(overrides);
      try {
        expect(f.affordance.source).toBe("synthetic");
        expect(f.affordance.reason).toContain(capability);
        expect(f.forks).toEqual([]);
        expect(policies(f.events, "subagent_fork_synthetic").map(row)).toEqual([
          [f.fork.threadId, null, capability, "fallback"],
        ]);
        expect(ofType(f.events, "fork.resolved")[0]).toMatchObject({ resolution: "portable" });
        const handoff = ofType(f.events, "handoff.created").find((h) => h.threadId === f.fork.threadId)!;
        expect(handoff).toMatchObject({ reason: "fork", coveredRunIds: [f.nodeId] });
        // Its prompt, its children's items, its result; not the parent's reply.
        expect(handoff.text).toContain("user: look around");
        expect(handoff.text).toContain("ran: ls (exit 0)");
        expect(handoff.text).toContain("found a.txt");
        expect(handoff.text).toContain("helper completed");
        expect(handoff.text).not.toContain("parent done");
        expect(f.forkRun.status).toBe("completed");
      } finally {
        await f.cleanup();
      }
    });
  }

  it("neither native nor portable (no fork of subagent threads, no explicit context): refused", async () => {
    const noContext: CapabilityOverrides = {
      subagents: { canForkSubagentThread: false },
      context: { acceptsSystemContext: false, acceptsDeveloperContext: false, acceptsSyntheticUserContext: false },
    };
    const { adapter } = scriptedWith(noContext, work);
    const { rt, threadId, events, cleanup } = await open(adapter);
    try {
      const run = await rt.waitForRun((await rt.sendMessage({ threadId, text: "go" })).runId);
      const nodeId = run.items.find((i) => i.kind === "subagent")!.id;
      expect(rt.affordances(threadId).subagents.nodes[0]!.fork.source).toBe("unavailable");
      const error = await rejectsWith(
        rt.forkThread({ threadId, fromSubagentNodeId: nodeId }),
        "capability_unsupported",
      );
      expect(error.details).toMatchObject({ policy: "subagent_fork_unsupported" });
      await rt.readThread(threadId); // the refusal's record is durable
      expect(policies(events, "subagent_fork_unsupported").map(row)).toEqual([
        [threadId, run.runId, "subagents.canForkSubagentThread", "refused"],
      ]);
      expect(rt.listThreads()).toHaveLength(1);
    } finally {
      await cleanup();
    }
  });

  it("a subagent still running is no fork point (conflict)", async () => {
    const { adapter, backend } = scriptedWith({}, gated);
    const { rt, threadId, cleanup } = await open(adapter);
    try {
      const { runId, nodeId } = await startWithSubagent(rt, threadId);
      await rejectsWith(rt.forkThread({ threadId, fromSubagentNodeId: nodeId }), "conflict");
      backend.openGate("sub");
      await rt.waitForRun(runId);
    } finally {
      await cleanup();
    }
  });
});

describe("subagents.supportsSubagents", () => {
  const steps: ScriptStep[] = [
    helper([{ type: "text", text: "child says hi" }]),
    { type: "text", text: "parent done" },
  ];

  it("true: a subagent is a node, its work nested under it", async () => {
    const { adapter } = scriptedWith({}, steps);
    const { rt, threadId, events, cleanup } = await open(adapter);
    try {
      const run = await rt.waitForRun((await rt.sendMessage({ threadId, text: "go" })).runId);
      const node = run.items.find((i) => i.kind === "subagent")!;
      expect(run.items.find((i) => i.text === "child says hi")?.parentId).toBe(node.id);
      expect(policies(events, "subagent_shown_inline")).toEqual([]);
    } finally {
      await cleanup();
    }
  });

  it("false, the provider reporting one anyway: a protocol warning, no node, its work shown in its turn", async () => {
    // A provider that runs subagents (with child threads) while its record says it has none.
    const runs = createScriptedAdapter({ script: () => steps });
    const adapter = declaring(runs, defineCapabilities({ subagents: { supportsSubagents: false } }));
    const { rt, threadId, events, cleanup } = await open(adapter);
    try {
      expect(rt.affordances(threadId).subagents).toMatchObject({ shown: "inline", nodes: [] });
      const run = await rt.waitForRun((await rt.sendMessage({ threadId, text: "go" })).runId);
      expect(run.status).toBe("completed");
      expect(run.items.filter((i) => i.kind === "subagent")).toEqual([]);
      const root = ofType(events, "attempt.started")[0]!.rootNodeId;
      expect(run.items.find((i) => i.text === "child says hi")?.parentId).toBe(root);
      expect(policies(events, "subagent_shown_inline").map(row)).toEqual([
        [threadId, run.runId, "subagents.supportsSubagents", "fallback"],
      ]);
      expect(ofType(events, "warning").some((w) => w.message.includes("protocol_error"))).toBe(true);
    } finally {
      await cleanup();
    }
  });
});

describe("an item beside a running subagent", () => {
  it("is the turn's own where the provider says so (parentItemRef null), else the open subagent's", async () => {
    const backend = new ScriptedBackend();
    const { adapter, inject } = withInjectedFrames(scriptedWith({}, gated, backend).adapter);
    const { rt, threadId, events, cleanup } = await open(adapter);
    try {
      const { runId, nodeId } = await startWithSubagent(rt, threadId);
      await nextEvent(rt, "node.completed", (e) => e.runId === runId && e.text === "child says hi");
      const tool = { type: "item.started", kind: "command_execution", detail: { command: "ls" } };
      injectOnThread(inject, events, { ...tool, itemRef: "root-tool", parentItemRef: null });
      injectOnThread(inject, events, { ...tool, itemRef: "unsaid-tool" });
      const parentOf = async (ref: string) =>
        (await nextEvent(rt, "node.started", (e) => e.runId === runId && e.nativeRef === ref)).event.parentNodeId;
      const root = ofType(events, "attempt.started")[0]!.rootNodeId;
      expect(await parentOf("root-tool")).toBe(root);
      expect(await parentOf("unsaid-tool")).toBe(nodeId);
      backend.openGate("sub");
      expect((await rt.waitForRun(runId)).status).toBe("completed");
    } finally {
      await cleanup();
    }
  });
});

describe("subagents.emitsSubagentLifecycle", () => {
  const steps: ScriptStep[] = [
    helper([{ type: "text", text: "child says hi" }]),
    { type: "text", text: "parent done" },
  ];

  it("true: the node is the provider's, closed by its own completion with its result", async () => {
    const { adapter } = scriptedWith({}, steps);
    const { rt, threadId, events, cleanup } = await open(adapter);
    try {
      const run = await rt.waitForRun((await rt.sendMessage({ threadId, text: "go" })).runId);
      const node = run.items.find((i) => i.kind === "subagent")!;
      expect([node.status, node.result, node.detail?.toolName]).toEqual(["complete", "helper completed", "helper"]);
      expect(policies(events, "subagent_lifecycle_inferred")).toEqual([]);
    } finally {
      await cleanup();
    }
  });

  it("false: the node is made from its child thread's events, closed when its child turn ends, by policy", async () => {
    const { adapter } = scriptedWith({ subagents: { emitsSubagentLifecycle: false } }, steps);
    const { rt, threadId, events, cleanup } = await open(adapter);
    try {
      const run = await rt.waitForRun((await rt.sendMessage({ threadId, text: "go" })).runId);
      const node = run.items.find((i) => i.kind === "subagent")!;
      expect([node.status, node.result, node.detail?.status]).toEqual(["complete", undefined, "completed"]);
      expect(run.items.find((i) => i.text === "child says hi")?.parentId).toBe(node.id);
      const closed = ofType(events, "node.completed").find((e) => e.nodeId === node.id)!;
      expect(closed.settledBy).toBe("provider");
      expect(policies(events, "subagent_lifecycle_inferred").map(row)).toEqual([
        [threadId, run.runId, "subagents.emitsSubagentLifecycle", "fallback"],
      ]);
      // Its child thread is still addressable: the record exposes subagent thread ids.
      expect(ofType(events, "subagent.thread_bound").map((e) => e.nodeId)).toEqual([node.id]);
    } finally {
      await cleanup();
    }
  });

  it("false, and no thread ids either: the node is made from the items naming it, closed with the turn", async () => {
    const capabilities = { subagents: { emitsSubagentLifecycle: false, exposesSubagentThreadIds: false } };
    const { adapter } = scriptedWith(capabilities, steps);
    const { rt, threadId, events, cleanup } = await open(adapter);
    try {
      const run = await rt.waitForRun((await rt.sendMessage({ threadId, text: "go" })).runId);
      const node = run.items.find((i) => i.kind === "subagent")!;
      expect(node.status).toBe("complete");
      expect(run.items.find((i) => i.text === "child says hi")?.parentId).toBe(node.id);
      expect(run.items.find((i) => i.text === "parent done")?.parentId).not.toBe(node.id);
      expect(policies(events, "subagent_lifecycle_inferred").map(row)).toEqual([
        [threadId, run.runId, "subagents.emitsSubagentLifecycle", "fallback"],
      ]);
      expect(policies(events, "subagent_not_addressable")).toHaveLength(1);
    } finally {
      await cleanup();
    }
  });
});
