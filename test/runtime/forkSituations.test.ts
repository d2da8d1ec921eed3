import { describe, expect, it } from "vitest";
import { ScriptedBackend, type CapabilityOverrides, type ScriptStep } from "../../src/index.js";
import type { DomainEvent } from "../../src/domain/events.js";
import type { LogRecord } from "../../src/runtime/store/eventLog.js";
import { holding, policies, row, scripted, turns } from "../support/policies.js";
import {
  deferred,
  nextEvent,
  ofType,
  openTestRuntime,
  override,
  recordCalls,
  sendAndWait,
} from "../support/runtime.js";
import { tempDir } from "../support/files.js";
import { isolateHomeForFile } from "../checkpoints/isolated.js";

/**
 * Which fork is native and which portable, through the real runtime and scripted providers, the expectations taken
 * from the specification (the capability seed, the domain model, guarantees.md): a fork's first run forks natively
 * only when the provider's parent thread ran every run up to the fork point, still holds them (and whatever the
 * parent inherited, by having been forked itself), and the provider forks from that point: `threads.canForkThread`
 * for the whole thread, `threads.canForkFromTurn` (and the fork point's native turn id) for a point inside it, a point
 * being inside when a later run reached the provider. Anything else is `synthetic_fork`: portable context with the
 * parent's history up to the fork point. A subagent's fork is native only where its child thread is addressable, ran
 * on the fork's provider, and that provider forks subagent threads; else `subagent_fork_synthetic`, told from the
 * subagent's own items.
 */

// The checkpoint store (the divergent rollback below) reads git's config: a temporary HOME, never this machine's.
isolateHomeForFile();

type Events = LogRecord<DomainEvent>[];

/** A scripted target on its own backend, its calls recorded; it replies `<name>: <text>`. */
function target(name: string, capabilities: CapabilityOverrides = {}, steps: Record<string, ScriptStep[]> = {}) {
  const backend = new ScriptedBackend();
  const script = ({ text }: { text: string }) =>
    Object.entries(steps).find(([key]) => text.includes(key))?.[1] ?? [{ type: "text", text: `${name}: ${text}` }];
  const { adapter, calls } = recordCalls(scripted(capabilities, script, backend));
  return { adapter, calls, backend };
}

type Target = ReturnType<typeof target>;

const forkCalls = (t: Target) => t.calls.filter((c) => c.method === "forkThread").map((c) => c.input);
const sends = (t: Target) => t.calls.filter((c) => c.method === "sendRun").map((c) => c.input);
/** The context the fork's first turn was sent with on this target (null when none). */
const firstContext = (t: Target, text: string) => sends(t).find((s) => s.text === text)!.context;
const resolution = (events: Events, threadId: string) =>
  ofType(events, "fork.resolved").find((e) => e.threadId === threadId)!;
const forkPolicies = (events: Events, threadId: string) =>
  ofType(events, "policy.applied")
    .filter((e) => e.threadId === threadId)
    .map((e) => [e.policy, e.capability]);
/** The provider thread an app thread was first bound to on a target. */
const boundOf = (events: Events, threadId: string) =>
  ofType(events, "provider_thread.bound").find((e) => e.threadId === threadId)!;

/** Forks the thread and runs the fork's first message; resolves with the fork's id and its run. */
async function forkAndRun(
  rt: Awaited<ReturnType<typeof openTestRuntime>>["rt"],
  input: { threadId: string; afterRunId?: string; providerTarget?: string; fromSubagentNodeId?: string },
  text = "in fork",
) {
  const fork = await rt.forkThread(input);
  const run = await sendAndWait(rt, fork.threadId, text);
  expect(run.status).toBe("completed");
  return { threadId: fork.threadId, run };
}

/** The fork point is the thread's end: a native fork of the whole thread, holding run "one" and its own turn. */
function expectWholeThreadFork(events: Parameters<typeof resolution>[0], a: ReturnType<typeof target>, forkId: string) {
  expect(resolution(events, forkId).resolution).toBe("native");
  expect(forkCalls(a).map((f) => f.afterTurnRef)).toEqual([null]);
  expect(turns(holding(a.backend, "in fork"))).toEqual([
    ["one", null],
    ["in fork", null],
  ]);
}

