import { describe, expect, it } from "vitest";
import { createScriptedAdapter, type CapabilityOverrides } from "../../src/index.js";
import type { ProviderAdapter } from "../../src/adapters/contract.js";
import { tempDir } from "../support/files.js";
import { policies, rejectsWith, row, scripted } from "../support/policies.js";
import { ofType, openTestRuntime, override, recordCalls, sendAndWait } from "../support/runtime.js";

/**
 * The handoff rules of the domain model, through the runtime: a provider switch is an explicit handoff record
 * (invariant 8) of the runs the receiving thread never saw, bounded by its record's recommended size (the oldest left
 * out, recorded), written by the provider where its record says it writes summaries and by the local summariser
 * otherwise (a named fallback); a handoff no turn carried yet is reused while the runs to tell are the same and
 * superseded, never changed, when they are not; a target that cannot be told is a typed refusal naming its policy.
 */

/** A provider that ends its first `times` sends with a host error (at the process boundary), then works. */
function sendsFail(adapter: ProviderAdapter, times: number): ProviderAdapter {
  let sends = 0;
  return override(adapter, {
    sendRun: async (input) => {
      sends += 1;
      if (sends <= times) throw new Error("transient 503");
      return adapter.sendRun(input);
    },
  });
}

describe("a handoff no turn has carried yet", () => {
  it("is superseded by a new one, never changed, when the runs to tell are no longer the same", async () => {
    const { rt, events, cleanup } = await openTestRuntime({ a: scripted(), b: sendsFail(scripted(), 1) });
    try {
      const { threadId } = await rt.createThread({ providerTarget: "a" });
      const r1 = await sendAndWait(rt, threadId, "one");
      expect((await sendAndWait(rt, threadId, "to b", { providerTarget: "b" })).status).toBe("failed");
      const r3 = await sendAndWait(rt, threadId, "three", { providerTarget: "a" });
      const r4 = await sendAndWait(rt, threadId, "to b again", { providerTarget: "b" });
      expect(r4.status).toBe("completed");
      const toB = ofType(events, "handoff.created").filter((h) => h.toTarget === "b");
      expect(toB.map((h) => [h.coveredRunIds, h.supersedesHandoffId])).toEqual([
        [[r1.runId], null],
        [[r1.runId, r3.runId], toB[0]!.handoffId],
      ]);
      expect(toB[0]!.providerThreadId).toBe(toB[1]!.providerThreadId);
      // The first record is as it was: superseding adds a record, it does not rewrite one.
      expect(toB[0]!.text).toContain("one");
      expect(toB[0]!.text).not.toContain("three");
      expect(toB[1]!.text).toContain("three");
    } finally {
      await cleanup();
    }
  });

  it("is carried as it is by the next send of the same runs, a new handoff superseding it after that", async () => {
    const b = recordCalls(sendsFail(scripted(), 2));
    const { rt, events, cleanup } = await openTestRuntime({ a: scripted(), b: b.adapter });
    try {
      const { threadId } = await rt.createThread({ providerTarget: "a" });
      await sendAndWait(rt, threadId, "one");
      for (const text of ["to b", "to b again"])
        expect((await sendAndWait(rt, threadId, text, { providerTarget: "b" })).status).toBe("failed");
      expect((await sendAndWait(rt, threadId, "third try", { providerTarget: "b" })).status).toBe("completed");
      const handoffs = ofType(events, "handoff.created");
      expect(handoffs).toHaveLength(1);
      const contexts = b.calls.filter((c) => c.method === "sendRun").map((c) => c.input.context);
      expect(contexts).toEqual(
        contexts.map(() => ({ kind: "handoff", text: handoffs[0]!.text, delivery: "developer" })),
      );
      expect(contexts).toHaveLength(3);
    } finally {
      await cleanup();
    }
  });
});

