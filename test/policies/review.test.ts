import { join } from "node:path";
import { describe, expect, it } from "vitest";
import { keyedScript, ScriptedBackend, TillerError } from "../../src/index.js";
import type { CapabilityOverrides, ScriptStep, TillerRuntime } from "../../src/index.js";
import type { BackendThread } from "../../src/adapters/scripted/backend.js";
import { deferred, nextEvent, ofType, openTestRuntime, override, recordCalls, rejection, said } from "../support/runtime.js";
import { crashWithApprovalPending } from "../model/models/threadPolicies.js";
import { tempDir } from "../support/files.js";
import { rejectsWith, scripted, streaming } from "../support/policies.js";

/** Regression tests for defects found in review (each was a repro script before the fix). */

const run = async (rt: TillerRuntime, threadId: string, text: string, extra: { providerTarget?: string } = {}) =>
  rt.waitForRun((await rt.sendMessage({ threadId, text, ...extra })).runId);

const turns = (thread: BackendThread) => thread.turns.map((t) => [t.userText, t.context?.kind ?? null]);
const allTurns = (backend: ScriptedBackend) => [...backend.threads.values()].map(turns);
/** The backend thread that holds a turn with this user text. */
const holding = (backend: ScriptedBackend, text: string) => [...backend.threads.values()].find((t) => t.turns.some((turn) => turn.userText === text))!;

/** A scripted adapter whose `rollbackThread` waits, once called, until released. */
function heldRollback(caps: CapabilityOverrides, backend: ScriptedBackend) {
  const adapter = scripted(caps, undefined, backend);
  const called = deferred();
  const gate = deferred();
  const wrapped = override(adapter, {
    rollbackThread: async (input) => {
      called.resolve();
      await gate.promise;
      return adapter.rollbackThread!(input);
    },
  });
  return { adapter: wrapped, called: called.promise, release: gate.resolve };
}

/** The model suite's crash child (target `main`, data in `<dir>/data`), SIGKILLed with a run awaiting approval: its thread id. */
const crashOnTargetMain = (dir: string) => crashWithApprovalPending(dir, {});

const hangAfterWrite: ScriptStep[] = [{ type: "file_change", path: "b.txt", diff: "+b", content: "b" }, { type: "text", text: "wrote" }, { type: "hang" }];

describe("reopening", () => {
  it("a crashed run whose target is no longer configured is cancelled as provider_target_missing", async () => {
    const { dir, cleanup: removeDir } = await tempDir("tiller-review-missing-");
    try {
      const crashedThreadId = await crashOnTargetMain(dir);
      const { rt, cleanup } = await openTestRuntime({ b: scripted() }, { dataDir: join(dir, "data") });
      try {
        const runs = [...rt.views.runs.values()];
        expect(runs.map((r) => [r.threadId, r.providerTarget, r.status, r.reason])).toEqual([[crashedThreadId, "main", "cancelled", "provider_target_missing"]]);
        const snapshot = await rt.readThread(crashedThreadId);
        expect(snapshot.runs.map((r) => r.status)).toEqual(["cancelled"]);
        expect(snapshot.pendingRequests).toEqual([]);
        // The runtime works: a new thread on the configured target runs.
        const { threadId } = await rt.createThread({ providerTarget: "b" });
        expect((await run(rt, threadId, "hello")).status).toBe("completed");
      } finally {
        await cleanup();
      }
    } finally {
      await removeDir();
    }
  }, 60_000);
});

