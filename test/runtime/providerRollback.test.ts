import { readFile } from "node:fs/promises";
import { join } from "node:path";
import { describe, expect, it } from "vitest";
import { keyedScript, ScriptedBackend } from "../../src/index.js";
import type { CapabilityOverrides, ProviderThreadSnapshot } from "../../src/index.js";
import type { ProviderAdapter } from "../../src/adapters/contract.js";
import { tempDir } from "../support/files.js";
import { allTurns, policies, row, scripted } from "../support/policies.js";
import { ofType, openTestRuntime, override, sendAndWait } from "../support/runtime.js";
import { isolateHomeForFile } from "../checkpoints/isolated.js";
import { fileTurns } from "../support/rollbacks.js";

/**
 * What the checkpointing fields of the capability record decide about a provider rollback:
 * whether the provider is asked at all (`providerCanRollbackConversation`, with
 * `threads.canRollbackThread`), what the cut is checked against (`providerRollbackReturnsSnapshot`),
 * and the order of a rollback: the provider's conversation before the files.
 */

isolateHomeForFile();

const script = keyedScript(fileTurns);

/** The adapter's rollback and snapshot reads, counted, with the rollback's answer replaced when asked. */
function watched(
  caps: CapabilityOverrides,
  backend: ScriptedBackend,
  answer?: (real: ProviderThreadSnapshot, before: ProviderThreadSnapshot) => unknown,
  onRollback?: () => Promise<void>,
) {
  const adapter = scripted(caps, script, backend);
  const counts = { rollbacks: 0, reads: 0 };
  const methods: Partial<ProviderAdapter> = {};
  if (adapter.rollbackThread)
    methods.rollbackThread = async (input) => {
      counts.rollbacks += 1;
      await onRollback?.();
      // Read through a full-featured adapter on the same backend, whatever this one's record lets the runtime read.
      const before = structuredClone(await scripted({}, script, backend).readThreadSnapshot!(input));
      const result = (await adapter.rollbackThread!(input)) as { snapshot: ProviderThreadSnapshot };
      return (answer ? answer(result.snapshot, before) : result) as never;
    };
  if (adapter.readThreadSnapshot)
    methods.readThreadSnapshot = async (input) => {
      counts.reads += 1;
      return adapter.readThreadSnapshot!(input);
    };
  return { adapter: override(adapter, methods), counts };
}

/** Three runs on a thread in a temporary directory with checkpoints, then a rollback to the first. */
async function rollbackAfterThreeRuns(adapter: ProviderAdapter, backend: ScriptedBackend) {
  const work = await tempDir("tiller-provider-rollback-");
  const t = await openTestRuntime({ s: adapter }, { checkpoints: true });
  const { threadId } = await t.rt.createThread({ providerTarget: "s", cwd: work.dir });
  const r1 = await sendAndWait(t.rt, threadId, "[one]");
  const r2 = await sendAndWait(t.rt, threadId, "[two]");
  const r3 = await sendAndWait(t.rt, threadId, "[three]");
  expect([r1, r2, r3].map((r) => r.status)).toEqual(["completed", "completed", "completed"]);
  expect(allTurns(backend)).toEqual([
    [
      ["[one]", null],
      ["[two]", null],
      ["[three]", null],
    ],
  ]);
  const receipt = await t.rt.rollback({ threadId, toRunId: r1.runId });
  expect(await readFile(join(work.dir, "f.txt"), "utf8")).toBe("one\n");
  const cleanup = async () => {
    await t.cleanup();
    await work.cleanup();
  };
  return { ...t, cleanup, work, threadId, r1, r2, r3, receipt };
}

const divergence = (s: Awaited<ReturnType<typeof rollbackAfterThreeRuns>>) =>
  policies(s.events, "rollback_divergent").map((p) => [...row(p), p.detail]);

describe("checkpointing.providerCanRollbackConversation", () => {
  it.each([true, false])("=%s: the provider is asked to roll back only when it can", async (can) => {
    const backend = new ScriptedBackend();
    const { adapter, counts } = watched({ checkpointing: { providerCanRollbackConversation: can } }, backend);
    const s = await rollbackAfterThreeRuns(adapter, backend);
    try {
      const { receipt, threadId, r1, r2, r3 } = s;
      expect(receipt).toMatchObject({ rolledBackRunIds: [r2.runId, r3.runId], filesRestored: true });
      if (can) {
        expect(receipt.provider).toBe("rolled_back");
        expect(counts.rollbacks).toBe(1);
        expect(allTurns(backend)).toEqual([[["[one]", null]]]);
        expect(divergence(s)).toEqual([]);
        return;
      }
      // threads.canRollbackThread alone is not enough: the provider keeps its turns, its thread is divergent.
      expect(receipt.provider).toBe("divergent");
      expect(counts.rollbacks).toBe(0);
      expect(allTurns(backend)[0]).toHaveLength(3);
      expect(divergence(s)).toEqual([
        [threadId, r1.runId, "checkpointing.providerCanRollbackConversation", "fallback", expect.any(String)],
      ]);
      expect(ofType(s.events, "rollback.applied").map((e) => e.divergentProviderThreadIds)).toEqual([
        [r1.attempts[0]!.providerThreadId],
      ]);
      // The next run rebuilds the conversation on a fresh provider thread, without the rolled-back runs.
      const r4 = await sendAndWait(s.rt, threadId, "four");
      expect(r4.status).toBe("completed");
      expect(ofType(s.events, "provider_thread.bound").map((b) => b.via)).toEqual(["created", "realigned"]);
      expect(policies(s.events, "divergent_thread_rebuilt")).toHaveLength(1);
    } finally {
      await s.cleanup();
    }
  });
});