describe("who writes a handoff's summary", () => {
  it("the local summariser, named, where the record says the provider writes none", async () => {
    const b = scripted({ context: { canGenerateSummaries: false } });
    const { rt, events, cleanup } = await openTestRuntime({ a: scripted(), b });
    try {
      const { threadId } = await rt.createThread({ providerTarget: "a" });
      await sendAndWait(rt, threadId, "one");
      const run = await sendAndWait(rt, threadId, "two", { providerTarget: "b" });
      const [handoff] = ofType(events, "handoff.created");
      expect(handoff!.summarizedBy).toBe("runtime");
      const local = policies(events, "summary_by_local_summariser");
      expect(local.map(row)).toEqual([[threadId, run.runId, "context.canGenerateSummaries", "fallback"]]);
      expect(local[0]!.detail).toContain("b writes no summaries");
    } finally {
      await cleanup();
    }
  });

  it("the provider, its text cut to the record's recommended size; a failure's credentials masked", async () => {
    const bound = 100;
    for (const outcome of ["long", "fails"] as const) {
      const b = override(scripted({ context: { maxRecommendedHandoffChars: bound } }), {
        summarize: async () => {
          if (outcome === "fails") throw new Error("rejected key sk-ant-api03-abcdefghijklmnopqrstuvwxyz0123456789");
          return "w".repeat(bound * 3);
        },
      });
      const { rt, events, cleanup } = await openTestRuntime({ a: scripted(), b });
      try {
        const { threadId } = await rt.createThread({ providerTarget: "a" });
        await sendAndWait(rt, threadId, "one");
        await sendAndWait(rt, threadId, "two", { providerTarget: "b" });
        const [handoff] = ofType(events, "handoff.created");
        const local = policies(events, "summary_by_local_summariser");
        if (outcome === "long") {
          expect([handoff!.summarizedBy, handoff!.text]).toEqual(["provider", "w".repeat(bound)]);
          expect(local).toEqual([]);
        } else {
          expect(handoff!.summarizedBy).toBe("runtime");
          expect(local).toHaveLength(1);
          expect(local[0]!.detail).toContain("b's summary failed");
          expect(local[0]!.detail).not.toContain("abcdefghijklmnopqrstuvwxyz0123456789");
        }
      } finally {
        await cleanup();
      }
    }
  });
});

describe("runs left out of a bounded summary", () => {
  it("are recorded as omitted, the policy saying how many of how many", async () => {
    const b = scripted({ context: { canGenerateSummaries: false, maxRecommendedHandoffChars: 300 } });
    const { rt, events, cleanup } = await openTestRuntime({ a: scripted(), b });
    try {
      const { threadId } = await rt.createThread({ providerTarget: "a" });
      for (const n of [1, 2, 3, 4, 5, 6]) await sendAndWait(rt, threadId, `run number ${n} `.repeat(8));
      const run = await sendAndWait(rt, threadId, "over", { providerTarget: "b" });
      const [handoff] = ofType(events, "handoff.created");
      const omitted = handoff!.omittedRunIds.length;
      expect(omitted).toBeGreaterThan(0);
      expect(handoff!.coveredRunIds.length + omitted).toBe(6);
      const applied = policies(events, "handoff_runs_omitted");
      expect(applied.map(row)).toEqual([[threadId, run.runId, "context.maxRecommendedHandoffChars", "fallback"]]);
      expect(applied[0]!.detail).toContain(`${omitted} of 6 runs`);
      expect(applied[0]!.detail).toContain("300");
    } finally {
      await cleanup();
    }
  });

  it("are not named where everything fits", async () => {
    const { rt, events, cleanup } = await openTestRuntime({ a: scripted(), b: scripted() });
    try {
      const { threadId } = await rt.createThread({ providerTarget: "a" });
      await sendAndWait(rt, threadId, "one");
      await sendAndWait(rt, threadId, "two", { providerTarget: "b" });
      expect(ofType(events, "handoff.created")[0]!.omittedRunIds).toEqual([]);
      expect(policies(events, "handoff_runs_omitted")).toEqual([]);
    } finally {
      await cleanup();
    }
  });
});