describe("a fork point inside the parent's history: a later parent run reached the provider", () => {
  it("without threads.canForkFromTurn: portable from inside, native after the latest run", async () => {
    const a = target("a", { threads: { canForkFromTurn: false } });
    const { rt, events, cleanup } = await openTestRuntime({ a: a.adapter });
    try {
      const { threadId } = await rt.createThread({ providerTarget: "a" });
      const r1 = await sendAndWait(rt, threadId, "one");
      const r2 = await sendAndWait(rt, threadId, "two");

      const inside = await forkAndRun(rt, { threadId, afterRunId: r1.runId }, "inside");
      expect(resolution(events, inside.threadId).resolution).toBe("portable");
      expect(forkPolicies(events, inside.threadId)).toEqual([["synthetic_fork", "threads.canForkFromTurn"]]);
      expect(policies(events, "synthetic_fork")[0]!.detail).toContain("threads.canForkFromTurn");
      const told = firstContext(a, "inside");
      expect(told).toMatchObject({ kind: "fork" });
      expect(told.text).toContain("user: one");
      expect(told.text).not.toContain("user: two");

      const latest = await forkAndRun(rt, { threadId, afterRunId: r2.runId }, "latest");
      expect(resolution(events, latest.threadId).resolution).toBe("native");
      expect(forkPolicies(events, latest.threadId)).toEqual([]);
      expect(forkCalls(a).map((f) => f.afterTurnRef)).toEqual([null]);
      expect(turns(holding(a.backend, "latest"))).toEqual([
        ["one", null],
        ["two", null],
        ["latest", null],
      ]);
    } finally {
      await cleanup();
    }
  });

  it("with threads.canForkFromTurn: native from the point's turn; after the latest, the whole thread", async () => {
    const a = target("a");
    const { rt, events, cleanup } = await openTestRuntime({ a: a.adapter });
    try {
      const { threadId } = await rt.createThread({ providerTarget: "a" });
      const r1 = await sendAndWait(rt, threadId, "one");
      await sendAndWait(rt, threadId, "two");
      const [oneTurn, twoTurn] = holding(a.backend, "one").turns.map((t) => t.turnRef);

      const inside = await forkAndRun(rt, { threadId, afterRunId: r1.runId }, "inside");
      const parentThread = boundOf(events, threadId).providerThreadId;
      expect(resolution(events, inside.threadId)).toMatchObject({ resolution: "native" });
      expect(resolution(events, inside.threadId).detail).toContain(parentThread);
      expect(turns(holding(a.backend, "inside"))).toEqual([
        ["one", null],
        ["inside", null],
      ]);

      await forkAndRun(rt, { threadId }, "whole");
      expect(turns(holding(a.backend, "whole"))).toEqual([
        ["one", null],
        ["two", null],
        ["whole", null],
      ]);
      expect(forkCalls(a).map((f) => [f.thread.threadRef, f.afterTurnRef])).toEqual([
        [boundOf(events, threadId).nativeThreadRef, oneTurn],
        [boundOf(events, threadId).nativeThreadRef, null],
      ]);
      expect(twoTurn).not.toBe(oneTurn);
      expect(ofType(events, "policy.applied")).toEqual([]);
    } finally {
      await cleanup();
    }
  });

  it("a later run whose turn never reached the provider leaves the fork point at the thread's end", async () => {
    const a = target("a", { threads: { canForkFromTurn: false } });
    const refusing = override(a.adapter, {
      sendRun: (input) =>
        input.text === "refused" ? Promise.reject(new Error("the host went away")) : a.adapter.sendRun(input),
    });
    const { rt, events, cleanup } = await openTestRuntime({ a: refusing });
    try {
      const { threadId } = await rt.createThread({ providerTarget: "a" });
      const r1 = await sendAndWait(rt, threadId, "one");
      expect((await sendAndWait(rt, threadId, "refused")).status).toBe("failed");

      const fork = await forkAndRun(rt, { threadId, afterRunId: r1.runId });
      expectWholeThreadFork(events, a, fork.threadId);
    } finally {
      await cleanup();
    }
  });

  it("a later run rolled back (the provider dropped its turn) leaves the fork point at the thread's end", async () => {
    const a = target("a", { threads: { canForkFromTurn: false } });
    const { rt, events, cleanup } = await openTestRuntime({ a: a.adapter });
    try {
      const { threadId } = await rt.createThread({ providerTarget: "a" });
      const r1 = await sendAndWait(rt, threadId, "one");
      await sendAndWait(rt, threadId, "two");
      expect(await rt.rollback({ threadId, toRunId: r1.runId })).toMatchObject({ provider: "rolled_back" });

      const fork = await forkAndRun(rt, { threadId, afterRunId: r1.runId });
      expectWholeThreadFork(events, a, fork.threadId);
    } finally {
      await cleanup();
    }
  });

  it("no native turn ids: a point inside has no native fork point, portable; after the latest, native", async () => {
    const a = target("a", { turns: { exposesNativeTurnId: false } });
    const { rt, events, cleanup } = await openTestRuntime({ a: a.adapter });
    try {
      const { threadId } = await rt.createThread({ providerTarget: "a" });
      const r1 = await sendAndWait(rt, threadId, "one");
      await sendAndWait(rt, threadId, "two");

      const inside = await forkAndRun(rt, { threadId, afterRunId: r1.runId }, "inside");
      expect(resolution(events, inside.threadId).resolution).toBe("portable");
      expect(forkPolicies(events, inside.threadId)).toEqual([["synthetic_fork", "threads.canForkFromTurn"]]);
      expect(resolution(events, inside.threadId).detail).toContain("native turn id");
      expect(firstContext(a, "inside").text).toContain("user: one");
      expect(firstContext(a, "inside").text).not.toContain("user: two");

      const latest = await forkAndRun(rt, { threadId }, "latest");
      expect(resolution(events, latest.threadId).resolution).toBe("native");
      expect(forkCalls(a).map((f) => f.afterTurnRef)).toEqual([null]);
    } finally {
      await cleanup();
    }
  });
});

