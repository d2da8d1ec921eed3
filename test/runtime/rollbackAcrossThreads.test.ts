import { access, readFile } from "node:fs/promises";
import { join } from "node:path";
import { describe, expect, it } from "vitest";
import { keyedScript, ScriptedBackend } from "../../src/index.js";
import type { ProviderAdapter } from "../../src/adapters/contract.js";
import type { BackendTurn } from "../../src/adapters/scripted/host/backend.js";
import { tempDir } from "../support/files.js";
import { allTurns, policies, rejectsWith, row, scripted } from "../support/policies.js";
import { nextEvent, ofType, openTestRuntime, override, sendAndWait } from "../support/runtime.js";
import { isolateHomeForFile } from "../checkpoints/isolated.js";
import { fileTurns } from "../support/rollbacks.js";

/**
 * A rollback whose later runs span two provider threads (issue 14). A provider's rollback cuts the
 * conversation of one provider thread; the runs that ran on another are out of its reach. So, as
 * the capability seed and the domain model say of a rollback the provider cannot follow: the files
 * are restored from the checkpoint, every provider thread that holds a rolled-back run is marked
 * divergent (the named `rollback_divergent` degradation), and each is rebuilt from the app's
 * history on its next run; without a checkpoint there is nothing to restore, and the rollback is a
 * typed refusal that changes nothing. The two provider threads come about in the two ways the
 * runtime has: a switch to another target, and a provider thread the provider reported broken
 * (replaced on the same target). Every provider here could roll its own threads back.
 */

isolateHomeForFile();

const script = keyedScript({
  ...fileTurns,
  // The provider reports its thread broken: the next run gets a new provider thread on the same target.
  "[broken]": [
    { type: "file_change", path: "f.txt", diff: "+two", content: "two\n" },
    { type: "fail", message: "conversation lost", broken: true },
  ],
});

/** A scripted target whose native rollbacks are counted. */
function target(backend: ScriptedBackend): { adapter: ProviderAdapter; rollbacks: () => number } {
  const adapter = scripted({}, script, backend);
  let rollbacks = 0;
  const counted = override(adapter, {
    rollbackThread: async (input) => {
      rollbacks += 1;
      return adapter.rollbackThread!(input);
    },
  });
  return { adapter: counted, rollbacks: () => rollbacks };
}

/** Targets `a` and `b` (each on its own backend) and a thread on `a` in a temporary directory. */
async function twoTargets(checkpoints: boolean) {
  const backends = { a: new ScriptedBackend(), b: new ScriptedBackend() };
  const a = target(backends.a);
  const b = target(backends.b);
  const work = await tempDir("tiller-rollback-threads-");
  const t = await openTestRuntime({ a: a.adapter, b: b.adapter }, { checkpoints });
  const { threadId } = await t.rt.createThread({ providerTarget: "a", cwd: work.dir });
  const cleanup = async () => {
    await t.cleanup();
    await work.cleanup();
  };
  return { ...t, backends, rollbacks: () => a.rollbacks() + b.rollbacks(), work, threadId, cleanup };
}

const providerThreadOf = (run: { attempts: Array<{ providerThreadId: string | null }> }) =>
  run.attempts[0]!.providerThreadId!;

/** The one turn with this user text, on any of the backends, with how many turns its provider thread holds. */
function turnOf(text: string, ...backends: ScriptedBackend[]): { turn: BackendTurn; threadTurns: number } {
  const found = backends
    .flatMap((b) => [...b.threads.values()])
    .flatMap((thread) =>
      thread.turns.filter((t) => t.userText === text).map((turn) => ({ turn, threadTurns: thread.turns.length })),
    );
  expect(found).toHaveLength(1);
  return found[0]!;
}

/** A rebuilt conversation tells the kept run and leaves the rolled-back ones out. */
function expectRebuiltWithout(turn: BackendTurn, rolledBack: string[]): void {
  expect(turn.context?.kind).toBe("rebuild");
  expect(turn.context!.text).toContain("user: [one]");
  for (const text of rolledBack) expect(turn.context!.text).not.toContain(`user: ${text}`);
}