describe("rollback and the provider's conversation", () => {
  it("rolling back the run that carried a handoff makes the next run on that target carry one again", async () => {
    const a = new ScriptedBackend();
    const b = new ScriptedBackend();
    const { rt, events, cleanup } = await openTestRuntime({ a: scripted({}, undefined, a), b: scripted({}, undefined, b) });
    try {
      const { threadId } = await rt.createThread({ providerTarget: "a" });
      const r1 = await run(rt, threadId, "one");
      const r2 = await run(rt, threadId, "two");
      const r3 = await run(rt, threadId, "three", { providerTarget: "b" });
      expect([r1.status, r2.status, r3.status]).toEqual(["completed", "completed", "completed"]);
      expect(allTurns(b)).toEqual([[["three", "handoff"]]]);

      const receipt = await rt.rollback({ threadId, toRunId: r2.runId });
      expect(receipt).toMatchObject({ provider: "rolled_back", rolledBackRunIds: [r3.runId] });
      expect(allTurns(b)).toEqual([[]]);

      const r4 = await run(rt, threadId, "four");
      expect([r4.status, r4.providerTarget]).toEqual(["completed", "b"]);
      const four = holding(b, "four").turns.find((t) => t.userText === "four")!;
      expect(four.context).not.toBeNull();
      expect(four.context!.kind).toBe("handoff");
      expect(four.context!.text).toContain("one");
      expect(four.context!.text).toContain("two");
      const handoffs = ofType(events, "handoff.created");
      expect(handoffs.map((h) => [h.runId, h.toTarget, h.coveredRunIds])).toEqual([
        [r3.runId, "b", [r1.runId, r2.runId]],
        [r4.runId, "b", [r1.runId, r2.runId]],
      ]);
    } finally {
      await cleanup();
    }
  });

  it("a fork made before its parent is rolled back still inherits the rolled-back run", async () => {
    const backend = new ScriptedBackend();
    const { rt, events, cleanup } = await openTestRuntime({ a: scripted({}, undefined, backend) });
    try {
      const { threadId } = await rt.createThread({ providerTarget: "a" });
      const r1 = await run(rt, threadId, "one");
      const r2 = await run(rt, threadId, "two");
      const fork = await rt.forkThread({ threadId, afterRunId: r2.runId });
      const receipt = await rt.rollback({ threadId, toRunId: r1.runId });
      expect(receipt).toMatchObject({ provider: "rolled_back", rolledBackRunIds: [r2.runId] });
      const providerThreadOf = (id: string) => backend.threads.get(ofType(events, "provider_thread.bound").find((e) => e.threadId === id)!.resumeCursor)!;
      expect(turns(providerThreadOf(threadId))).toEqual([["one", null]]);

      const f1 = await run(rt, fork.threadId, "in fork");
      expect(f1.status).toBe("completed");
      expect(turns(providerThreadOf(threadId))).toEqual([["one", null]]);
      // What the fork's provider thread knows before its first message: its own turns (a native
      // fork), or the fork context sent with it (a portable fork). Either way, runs 1 and 2.
      const forkThread = providerThreadOf(fork.threadId);
      const index = forkThread.turns.findIndex((t) => t.userText === "in fork");
      const known = [...forkThread.turns.slice(0, index).map((t) => t.userText), forkThread.turns[index]!.context?.text ?? ""].join("\n");
      expect(known).toContain("one");
      expect(known).toContain("two");
    } finally {
      await cleanup();
    }
  });

  it("closing the runtime while a rollback is in flight: after reopen the app and the provider agree", async () => {
    const backend = new ScriptedBackend();
    const held = heldRollback({}, backend);
    const first = await openTestRuntime({ a: held.adapter });
    try {
      const { threadId } = await first.rt.createThread({ providerTarget: "a" });
      const r1 = await run(first.rt, threadId, "one");
      const r2 = await run(first.rt, threadId, "two");
      const rollback = rejection(first.rt.rollback({ threadId, toRunId: r1.runId }));
      await held.called;
      const closing = first.rt.close();
      held.release();
      await closing;
      // The caller hears that the runtime closed (its receipt could not be recorded), but the rollback itself is.
      const error = await rollback;
      expect(error).toBeInstanceOf(TillerError);
      expect((error as TillerError).code).toBe("closed");
      expect(allTurns(backend)).toEqual([[["one", null]]]);

      const { rt, events, cleanup } = await openTestRuntime({ a: scripted({}, undefined, backend) }, { dataDir: first.dataDir });
      try {
        expect((await rt.readThread(threadId)).runs.map((r) => [r.runId, r.status])).toEqual([
          [r1.runId, "completed"],
          [r2.runId, "rolled_back"],
        ]);
        const r3 = await run(rt, threadId, "three");
        expect(r3.status).toBe("completed");
        // The provider thread holds exactly runs 1 and 3: nothing missing, nothing rolled back.
        expect(allTurns(backend)).toEqual([[["one", null], ["three", null]]]);
        expect(r3.attempts[0]!.providerThreadId).toBe(r1.attempts[0]!.providerThreadId);
        expect(ofType(events, "handoff.created")).toEqual([]);
      } finally {
        await cleanup();
      }
    } finally {
      held.release();
      await first.cleanup();
    }
  });

  it("a message sent while a rollback is in flight is queued and runs after it; a second rollback is refused", async () => {
    const backend = new ScriptedBackend();
    const held = heldRollback({}, backend);
    const { rt, cleanup } = await openTestRuntime({ a: held.adapter });
    try {
      const { threadId } = await rt.createThread({ providerTarget: "a" });
      const r1 = await run(rt, threadId, "one");
      const r2 = await run(rt, threadId, "two");
      const rollback = rt.rollback({ threadId, toRunId: r1.runId });
      await held.called;
      const sent = await rt.sendMessage({ threadId, text: "three" });
      expect(sent).toMatchObject({ disposition: "queued", queuePosition: 1 });
      await rejectsWith(rt.rollback({ threadId, toRunId: r1.runId }), "conflict");
      expect(allTurns(backend)).toEqual([[["one", null], ["two", null]]]);
      held.release();
      expect(await rollback).toMatchObject({ provider: "rolled_back", rolledBackRunIds: [r2.runId] });
      const r3 = await rt.waitForRun(sent.runId);
      expect(r3.status).toBe("completed");
      expect(allTurns(backend)).toEqual([[["one", null], ["three", null]]]);
      expect((await rt.readThread(threadId)).runs.map((r) => r.status)).toEqual(["completed", "rolled_back", "completed"]);
    } finally {
      held.release();
      await cleanup();
    }
  });

  it("a rollback is refused while another thread with the same directory has an active run", async () => {
    const work = await tempDir("tiller-review-shared-");
    const script = keyedScript({ "[hang]": [{ type: "text", text: "working" }, { type: "hang" }] });
    const { rt, events, cleanup } = await openTestRuntime({ s: scripted({}, script) }, { checkpoints: true });
    try {
      const { threadId } = await rt.createThread({ providerTarget: "s", cwd: work.dir });
      const r1 = await run(rt, threadId, "one");
      await run(rt, threadId, "two");
      const other = await rt.createThread({ providerTarget: "s", cwd: work.dir });
      const { runId } = await rt.sendMessage({ threadId: other.threadId, text: "[hang]" });
      await streaming(rt, runId);

      const affordance = rt.affordances(threadId).rollback.find((r) => r.toRunId === r1.runId)!;
      expect(affordance.available).toBe(false);
      expect(affordance.reason).toContain(other.threadId);
      const error = await rejectsWith(rt.rollback({ threadId, toRunId: r1.runId }), "conflict");
      expect(error.message).toContain(other.threadId);
      expect(ofType(events, "rollback.applied")).toEqual([]);
      expect((await rt.readThread(threadId)).runs.map((r) => r.status)).toEqual(["completed", "completed"]);

      // Once the other thread is idle, the same rollback goes through.
      await rt.interrupt({ runId });
      expect((await rt.waitForRun(runId)).status).toBe("interrupted");
      expect(rt.affordances(threadId).rollback.find((r) => r.toRunId === r1.runId)).toMatchObject({ available: true });
      expect((await rt.rollback({ threadId, toRunId: r1.runId })).toRunId).toBe(r1.runId);
    } finally {
      await cleanup();
      await work.cleanup();
    }
  });
});