/** Targets `a` (whose host fails to send the turn `refused`: it never reaches the provider) and `b`. */
async function refusingTarget() {
  const a = target("a");
  const b = target("b");
  const refusing = override(a.adapter, {
    sendRun: (input) =>
      input.text === "refused" ? Promise.reject(new Error("the host went away")) : a.adapter.sendRun(input),
  });
  return { ...(await openTestRuntime({ a: refusing, b: b.adapter })), a, b };
}

describe("what a fork point is", () => {
  it("a later run still on its way to the provider makes the point inside: portable, no canForkFromTurn", async () => {
    const a = target("a", { threads: { canForkFromTurn: false } });
    const held = deferred();
    const holding2 = override(a.adapter, {
      sendRun: async (input) => {
        if (input.text === "held") await held.promise;
        return a.adapter.sendRun(input);
      },
    });
    const { rt, events, cleanup } = await openTestRuntime({ a: holding2 });
    try {
      const { threadId } = await rt.createThread({ providerTarget: "a" });
      const r1 = await sendAndWait(rt, threadId, "one");
      const r2 = await rt.sendMessage({ threadId, text: "held" });
      const fork = await forkAndRun(rt, { threadId, afterRunId: r1.runId });
      expect(resolution(events, fork.threadId).resolution).toBe("portable");
      expect(forkPolicies(events, fork.threadId)).toEqual([["synthetic_fork", "threads.canForkFromTurn"]]);
      expect(forkCalls(a)).toEqual([]);
      held.resolve();
      expect((await rt.waitForRun(r2.runId)).status).toBe("completed");
    } finally {
      held.resolve();
      await cleanup();
    }
  });

  it("a fork of a thread with no runs carries nothing, though the parent runs before the fork's run", async () => {
    const a = target("a");
    const { rt, events, cleanup } = await openTestRuntime({ a: a.adapter });
    try {
      const { threadId } = await rt.createThread({ providerTarget: "a" });
      const fork = await rt.forkThread({ threadId });
      await sendAndWait(rt, threadId, "one");
      expect((await sendAndWait(rt, fork.threadId, "in fork")).status).toBe("completed");
      expect(turns(holding(a.backend, "in fork"))).toEqual([["in fork", null]]);
      expect(ofType(events, "handoff.created")).toEqual([]);
      expect(resolution(events, fork.threadId).detail).not.toContain("one");
    } finally {
      await cleanup();
    }
  });

  it("a run whose turn never reached the provider is not part of the history a portable fork is told", async () => {
    const { rt, events, b, cleanup } = await refusingTarget();
    try {
      const { threadId } = await rt.createThread({ providerTarget: "a" });
      await sendAndWait(rt, threadId, "one");
      expect((await sendAndWait(rt, threadId, "refused")).status).toBe("failed");
      await sendAndWait(rt, threadId, "three");
      const fork = await forkAndRun(rt, { threadId, providerTarget: "b" });
      expect(resolution(events, fork.threadId).resolution).toBe("portable");
      expect(policies(events, "synthetic_fork")[0]!.detail).toContain("from 2 runs");
      const told = firstContext(b, "in fork");
      expect(told.text).toContain("user: one");
      expect(told.text).toContain("user: three");
      expect(told.text).not.toContain("refused");
    } finally {
      await cleanup();
    }
  });

  // A fork point whose turn never reached a provider is in no conversation; the runs before it still are.
  it("a fork after a run whose turn never reached the provider still holds the runs before it", async () => {
    const { rt, events, b, cleanup } = await refusingTarget();
    try {
      const { threadId } = await rt.createThread({ providerTarget: "a" });
      await sendAndWait(rt, threadId, "one");
      expect((await sendAndWait(rt, threadId, "refused")).status).toBe("failed");
      const fork = await forkAndRun(rt, { threadId, providerTarget: "b" });
      expect(policies(events, "synthetic_fork")[0]!.detail).toContain("from 1 runs");
      expect(firstContext(b, "in fork")?.text).toContain("user: one");
      expect(resolution(events, fork.threadId).resolution).toBe("portable");
    } finally {
      await cleanup();
    }
  });

  it("an adapter whose record claims native forks without forkThread is refused at open, typed", async () => {
    const a = target("a");
    const noFork = override(a.adapter, { forkThread: undefined });
    await expect(openTestRuntime({ a: noFork })).rejects.toMatchObject({
      code: "invalid_input",
      details: { field: "providers.a.capabilities.threads.canForkThread" },
    });
    expect(forkCalls(a)).toEqual([]);
  });

  it("a record without native forks forks portably", async () => {
    const a = target("a", { threads: { canForkThread: false } });
    const { rt, events, cleanup } = await openTestRuntime({ a: a.adapter });
    try {
      const { threadId } = await rt.createThread({ providerTarget: "a" });
      await sendAndWait(rt, threadId, "one");
      const fork = await forkAndRun(rt, { threadId });
      expect(resolution(events, fork.threadId).resolution).toBe("portable");
      expect(forkPolicies(events, fork.threadId)).toEqual([["synthetic_fork", "threads.canForkThread"]]);
      expect(resolution(events, fork.threadId).detail).toContain("cannot fork natively");
      expect(forkCalls(a)).toEqual([]);
      expect(firstContext(a, "in fork").text).toContain("user: one");
    } finally {
      await cleanup();
    }
  });
});