describe("a handoff's sender", () => {
  it("is the target of the latest run the receiving thread never saw", async () => {
    const { rt, events, cleanup } = await openTestRuntime({ a: scripted(), b: scripted(), c: scripted() });
    try {
      const { threadId } = await rt.createThread({ providerTarget: "a" });
      await sendAndWait(rt, threadId, "one");
      await sendAndWait(rt, threadId, "two", { providerTarget: "b" });
      await sendAndWait(rt, threadId, "three", { providerTarget: "c" });
      await sendAndWait(rt, threadId, "four", { providerTarget: "a" });
      await sendAndWait(rt, threadId, "five", { providerTarget: "b" });
      const handoffs = ofType(events, "handoff.created");
      expect(handoffs.map((h) => [h.fromTarget, h.toTarget, h.strategy, h.coveredRunOrdinals])).toEqual([
        ["a", "b", "full_thread_summary", [1]],
        ["b", "c", "full_thread_summary", [1, 2]],
        ["c", "a", "delta_since_last_seen", [2, 3]],
        ["a", "b", "delta_since_last_seen", [3, 4]],
      ]);
      // Each was carried by its turn: none supersedes another, not even one to the same provider thread.
      expect(handoffs.map((h) => h.supersedesHandoffId)).toEqual([null, null, null, null]);
      expect(handoffs[3]!.providerThreadId).toBe(handoffs[0]!.providerThreadId);
    } finally {
      await cleanup();
    }
  });
});

describe("a switch the records do not allow", () => {
  const cases: Array<[string, CapabilityOverrides, CapabilityOverrides, string, string[]]> = [
    [
      "provider_switch_unsupported",
      {},
      { sessions: { supportsProviderSwitchingViaHandoff: false } },
      "sessions.supportsProviderSwitchingViaHandoff",
      ["from a to b", "provider switching"],
    ],
    [
      "provider_switch_unsupported",
      { sessions: { supportsProviderSwitchingViaHandoff: false } },
      {},
      "sessions.supportsProviderSwitchingViaHandoff",
      ["from a to b"],
    ],
    [
      "handoff_summary_unsupported",
      {},
      { context: { canConsumeHandoffSummaries: false } },
      "context.canConsumeHandoffSummaries",
      ["b cannot continue from a summary"],
    ],
    [
      "full_handoff_unsupported",
      {},
      { context: { supportsFullThreadHandoff: false } },
      "context.supportsFullThreadHandoff",
      ["b cannot be told a whole conversation"],
    ],
  ];
  for (const [policy, from, to, capability, says] of cases) {
    it(`is refused before a run is recorded: ${policy} (${JSON.stringify([from, to])})`, async () => {
      const { rt, events, cleanup } = await openTestRuntime({ a: scripted(from), b: scripted(to) });
      try {
        const { threadId } = await rt.createThread({ providerTarget: "a" });
        await sendAndWait(rt, threadId, "one");
        const error = await rejectsWith(
          rt.sendMessage({ threadId, text: "two", providerTarget: "b" }),
          "capability_unsupported",
        );
        expect(error.details).toMatchObject({ capability, policy, fallback: "refused" });
        for (const text of says) expect(error.message).toContain(text);
        expect(ofType(events, "run.created").map((e) => e.providerTarget)).toEqual(["a"]);
        expect(ofType(events, "handoff.created")).toEqual([]);
      } finally {
        await cleanup();
      }
    });
  }

  it("is no refusal on a thread with nothing to tell", async () => {
    const b = scripted({
      sessions: { supportsProviderSwitchingViaHandoff: false },
      context: {
        canConsumeHandoffSummaries: false,
        supportsFullThreadHandoff: false,
        acceptsDeveloperContext: false,
        acceptsSystemContext: false,
        acceptsSyntheticUserContext: false,
      },
    });
    const { rt, events, cleanup } = await openTestRuntime({ a: scripted(), b });
    try {
      const { threadId } = await rt.createThread({ providerTarget: "a" });
      expect((await sendAndWait(rt, threadId, "first, on b", { providerTarget: "b" })).status).toBe("completed");
      expect(ofType(events, "handoff.created")).toEqual([]);
    } finally {
      await cleanup();
    }
  });
});