describe("checkpointing.providerRollbackReturnsSnapshot", () => {
  it.each([true, false])(
    "=%s: a rollback that returns no snapshot is a provider error only where the record promises one",
    async (returns) => {
      const backend = new ScriptedBackend();
      const caps = { checkpointing: { providerRollbackReturnsSnapshot: returns } };
      const { adapter } = watched(caps, backend, () => undefined);
      const s = await rollbackAfterThreeRuns(adapter, backend);
      try {
        // The provider did cut its conversation either way; only the record says what to expect of its answer.
        expect(allTurns(backend)).toEqual([[["[one]", null]]]);
        if (returns) {
          expect(s.receipt.provider).toBe("divergent");
          expect(divergence(s)).toEqual([
            [s.threadId, s.r1.runId, "threads.canRollbackThread", "fallback", expect.stringContaining("returned none")],
          ]);
        } else {
          expect(s.receipt.provider).toBe("rolled_back");
          expect(divergence(s)).toEqual([]);
        }
      } finally {
        await s.cleanup();
      }
    },
  );

  it.each([true, false])(
    "=%s (snapshot reads on): the cut is counted on the returned snapshot, or on a read after it",
    async (returns) => {
      const backend = new ScriptedBackend();
      const caps = { checkpointing: { providerRollbackReturnsSnapshot: returns } };
      // The provider cuts right, but answers with a conversation that has one turn too many.
      const ghost = { turnRef: null, status: "completed" as const, userText: "ghost", assistantText: "" };
      const { adapter, counts } = watched(caps, backend, (real) => ({
        snapshot: { ...real, turns: [...real.turns, ghost] },
      }));
      const s = await rollbackAfterThreeRuns(adapter, backend);
      try {
        expect(allTurns(backend)).toEqual([[["[one]", null]]]);
        if (returns) {
          // Checked against what it returned, with no second read: 2 turns kept of 3 after dropping 2.
          expect(counts.reads).toBe(1);
          expect(s.receipt.provider).toBe("divergent");
          expect(divergence(s).map((d) => d[4])).toEqual([expect.stringContaining("kept 2 of 3 turns")]);
        } else {
          // The returned snapshot is not what the record promises: the conversation is read again.
          expect(counts.reads).toBe(2);
          expect(s.receipt.provider).toBe("rolled_back");
          expect(divergence(s)).toEqual([]);
        }
      } finally {
        await s.cleanup();
      }
    },
  );

  it.each([true, false])(
    "=%s (no snapshot reads): a returned snapshot that still holds a dropped turn is caught only when promised",
    async (returns) => {
      const backend = new ScriptedBackend();
      const caps = {
        threads: { canReadThreadSnapshot: false },
        checkpointing: { providerRollbackReturnsSnapshot: returns, providerCanReadConversationSnapshot: false },
      };
      const { adapter, counts } = watched(caps, backend, (_real, before) => ({ snapshot: before }));
      const s = await rollbackAfterThreeRuns(adapter, backend);
      try {
        expect(counts.reads).toBe(0);
        // Only the promised snapshot checks the cut; without it the rollback is trusted (rollback_by_resume).
        expect(policies(s.events, "rollback_by_resume")).toHaveLength(returns ? 0 : 1);
        if (returns) {
          expect(s.receipt.provider).toBe("divergent");
          const dropped = s.r3.attempts[0]!.nativeTurnRef;
          expect(dropped).not.toBeNull();
          expect(divergence(s).map((d) => d[4])).toEqual([expect.stringContaining(`still holds turn`)]);
        } else {
          expect(s.receipt.provider).toBe("rolled_back");
          expect(divergence(s)).toEqual([]);
        }
      } finally {
        await s.cleanup();
      }
    },
  );
});

describe("the order of a rollback", () => {
  it("the provider rolls back its conversation before any file is restored", async () => {
    const backend = new ScriptedBackend();
    const work = await tempDir("tiller-rollback-order-");
    const seen: Array<{ file: string; restoreAnnounced: boolean }> = [];
    let t: Awaited<ReturnType<typeof openTestRuntime>> | undefined;
    const { adapter, counts } = watched({}, backend, undefined, async () => {
      seen.push({
        file: await readFile(join(work.dir, "f.txt"), "utf8"),
        restoreAnnounced: ofType(t!.events, "checkpoint.restore_started").length > 0,
      });
    });
    t = await openTestRuntime({ s: adapter }, { checkpoints: true });
    try {
      const { threadId } = await t.rt.createThread({ providerTarget: "s", cwd: work.dir });
      const r1 = await sendAndWait(t.rt, threadId, "[one]");
      await sendAndWait(t.rt, threadId, "[two]");
      const receipt = await t.rt.rollback({ threadId, toRunId: r1.runId });
      expect(receipt).toMatchObject({ provider: "rolled_back", filesRestored: true });
      expect(counts.rollbacks).toBe(1);
      // When the provider was asked, the files were still run 2's and no restore had been announced.
      expect(seen).toEqual([{ file: "two\n", restoreAnnounced: false }]);
      expect(await readFile(join(work.dir, "f.txt"), "utf8")).toBe("one\n");
      const types = t.events.map((r) => r.event.type);
      expect(types.indexOf("rollback.started")).toBeLessThan(types.indexOf("checkpoint.restore_started"));
    } finally {
      await t.cleanup();
      await work.cleanup();
    }
  });
});