describe("forks", () => {
  it("a provider that accepts no explicit context but forks natively: the fork's first message goes through natively", async () => {
    const caps: CapabilityOverrides = { context: { acceptsSystemContext: false, acceptsDeveloperContext: false, acceptsSyntheticUserContext: false } };
    const backend = new ScriptedBackend();
    const { rt, events, cleanup } = await openTestRuntime({ a: scripted(caps, undefined, backend) });
    try {
      const { threadId } = await rt.createThread({ providerTarget: "a" });
      const r1 = await run(rt, threadId, "one");
      expect(rt.affordances(threadId).fork).toEqual([{ afterRunId: r1.runId, source: "native", reason: null }]);
      const fork = await rt.forkThread({ threadId });
      const f1 = await run(rt, fork.threadId, "in fork");
      expect(f1.status).toBe("completed");
      expect(ofType(events, "fork.resolved").map((e) => [e.threadId, e.resolution])).toEqual([[fork.threadId, "native"]]);
      expect(ofType(events, "handoff.created")).toEqual([]);
      expect(turns(holding(backend, "in fork"))).toEqual([["one", null], ["in fork", null]]);
      expect(turns(holding(backend, "one"))).toEqual([["one", null]]);
    } finally {
      await cleanup();
    }
  });

  it("a fork after run 1 while run 2 is still running holds run 1 only", async () => {
    const backend = new ScriptedBackend();
    const script = keyedScript({ "[hang]": [{ type: "text", text: "working" }, { type: "hang" }] });
    const { rt, cleanup } = await openTestRuntime({ a: scripted({}, script, backend) });
    try {
      const { threadId } = await rt.createThread({ providerTarget: "a" });
      const r1 = await run(rt, threadId, "one");
      const { runId } = await rt.sendMessage({ threadId, text: "[hang] two" });
      await streaming(rt, runId);
      const fork = await rt.forkThread({ threadId, afterRunId: r1.runId });
      const f1 = await run(rt, fork.threadId, "in fork");
      expect(f1.status).toBe("completed");
      const forkThread = holding(backend, "in fork");
      expect(forkThread.turns.map((t) => t.userText)).toEqual(["one", "in fork"]);
      expect(forkThread.turns.some((t) => t.context?.text?.includes("[hang] two"))).toBe(false);
      expect(rt.views.runs.get(runId)!.status).toBe("running");
    } finally {
      await cleanup();
    }
  });
});