describe("returning to a provider that cannot be told a whole conversation", () => {
  for (const supportsDeltaHandoff of [true, false]) {
    it(`is admitted only where it takes a delta (supportsDeltaHandoff ${supportsDeltaHandoff})`, async () => {
      const b = scripted({ context: { supportsFullThreadHandoff: false, supportsDeltaHandoff } });
      const { rt, events, cleanup } = await openTestRuntime({ a: scripted(), b });
      try {
        const { threadId } = await rt.createThread({ providerTarget: "b" });
        await sendAndWait(rt, threadId, "one");
        const r2 = await sendAndWait(rt, threadId, "two", { providerTarget: "a" });
        const back = rt.sendMessage({ threadId, text: "three", providerTarget: "b" });
        if (supportsDeltaHandoff) {
          expect((await rt.waitForRun((await back).runId)).status).toBe("completed");
          const toB = ofType(events, "handoff.created").filter((h) => h.toTarget === "b");
          expect(toB.map((h) => [h.strategy, h.coveredRunIds])).toEqual([["delta_since_last_seen", [r2.runId]]]);
        } else {
          const error = await rejectsWith(back, "capability_unsupported");
          expect(error.details).toMatchObject({ policy: "full_handoff_unsupported" });
        }
      } finally {
        await cleanup();
      }
    });
  }
});

describe("how a handoff is delivered", () => {
  it("as system context where the record takes no developer context but system context", async () => {
    const b = recordCalls(scripted({ context: { acceptsDeveloperContext: false, acceptsSystemContext: true } }));
    const { rt, events, cleanup } = await openTestRuntime({ a: scripted(), b: b.adapter });
    try {
      const { threadId } = await rt.createThread({ providerTarget: "a" });
      await sendAndWait(rt, threadId, "one");
      await sendAndWait(rt, threadId, "two", { providerTarget: "b" });
      const [send] = b.calls.filter((c) => c.method === "sendRun");
      expect(send!.input.context).toMatchObject({ kind: "handoff", delivery: "system" });
      expect(policies(events, "handoff_as_user_context")).toEqual([]);
    } finally {
      await cleanup();
    }
  });
});

describe("runs rolled back", () => {
  it("are no longer told to a provider the conversation moves to", async () => {
    const { rt, events, cleanup } = await openTestRuntime({ a: scripted(), b: scripted() });
    try {
      const { threadId } = await rt.createThread({ providerTarget: "a" });
      const r1 = await sendAndWait(rt, threadId, "kept run");
      await sendAndWait(rt, threadId, "dropped run");
      await rt.rollback({ threadId, toRunId: r1.runId });
      const r3 = await sendAndWait(rt, threadId, "after", { providerTarget: "b" });
      expect(r3.status).toBe("completed");
      const [handoff] = ofType(events, "handoff.created");
      expect(handoff!.coveredRunIds).toEqual([r1.runId]);
      expect(handoff!.text).toContain("kept run");
      expect(handoff!.text).not.toContain("dropped run");
    } finally {
      await cleanup();
    }
  });

  it("after a fork was taken are still the fork's history", async () => {
    const s = scripted({ threads: { canForkThread: false } });
    const { rt, events, cleanup } = await openTestRuntime({ s });
    try {
      const { threadId } = await rt.createThread({ providerTarget: "s" });
      const r1 = await sendAndWait(rt, threadId, "kept run");
      const r2 = await sendAndWait(rt, threadId, "later dropped run");
      const fork = await rt.forkThread({ threadId });
      await rt.rollback({ threadId, toRunId: r1.runId });
      const run = await sendAndWait(rt, fork.threadId, "in the fork");
      expect(run.status).toBe("completed");
      const handoffs = ofType(events, "handoff.created").filter((h) => h.threadId === fork.threadId);
      expect(handoffs.map((h) => [h.reason, h.coveredRunIds, h.coveredRunOrdinals])).toEqual([
        ["fork", [r1.runId, r2.runId], []],
      ]);
      expect(handoffs[0]!.text).toContain("later dropped run");
    } finally {
      await cleanup();
    }
  });
});