describe("the parent's provider thread must hold every run up to the fork point", () => {
  it("a parent whose provider thread was replaced mid-history forks portably, told every run", async () => {
    const a = target("a", {}, { "[break]": [{ type: "fail", message: "thread corrupt", broken: true }] });
    const { rt, events, cleanup } = await openTestRuntime({ a: a.adapter });
    try {
      const { threadId } = await rt.createThread({ providerTarget: "a" });
      await sendAndWait(rt, threadId, "one");
      expect((await sendAndWait(rt, threadId, "[break]")).status).toBe("failed");
      await sendAndWait(rt, threadId, "three");
      const bound = ofType(events, "provider_thread.bound").filter((b) => b.threadId === threadId);
      expect(bound.map((b) => b.via)).toEqual(["created", "replaced"]);

      const fork = await forkAndRun(rt, { threadId });
      expect(resolution(events, fork.threadId).resolution).toBe("portable");
      expect(forkPolicies(events, fork.threadId)).toEqual([["synthetic_fork", "threads.canForkThread"]]);
      expect(resolution(events, fork.threadId).detail).toContain("did not all run on this provider thread");
      expect(policies(events, "synthetic_fork")[0]!.detail).toContain("from 3 runs");
      expect(forkCalls(a)).toEqual([]);
      const told = firstContext(a, "in fork");
      expect(told).toMatchObject({ kind: "fork" });
      for (const text of ["user: one", "user: [break]", "user: three"]) expect(told.text).toContain(text);
    } finally {
      await cleanup();
    }
  });

  it("a fork made before its parent's native rollback is portable: the parent thread lost the run", async () => {
    const a = target("a");
    const { rt, events, cleanup } = await openTestRuntime({ a: a.adapter });
    try {
      const { threadId } = await rt.createThread({ providerTarget: "a" });
      const r1 = await sendAndWait(rt, threadId, "one");
      const r2 = await sendAndWait(rt, threadId, "two");
      const fork = await rt.forkThread({ threadId, afterRunId: r2.runId });
      expect(await rt.rollback({ threadId, toRunId: r1.runId })).toMatchObject({ rolledBackRunIds: [r2.runId] });

      expect((await sendAndWait(rt, fork.threadId, "in fork")).status).toBe("completed");
      expect(resolution(events, fork.threadId).resolution).toBe("portable");
      expect(forkPolicies(events, fork.threadId)).toEqual([["synthetic_fork", "threads.canForkThread"]]);
      expect(forkCalls(a)).toEqual([]);
      const told = firstContext(a, "in fork");
      expect(told.text).toContain("user: one");
      expect(told.text).toContain("user: two");
      // A fork made after the rollback no longer counts the rolled-back run, and forks natively.
      const later = await forkAndRun(rt, { threadId }, "later");
      expect(resolution(events, later.threadId).resolution).toBe("native");
      expect(turns(holding(a.backend, "later"))).toEqual([
        ["one", null],
        ["later", null],
      ]);
    } finally {
      await cleanup();
    }
  });

  it("a parent thread left divergent by a rollback the provider could not follow forks portably", async () => {
    const a = target("a", { threads: { canRollbackThread: false } });
    const work = await tempDir("tiller-fork-divergent-");
    const { rt, events, cleanup } = await openTestRuntime({ a: a.adapter }, { checkpoints: true });
    try {
      const { threadId } = await rt.createThread({ providerTarget: "a", cwd: work.dir });
      const r1 = await sendAndWait(rt, threadId, "one");
      await sendAndWait(rt, threadId, "two");
      expect(await rt.rollback({ threadId, toRunId: r1.runId })).toMatchObject({ provider: "divergent" });

      const fork = await forkAndRun(rt, { threadId });
      expect(resolution(events, fork.threadId).resolution).toBe("portable");
      expect(forkPolicies(events, fork.threadId)).toEqual([["synthetic_fork", "threads.canForkThread"]]);
      expect(forkCalls(a)).toEqual([]);
      // The provider's copy still holds the rolled-back run; the fork is told the app's history instead.
      expect(holding(a.backend, "in fork").turns.map((t) => t.userText)).toEqual(["in fork"]);
      expect(firstContext(a, "in fork").text).toContain("user: one");
      expect(firstContext(a, "in fork").text).not.toContain("user: two");
    } finally {
      await cleanup();
      await work.cleanup();
    }
  });

  it("a fork of a native fork is native; a fork of a portable fork is not (its thread was only told)", async () => {
    const a = target("a");
    const b = target("b");
    const { rt, events, cleanup } = await openTestRuntime({ a: a.adapter, b: b.adapter });
    try {
      const { threadId } = await rt.createThread({ providerTarget: "a" });
      await sendAndWait(rt, threadId, "root");

      const native = await forkAndRun(rt, { threadId }, "native child");
      expect(resolution(events, native.threadId).resolution).toBe("native");
      const grandchild = await forkAndRun(rt, { threadId: native.threadId }, "native grandchild");
      expect(resolution(events, grandchild.threadId).resolution).toBe("native");
      expect(forkCalls(a).map((f) => f.thread.threadRef)).toEqual([
        boundOf(events, threadId).nativeThreadRef,
        boundOf(events, native.threadId).nativeThreadRef,
      ]);
      expect(turns(holding(a.backend, "native grandchild"))).toEqual([
        ["root", null],
        ["native child", null],
        ["native grandchild", null],
      ]);

      const portable = await forkAndRun(rt, { threadId, providerTarget: "b" }, "portable child");
      expect(resolution(events, portable.threadId).resolution).toBe("portable");
      expect(resolution(events, portable.threadId).detail).toContain("no thread on this provider");
      const again = await forkAndRun(rt, { threadId: portable.threadId }, "portable grandchild");
      expect(resolution(events, again.threadId).resolution).toBe("portable");
      expect(forkPolicies(events, again.threadId)).toEqual([["synthetic_fork", "threads.canForkThread"]]);
      expect(forkCalls(b)).toEqual([]);
      const told = firstContext(b, "portable grandchild");
      expect(told).toMatchObject({ kind: "fork" });
      expect(told.text).toContain("user: root");
      expect(told.text).toContain("user: portable child");
    } finally {
      await cleanup();
    }
  });
});

