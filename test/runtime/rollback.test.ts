import { describe, expect, it } from "vitest";
import { keyedScript, ScriptedBackend, TillerError } from "../../src/index.js";
import { tempDir } from "../support/files.js";
import { allTurns, holding, rejectsWith, scripted, streaming, turns } from "../support/policies.js";
import { ofType, openTestRuntime, rejection, sendAndWait } from "../support/runtime.js";
import { heldRollback } from "../support/rollbacks.js";

/**
 * Rollback and the provider's conversation: what the provider thread holds after a rollback
 * (handoffs carried again, forks keeping what they inherited), a rollback in flight when the
 * runtime closes or a message arrives, and a rollback refused while another thread works in
 * the same directory. Rollback of the files themselves: test/policies/rollback.test.ts.
 */

describe("rollback and the provider's conversation", () => {
  it(
    "rolling back the run that carried a handoff makes " + "the next run on that target carry one again (review)",
    async () => {
      const a = new ScriptedBackend();
      const b = new ScriptedBackend();
      const { rt, events, cleanup } = await openTestRuntime({
        a: scripted({}, undefined, a),
        b: scripted({}, undefined, b),
      });
      try {
        const { threadId } = await rt.createThread({ providerTarget: "a" });
        const r1 = await sendAndWait(rt, threadId, "one");
        const r2 = await sendAndWait(rt, threadId, "two");
        const r3 = await sendAndWait(rt, threadId, "three", { providerTarget: "b" });
        expect([r1.status, r2.status, r3.status]).toEqual(["completed", "completed", "completed"]);
        expect(allTurns(b)).toEqual([[["three", "handoff"]]]);

        const receipt = await rt.rollback({ threadId, toRunId: r2.runId });
        expect(receipt).toMatchObject({ provider: "rolled_back", rolledBackRunIds: [r3.runId] });
        expect(allTurns(b)).toEqual([[]]);

        const r4 = await sendAndWait(rt, threadId, "four");
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
    },
  );

  it("a fork made before its parent is rolled back still inherits the rolled-back run (review)", async () => {
    const backend = new ScriptedBackend();
    const { rt, events, cleanup } = await openTestRuntime({ a: scripted({}, undefined, backend) });
    try {
      const { threadId } = await rt.createThread({ providerTarget: "a" });
      const r1 = await sendAndWait(rt, threadId, "one");
      const r2 = await sendAndWait(rt, threadId, "two");
      const fork = await rt.forkThread({ threadId, afterRunId: r2.runId });
      const receipt = await rt.rollback({ threadId, toRunId: r1.runId });
      expect(receipt).toMatchObject({ provider: "rolled_back", rolledBackRunIds: [r2.runId] });
      const providerThreadOf = (id: string) =>
        backend.threads.get(ofType(events, "provider_thread.bound").find((e) => e.threadId === id)!.resumeCursor)!;
      expect(turns(providerThreadOf(threadId))).toEqual([["one", null]]);

      const f1 = await sendAndWait(rt, fork.threadId, "in fork");
      expect(f1.status).toBe("completed");
      expect(turns(providerThreadOf(threadId))).toEqual([["one", null]]);
      // What the fork's provider thread knows before its first message: its own turns (a native
      // fork), or the fork context sent with it (a portable fork). Either way, runs 1 and 2.
      const forkThread = providerThreadOf(fork.threadId);
      const index = forkThread.turns.findIndex((t) => t.userText === "in fork");
      const known = [
        ...forkThread.turns.slice(0, index).map((t) => t.userText),
        forkThread.turns[index]!.context?.text ?? "",
      ].join("\n");
      expect(known).toContain("one");
      expect(known).toContain("two");
    } finally {
      await cleanup();
    }
  });

  it(
    "closing the runtime while a rollback is in flight: " + "after reopen the app and the provider agree (review)",
    async () => {
      const backend = new ScriptedBackend();
      const held = heldRollback(backend);
      const first = await openTestRuntime({ a: held.adapter });
      try {
        const { threadId } = await first.rt.createThread({ providerTarget: "a" });
        const r1 = await sendAndWait(first.rt, threadId, "one");
        const r2 = await sendAndWait(first.rt, threadId, "two");
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

        const { rt, events, cleanup } = await openTestRuntime(
          { a: scripted({}, undefined, backend) },
          { dataDir: first.dataDir },
        );
        try {
          expect((await rt.readThread(threadId)).runs.map((r) => [r.runId, r.status])).toEqual([
            [r1.runId, "completed"],
            [r2.runId, "rolled_back"],
          ]);
          const r3 = await sendAndWait(rt, threadId, "three");
          expect(r3.status).toBe("completed");
          // The provider thread holds exactly runs 1 and 3: nothing missing, nothing rolled back.
          expect(allTurns(backend)).toEqual([
            [
              ["one", null],
              ["three", null],
            ],
          ]);
          expect(r3.attempts[0]!.providerThreadId).toBe(r1.attempts[0]!.providerThreadId);
          expect(ofType(events, "handoff.created")).toEqual([]);
        } finally {
          await cleanup();
        }
      } finally {
        held.release();
        await first.cleanup();
      }
    },
  );

  it(
    "a message sent while a rollback is in flight is queued and runs after it; " +
      "a second rollback is refused (review)",
    async () => {
      const backend = new ScriptedBackend();
      const held = heldRollback(backend);
      const { rt, cleanup } = await openTestRuntime({ a: held.adapter });
      try {
        const { threadId } = await rt.createThread({ providerTarget: "a" });
        const r1 = await sendAndWait(rt, threadId, "one");
        const r2 = await sendAndWait(rt, threadId, "two");
        const rollback = rt.rollback({ threadId, toRunId: r1.runId });
        await held.called;
        const sent = await rt.sendMessage({ threadId, text: "three" });
        expect(sent).toMatchObject({ disposition: "queued", queuePosition: 1 });
        await rejectsWith(rt.rollback({ threadId, toRunId: r1.runId }), "conflict");
        expect(allTurns(backend)).toEqual([
          [
            ["one", null],
            ["two", null],
          ],
        ]);
        held.release();
        expect(await rollback).toMatchObject({ provider: "rolled_back", rolledBackRunIds: [r2.runId] });
        const r3 = await rt.waitForRun(sent.runId);
        expect(r3.status).toBe("completed");
        expect(allTurns(backend)).toEqual([
          [
            ["one", null],
            ["three", null],
          ],
        ]);
        expect((await rt.readThread(threadId)).runs.map((r) => r.status)).toEqual([
          "completed",
          "rolled_back",
          "completed",
        ]);
      } finally {
        held.release();
        await cleanup();
      }
    },
  );

  it("a rollback is refused while another thread with the same directory has an active run (review)", async () => {
    const work = await tempDir("tiller-review-shared-");
    const script = keyedScript({ "[hang]": [{ type: "text", text: "working" }, { type: "hang" }] });
    const { rt, events, cleanup } = await openTestRuntime({ s: scripted({}, script) }, { checkpoints: true });
    try {
      const { threadId } = await rt.createThread({ providerTarget: "s", cwd: work.dir });
      const r1 = await sendAndWait(rt, threadId, "one");
      await sendAndWait(rt, threadId, "two");
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