describe("runs rolled back before a fork was taken", () => {
  it("are not the fork's history", async () => {
    const s = scripted({ threads: { canForkThread: false } });
    const { rt, events, cleanup } = await openTestRuntime({ s });
    try {
      const { threadId } = await rt.createThread({ providerTarget: "s" });
      const r1 = await sendAndWait(rt, threadId, "kept run");
      await sendAndWait(rt, threadId, "dropped run");
      await rt.rollback({ threadId, toRunId: r1.runId });
      const r3 = await sendAndWait(rt, threadId, "after the rollback");
      const fork = await rt.forkThread({ threadId });
      expect((await sendAndWait(rt, fork.threadId, "in the fork")).status).toBe("completed");
      const [handoff] = ofType(events, "handoff.created").filter((h) => h.threadId === fork.threadId);
      expect([handoff!.reason, handoff!.coveredRunIds]).toEqual(["fork", [r1.runId, r3.runId]]);
      expect(handoff!.text).not.toContain("dropped run");
    } finally {
      await cleanup();
    }
  });
});

describe("a provider thread left divergent by a rollback the provider could not make", () => {
  it("is rebuilt on the same target, told the whole conversation, though the target takes no switch", async () => {
    const a = recordCalls(
      scripted({
        threads: { canRollbackThread: false },
        checkpointing: { providerCanRollbackConversation: false },
        sessions: { supportsProviderSwitchingViaHandoff: false },
      }),
    );
    const work = await tempDir("tiller-handoff-rules-");
    const { rt, events, cleanup } = await openTestRuntime({ a: a.adapter }, { checkpoints: true });
    try {
      const { threadId } = await rt.createThread({ providerTarget: "a", cwd: work.dir });
      const r1 = await sendAndWait(rt, threadId, "kept run");
      await sendAndWait(rt, threadId, "dropped run");
      await rt.rollback({ threadId, toRunId: r1.runId });
      const r3 = await sendAndWait(rt, threadId, "after the rollback");
      expect(r3.status).toBe("completed");
      const handoffs = ofType(events, "handoff.created");
      expect(handoffs.map((h) => [h.reason, h.fromTarget, h.toTarget, h.strategy, h.coveredRunIds])).toEqual([
        ["rollback_divergent", null, "a", "full_thread_summary", [r1.runId]],
      ]);
      const sends = a.calls.filter((c) => c.method === "sendRun").map((c) => c.input.context?.kind ?? null);
      expect(sends).toEqual([null, null, "rebuild"]);
    } finally {
      await cleanup();
      await work.cleanup();
    }
  });
});

describe("a portable fork's conversation", () => {
  it("moved to another provider is the parent's runs and the fork's own, only its own counted by ordinal", async () => {
    const s = scripted({ threads: { canForkThread: false } });
    const { rt, events, cleanup } = await openTestRuntime({ s, t: scripted() });
    try {
      const { threadId } = await rt.createThread({ providerTarget: "s" });
      const r1 = await sendAndWait(rt, threadId, "parent run");
      const fork = await rt.forkThread({ threadId });
      const f1 = await sendAndWait(rt, fork.threadId, "fork run");
      const f2 = await sendAndWait(rt, fork.threadId, "elsewhere", { providerTarget: "t" });
      expect(f2.status).toBe("completed");
      const handoffs = ofType(events, "handoff.created").filter((h) => h.threadId === fork.threadId);
      expect(handoffs.map((h) => [h.reason, h.toTarget, h.coveredRunIds, h.coveredRunOrdinals])).toEqual([
        ["fork", "s", [r1.runId], []],
        ["provider_switch", "t", [r1.runId, f1.runId], [1]],
      ]);
    } finally {
      await cleanup();
    }
  });
});

describe("a provider that takes no context", () => {
  it("can start a conversation, and is refused one it would have to be told", async () => {
    const mute: CapabilityOverrides = {
      context: { acceptsDeveloperContext: false, acceptsSystemContext: false, acceptsSyntheticUserContext: false },
    };
    const { rt, cleanup } = await openTestRuntime({ a: scripted(), b: createScriptedAdapter({ capabilities: mute }) });
    try {
      const { threadId } = await rt.createThread({ providerTarget: "a" });
      await sendAndWait(rt, threadId, "one");
      const error = await rejectsWith(
        rt.sendMessage({ threadId, text: "two", providerTarget: "b" }),
        "capability_unsupported",
      );
      expect(error.details).toMatchObject({
        policy: "handoff_unsupported",
        capability: "context.acceptsSyntheticUserContext",
      });
      expect(error.message).toContain("b accepts no explicit context");
    } finally {
      await cleanup();
    }
  });
});