const helper = (steps: ScriptStep[], prompt = "look around"): ScriptStep => ({
  type: "subagent",
  agent: "helper",
  prompt,
  steps,
});

/** A turn `go` whose subagent runs `steps`, then the parent replies. */
const withSubagent = (steps: ScriptStep[]) => ({
  go: [helper(steps), { type: "text", text: "parent done" }] as ScriptStep[],
});

/** Runs `go` on the thread and returns its subagent's node id. */
async function subagentOf(rt: Awaited<ReturnType<typeof openTestRuntime>>["rt"], threadId: string, nth = 0) {
  const run = await sendAndWait(rt, threadId, "go");
  return run.items.filter((i) => i.kind === "subagent")[nth]!.id;
}

const forksSubagents: CapabilityOverrides = { subagents: { canForkSubagentThread: true } };

describe("a subagent's fork: native only from its addressable child thread, on a provider that forks it", () => {
  it("native: the provider forks the child thread, addressed by its ref, into the fork's directory", async () => {
    const a = target("a", forksSubagents, withSubagent([{ type: "text", text: "found it" }]));
    const { rt, events, cleanup } = await openTestRuntime({ a: a.adapter });
    try {
      const { threadId } = await rt.createThread({ providerTarget: "a" });
      const nodeId = await subagentOf(rt, threadId);
      const fork = await forkAndRun(rt, { threadId, fromSubagentNodeId: nodeId }, "continue");
      const child = ofType(events, "subagent.thread_bound")[0]!;
      const { cwd } = rt.views.threads.get(threadId)!;
      expect(forkCalls(a)).toEqual([
        {
          sessionId: expect.any(String),
          thread: { threadRef: child.nativeThreadRef, resumeCursor: child.nativeThreadRef, cwd },
          cwd,
          afterTurnRef: null,
        },
      ]);
      expect(resolution(events, fork.threadId)).toMatchObject({ resolution: "native" });
      expect(resolution(events, fork.threadId).detail).toContain(child.providerThreadId);
      expect(forkPolicies(events, fork.threadId)).toEqual([]);
    } finally {
      await cleanup();
    }
  });

  it("not addressable (no subagent thread ids): portable, told from its items", async () => {
    const caps: CapabilityOverrides = { subagents: { canForkSubagentThread: true, exposesSubagentThreadIds: false } };
    const a = target("a", caps, withSubagent([{ type: "text", text: "found it" }]));
    const { rt, events, cleanup } = await openTestRuntime({ a: a.adapter });
    try {
      const { threadId } = await rt.createThread({ providerTarget: "a" });
      const nodeId = await subagentOf(rt, threadId);
      const fork = await forkAndRun(rt, { threadId, fromSubagentNodeId: nodeId }, "continue");
      expect(forkCalls(a)).toEqual([]);
      expect(resolution(events, fork.threadId).resolution).toBe("portable");
      expect(policies(events, "subagent_fork_synthetic").map(row)).toEqual([
        [fork.threadId, null, "subagents.exposesSubagentThreadIds", "fallback"],
      ]);
      expect(resolution(events, fork.threadId).detail).toContain("not addressable");
      const told = firstContext(a, "continue");
      expect(told).toMatchObject({ kind: "fork" });
      expect(told.text).toContain("user: look around");
      expect(told.text).toContain("found it");
      expect(told.text).not.toContain("parent done");
    } finally {
      await cleanup();
    }
  });

  it("ran on another provider: the fork's provider is told the subagent's conversation", async () => {
    const a = target("a", forksSubagents, withSubagent([{ type: "text", text: "found it" }]));
    const b = target("b", forksSubagents);
    const { rt, events, cleanup } = await openTestRuntime({ a: a.adapter, b: b.adapter });
    try {
      const { threadId } = await rt.createThread({ providerTarget: "a" });
      const nodeId = await subagentOf(rt, threadId);
      const fork = await forkAndRun(rt, { threadId, fromSubagentNodeId: nodeId, providerTarget: "b" }, "continue");
      expect([...forkCalls(a), ...forkCalls(b)]).toEqual([]);
      expect(resolution(events, fork.threadId).resolution).toBe("portable");
      expect(policies(events, "subagent_fork_synthetic").map(row)).toEqual([
        [fork.threadId, null, "subagents.canForkSubagentThread", "fallback"],
      ]);
      expect(resolution(events, fork.threadId).detail).toContain("another provider");
      const told = firstContext(b, "continue");
      expect(told.text).toContain("user: look around");
      expect(told.text).toContain("found it");
    } finally {
      await cleanup();
    }
  });

  it("a provider that forks no thread at all (threads.canForkThread false): portable", async () => {
    const caps: CapabilityOverrides = { ...forksSubagents, threads: { canForkThread: false } };
    const a = target("a", caps, withSubagent([{ type: "text", text: "found it" }]));
    const { rt, events, cleanup } = await openTestRuntime({ a: a.adapter });
    try {
      const { threadId } = await rt.createThread({ providerTarget: "a" });
      const nodeId = await subagentOf(rt, threadId);
      const fork = await forkAndRun(rt, { threadId, fromSubagentNodeId: nodeId }, "continue");
      expect(resolution(events, fork.threadId).resolution).toBe("portable");
      expect(policies(events, "subagent_fork_synthetic").map(row)).toEqual([
        [fork.threadId, null, "threads.canForkThread", "fallback"],
      ]);
      expect(policies(events, "subagent_fork_synthetic")[0]!.detail).toContain("from 1 runs");
    } finally {
      await cleanup();
    }
  });

  it("a portable subagent fork carries its whole nested work and how it ended, not its parent's reply", async () => {
    const nested = [
      { type: "text", text: "outer looks" },
      helper([{ type: "text", text: "inner finds" }], "dig deeper"),
      { type: "fail", message: "outer gave up" },
    ] as ScriptStep[];
    // A provider whose subagents' threads end with them: the fork is portable.
    const a = target("a", { subagents: { canForkSubagentThread: false } }, withSubagent(nested));
    const { rt, events, cleanup } = await openTestRuntime({ a: a.adapter });
    try {
      const { threadId } = await rt.createThread({ providerTarget: "a" });
      const nodeId = await subagentOf(rt, threadId);
      const fork = await forkAndRun(rt, { threadId, fromSubagentNodeId: nodeId }, "continue");
      expect(policies(events, "subagent_fork_synthetic").map((p) => p.threadId)).toEqual([fork.threadId]);
      const handoff = ofType(events, "handoff.created").find((h) => h.threadId === fork.threadId)!;
      expect(handoff).toMatchObject({ reason: "fork", coveredRunIds: [nodeId] });
      const told = firstContext(a, "continue").text as string;
      for (const text of ["user: look around", "outer looks", "inner finds"]) expect(told).toContain(text);
      expect(told).toContain("failed]");
      expect(told).not.toContain("parent done");
    } finally {
      await cleanup();
    }
  });
});