describe("checkpoints", () => {
  it("a run cancelled by close() still gets its final checkpoint", async () => {
    const work = await tempDir("tiller-review-ckclose-");
    const backend = new ScriptedBackend();
    const providers = () => ({ a: scripted({}, keyedScript({ "[hang]": hangAfterWrite }), backend) });
    const first = await openTestRuntime(providers(), { checkpoints: true });
    try {
      const { threadId } = await first.rt.createThread({ providerTarget: "a", cwd: work.dir });
      const r1 = await run(first.rt, threadId, "one");
      const { runId } = await first.rt.sendMessage({ threadId, text: "[hang] two" });
      // The text follows the file change in the script: once it streams, b.txt is written.
      await nextEvent(first.rt, "node.delta", (e) => e.runId === runId && e.delta.includes("wrote"));
      await first.rt.close();

      const { rt, cleanup } = await openTestRuntime(providers(), { dataDir: first.dataDir, checkpoints: true });
      try {
        expect((await rt.readThread(threadId)).runs.map((r) => [r.runId, r.status, r.reason])).toEqual([
          [r1.runId, "completed", null],
          [runId, "cancelled", "runtime_closed"],
        ]);
        const finals = rt.views.checkpointsOf(threadId).filter((c) => c.runId === runId && c.scope === "root_run" && c.phase === "final");
        expect(finals.map((c) => c.status)).toEqual(["ready"]);
        expect(finals[0]!.files.map((f) => f.path)).toEqual(["b.txt"]);
        expect(rt.views.finalCheckpoint(runId)?.checkpointId).toBe(finals[0]!.checkpointId);
      } finally {
        await cleanup();
      }
    } finally {
      await first.cleanup();
      await work.cleanup();
    }
  });

  it("run 2's baseline has run 1's final checkpoint as parent and does not repeat run 1's change", async () => {
    const work = await tempDir("tiller-review-ckparent-");
    const script = keyedScript({ "[w]": [{ type: "file_change", path: "b.txt", diff: "+b", content: "b" }, { type: "text", text: "w" }] });
    const { rt, cleanup } = await openTestRuntime({ a: scripted({}, script) }, { checkpoints: true });
    try {
      const { threadId } = await rt.createThread({ providerTarget: "a", cwd: work.dir });
      const s1 = await rt.sendMessage({ threadId, text: "[w] one" });
      const s2 = await rt.sendMessage({ threadId, text: "two", mode: "queue" });
      expect((await rt.waitForRun(s2.runId)).status).toBe("completed");
      expect((await rt.waitForRun(s1.runId)).status).toBe("completed");
      await rt.readThread(threadId);
      const of = (runId: string, phase: string) => rt.views.checkpointsOf(threadId).find((c) => c.runId === runId && c.phase === phase && c.scope === "root_run")!;
      const [b1, f1, b2, f2] = [of(s1.runId, "baseline"), of(s1.runId, "final"), of(s2.runId, "baseline"), of(s2.runId, "final")];
      expect(f1.parentCheckpointId).toBe(b1.checkpointId);
      expect(b2.parentCheckpointId).toBe(f1.checkpointId);
      expect(f2.parentCheckpointId).toBe(b2.checkpointId);
      expect(f1.files.map((f) => f.path)).toEqual(["b.txt"]);
      expect(b2.files).toEqual([]);
      expect(f2.files).toEqual([]);
    } finally {
      await cleanup();
      await work.cleanup();
    }
  });
});