const exists = (path: string) =>
  access(path).then(
    () => true,
    () => false,
  );

describe("a rollback whose later runs span two provider threads", () => {
  it.each([
    ["a then b: the latest later turn is on another target", "a", "b"],
    ["b then a: the latest later turn is back on the thread that holds the kept run", "b", "a"],
  ])(
    "%s: files restored, no provider asked to roll back, both provider threads divergent and rebuilt",
    async (_, second, third) => {
      const s = await twoTargets(true);
      try {
        const { rt, events, threadId, backends } = s;
        const r1 = await sendAndWait(rt, threadId, "[one]");
        const r2 = await sendAndWait(rt, threadId, "[two]", { providerTarget: second });
        const r3 = await sendAndWait(rt, threadId, "[three]", { providerTarget: third });
        expect([r1, r2, r3].map((r) => [r.status, r.providerTarget])).toEqual([
          ["completed", "a"],
          ["completed", second],
          ["completed", third],
        ]);
        const spanned = new Set([providerThreadOf(r2), providerThreadOf(r3)]);
        expect(spanned.size).toBe(2);
        const conversations = [allTurns(backends.a), allTurns(backends.b)];

        const receipt = await rt.rollback({ threadId, toRunId: r1.runId });

        expect(receipt).toMatchObject({
          toRunId: r1.runId,
          rolledBackRunIds: [r2.runId, r3.runId],
          provider: "divergent",
          filesRestored: true,
        });
        expect(await readFile(join(s.work.dir, "f.txt"), "utf8")).toBe("one\n");
        expect(await exists(join(s.work.dir, "g.txt"))).toBe(false);
        expect([r2, r3].map((r) => rt.views.runs.get(r.runId)!.status)).toEqual(["rolled_back", "rolled_back"]);
        // One provider's rollback cannot undo a turn on another provider thread: neither is trusted with it.
        expect(s.rollbacks()).toBe(0);
        expect([allTurns(backends.a), allTurns(backends.b)]).toEqual(conversations);
        const divergent = policies(events, "rollback_divergent");
        expect(divergent.map((p) => [p.threadId, p.runId, p.outcome])).toEqual([[threadId, r1.runId, "fallback"]]);
        expect(divergent[0]!.detail).toContain("another provider thread");
        // Both providers can roll back: no capability is missing, and the record names none.
        expect(divergent[0]!.capability).toBeNull();
        const [applied] = ofType(events, "rollback.applied");
        expect(applied).toMatchObject({ provider: "divergent", providerThreadId: null });
        expect(new Set(applied!.divergentProviderThreadIds)).toEqual(spanned);

        // Each target's next run rebuilds its conversation from the app's history: run 1 in it, runs 2 and 3 not.
        const r4 = await sendAndWait(rt, threadId, "four");
        const other = third === "a" ? "b" : "a";
        const r5 = await sendAndWait(rt, threadId, "five", { providerTarget: other });
        expect([r4, r5].map((r) => [r.status, r.providerTarget])).toEqual([
          ["completed", third],
          ["completed", other],
        ]);
        for (const text of ["four", "five"]) {
          const { turn, threadTurns } = turnOf(text, backends.a, backends.b);
          expect(threadTurns).toBe(1);
          expectRebuiltWithout(turn, ["[two]", "[three]"]);
        }
        const rebuilt = ofType(events, "provider_thread.bound").filter((b) => b.via === "realigned");
        expect(rebuilt.map((b) => b.providerTarget)).toEqual([third, other]);
        expect(rebuilt.filter((b) => spanned.has(b.providerThreadId))).toEqual([]);
        expect(policies(events, "divergent_thread_rebuilt")).toHaveLength(2);
      } finally {
        await s.cleanup();
      }
    },
  );

  it(
    "on one target whose provider thread was replaced in between: divergent the same way; " +
      "once rebuilt, a rollback whose later runs all sit on the new thread is the provider's again",
    async () => {
      const backend = new ScriptedBackend();
      const a = target(backend);
      const work = await tempDir("tiller-rollback-threads-");
      const { rt, events, cleanup } = await openTestRuntime({ a: a.adapter }, { checkpoints: true });
      try {
        const { threadId } = await rt.createThread({ providerTarget: "a", cwd: work.dir });
        const r1 = await sendAndWait(rt, threadId, "[one]");
        const r2 = await sendAndWait(rt, threadId, "[broken]");
        const r3 = await sendAndWait(rt, threadId, "[three]");
        expect([r1.status, r2.status, r3.status]).toEqual(["completed", "failed", "completed"]);
        expect(providerThreadOf(r2)).toBe(providerThreadOf(r1));
        expect(providerThreadOf(r3)).not.toBe(providerThreadOf(r2));
        expect(ofType(events, "provider_thread.bound").map((b) => b.via)).toEqual(["created", "replaced"]);

        const receipt = await rt.rollback({ threadId, toRunId: r1.runId });
        expect(receipt).toMatchObject({ rolledBackRunIds: [r2.runId, r3.runId], provider: "divergent" });
        expect(receipt.filesRestored).toBe(true);
        expect(await readFile(join(work.dir, "f.txt"), "utf8")).toBe("one\n");
        expect(await exists(join(work.dir, "g.txt"))).toBe(false);
        expect(a.rollbacks()).toBe(0);
        expect(policies(events, "rollback_divergent").map((p) => [p.runId, p.outcome])).toEqual([
          [r1.runId, "fallback"],
        ]);
        expect(new Set(ofType(events, "rollback.applied")[0]!.divergentProviderThreadIds)).toEqual(
          new Set([providerThreadOf(r2), providerThreadOf(r3)]),
        );

        const r4 = await sendAndWait(rt, threadId, "four");
        const four = turnOf("four", backend);
        expect(four.threadTurns).toBe(1);
        expectRebuiltWithout(four.turn, ["[broken]", "[three]"]);
        expect(providerThreadOf(r4)).not.toBe(providerThreadOf(r3));

        // Run 4 alone is later than run 1 now, on one provider thread: the provider rolls it back itself.
        const again = await rt.rollback({ threadId, toRunId: r1.runId });
        expect(again).toMatchObject({ rolledBackRunIds: [r4.runId], provider: "rolled_back", filesRestored: true });
        expect(a.rollbacks()).toBe(1);
        expect(allTurns(backend).flat()).not.toContainEqual(["four", "rebuild"]);
        // The replaced and the first provider threads are left as they were: the app no longer resumes them.
        expect(turnOf("[one]", backend).threadTurns).toBe(2);
        expect(policies(events, "rollback_divergent")).toHaveLength(1);
      } finally {
        await cleanup();
        await work.cleanup();
      }
    },
  );

  it("without a checkpoint to restore: refused, typed and named, and nothing is rolled back", async () => {
    const s = await twoTargets(false);
    try {
      const { rt, events, threadId, backends } = s;
      const r1 = await sendAndWait(rt, threadId, "[one]");
      const r2 = await sendAndWait(rt, threadId, "[two]");
      const r3 = await sendAndWait(rt, threadId, "[three]", { providerTarget: "b" });
      const conversations = [allTurns(backends.a), allTurns(backends.b)];

      const error = await rejectsWith(rt.rollback({ threadId, toRunId: r1.runId }), "capability_unsupported");
      expect(error.details).toMatchObject({ capability: "checkpointing.appCanCheckpointFilesystem" });
      const refused = await nextEvent(rt, "policy.applied", (p) => p.policy === "rollback_unsupported");
      expect(row(refused.event)).toEqual([threadId, r1.runId, "checkpointing.appCanCheckpointFilesystem", "refused"]);

      expect(s.rollbacks()).toBe(0);
      expect([allTurns(backends.a), allTurns(backends.b)]).toEqual(conversations);
      expect([r2, r3].map((r) => rt.views.runs.get(r.runId)!.status)).toEqual(["completed", "completed"]);
      expect(ofType(events, "rollback.started")).toEqual([]);
      expect(ofType(events, "rollback.applied")).toEqual([]);
      expect(await readFile(join(s.work.dir, "g.txt"), "utf8")).toBe("three\n");
    } finally {
      await s.cleanup();
    }
  });
});