describe("a subagent's fork: more situations", () => {
  it("forks its child thread whole: native without threads.canForkFromTurn", async () => {
    const caps: CapabilityOverrides = { ...forksSubagents, threads: { canForkFromTurn: false } };
    const a = target("a", caps, withSubagent([{ type: "text", text: "found it" }]));
    const { rt, events, cleanup } = await openTestRuntime({ a: a.adapter });
    try {
      const { threadId } = await rt.createThread({ providerTarget: "a" });
      const nodeId = await subagentOf(rt, threadId);
      const fork = await forkAndRun(rt, { threadId, fromSubagentNodeId: nodeId }, "continue");
      expect(resolution(events, fork.threadId).resolution).toBe("native");
      expect(forkCalls(a).map((f) => f.afterTurnRef)).toEqual([null]);
      expect(turns(holding(a.backend, "continue"))).toEqual([
        ["look around", null],
        ["continue", null],
      ]);
    } finally {
      await cleanup();
    }
  });

  it("a provider that cannot fork: portable, told from the subagent's items", async () => {
    const noFork = { ...forksSubagents, threads: { canForkThread: false } };
    const a = target("a", noFork, withSubagent([{ type: "text", text: "found it" }]));
    const { rt, events, cleanup } = await openTestRuntime({ a: a.adapter });
    try {
      const { threadId } = await rt.createThread({ providerTarget: "a" });
      const nodeId = await subagentOf(rt, threadId);
      const fork = await forkAndRun(rt, { threadId, fromSubagentNodeId: nodeId }, "continue");
      expect(resolution(events, fork.threadId).resolution).toBe("portable");
      expect(policies(events, "subagent_fork_synthetic").map(row)).toEqual([
        [fork.threadId, null, "threads.canForkThread", "fallback"],
      ]);
      expect(firstContext(a, "continue").text).toContain("found it");
    } finally {
      await cleanup();
    }
  });

  it("a subagent closed before it finished is told as interrupted", async () => {
    const steps: ScriptStep[] = [
      helper([{ type: "text", text: "child says hi" }, { type: "hang" }]),
      { type: "text", text: "parent done" },
    ];
    const a = target("a", { subagents: { canForkSubagentThread: false } }, { go: steps });
    const { rt, events, cleanup } = await openTestRuntime({ a: a.adapter });
    try {
      const { threadId } = await rt.createThread({ providerTarget: "a" });
      const { runId } = await rt.sendMessage({ threadId, text: "go" });
      const started = await nextEvent(rt, "subagent.thread_bound", (e) => e.runId === runId);
      const { nodeId } = started.event;
      await rt.closeSubagent({ threadId, nodeId });
      expect((await rt.waitForRun(runId)).status).toBe("completed");
      const fork = await forkAndRun(rt, { threadId, fromSubagentNodeId: nodeId }, "continue");
      expect(policies(events, "subagent_fork_synthetic").map((p) => p.threadId)).toEqual([fork.threadId]);
      const told = firstContext(a, "continue").text as string;
      expect(told).toContain("interrupted] user: look around");
      expect(told).toContain("child says hi");
    } finally {
      await cleanup();
    }
  });
});