describe("model changes", () => {
  it.each([
    ["starting", false],
    ["starting", true],
    ["streaming", false],
  ] as const)("a model change on a queued message leaves the active run alone (active run %s, in-session switch: %s)", async (phase, inSession) => {
    const backend = new ScriptedBackend();
    const script = keyedScript({ "[gate]": [{ type: "text", text: "working" }, { type: "gate", name: "go" }, { type: "text", text: " done" }] });
    const base = scripted({ sessions: { supportsModelSwitchInSession: inSession } }, script, backend);
    // The first session start is held, so a "starting" run is caught between its session and its turn.
    const starting = deferred();
    const startGate = deferred();
    const held = override(base, {
      startSession: async (input) => {
        starting.resolve();
        await startGate.promise;
        return base.startSession(input);
      },
    });
    const { adapter, calls } = recordCalls(held);
    const { rt, events, cleanup } = await openTestRuntime({ a: adapter });
    try {
      const { threadId } = await rt.createThread({ providerTarget: "a", model: "m1" });
      const s1 = await rt.sendMessage({ threadId, text: "[gate] one" });
      if (phase === "starting") {
        await starting.promise;
      } else {
        startGate.resolve();
        await streaming(rt, s1.runId);
      }
      const s2 = await rt.sendMessage({ threadId, text: "two", mode: "queue", model: "m2" });
      expect(s2.disposition).toBe("queued");
      expect((await rt.readThread(threadId)).thread.model).toBe("m2");
      expect(["starting", "running"]).toContain(rt.views.runs.get(s1.runId)!.status);
      startGate.resolve();
      backend.openGate("go");

      const r1 = await rt.waitForRun(s1.runId);
      const r2 = await rt.waitForRun(s2.runId);
      expect([r1.status, r2.status]).toEqual(["completed", "completed"]);
      expect(said(r1.items)).toBe("working done");
      expect([r1.model, r2.model]).toEqual(["m1", "m2"]);
      const sessions = ofType(events, "session.started").map((e) => e.sessionId);
      expect(calls.filter((c) => c.method === "startSession").map((c) => c.input.model)).toEqual(inSession ? ["m1"] : ["m1", "m2"]);
      expect(sessions).toHaveLength(inSession ? 1 : 2);
      // The active run was sent on its own session with its own model; the queued one with the new model.
      expect(calls.filter((c) => c.method === "sendRun").map((c) => [c.input.text, c.input.model, c.input.sessionId])).toEqual([
        ["[gate] one", "m1", sessions[0]],
        ["two", "m2", inSession ? sessions[0] : sessions[1]],
      ]);
      expect(allTurns(backend)).toEqual([[["[gate] one", null], ["two", null]]]);
    } finally {
      startGate.resolve();
      backend.openGate("go");
      await cleanup();
    }
  });
});
