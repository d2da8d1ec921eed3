import { describe, expect, it } from "vitest";
import { createScriptedAdapter } from "../../src/index.js";
import { hang } from "../support/policies.js";
import { nextEvent, ofType, openTestRuntime, override, recordCalls } from "../support/runtime.js";

/**
 * Handoffs on provider switches: what a provider is told when it takes over a thread (all of
 * it, or the delta it missed), that the handoff survives a failed send, lands in the run whose
 * turn carried it, and that a rebuilt provider thread is caught up by deltas afterwards.
 */

describe("handoffs on provider switches", () => {
  it("returning to a provider hands it a delta of only what it missed (review a8)", async () => {
    const mk = (name: string) =>
      recordCalls(createScriptedAdapter({ script: ({ text }) => [{ type: "text", text: `${name} saw ${text}` }] }));
    const alpha = mk("alpha");
    const beta = mk("beta");
    const { rt, events, cleanup } = await openTestRuntime({ alpha: alpha.adapter, beta: beta.adapter });
    try {
      const { threadId } = await rt.createThread({ providerTarget: "alpha" });
      await rt.waitForRun((await rt.sendMessage({ threadId, text: "secret is 42" })).runId);
      await rt.waitForRun((await rt.sendMessage({ threadId, text: "the plan is B", providerTarget: "beta" })).runId);
      const back = await rt.waitForRun(
        (await rt.sendMessage({ threadId, text: "what is the plan?", providerTarget: "alpha" })).runId,
      );
      expect(back.status).toBe("completed");
      const handoffs = ofType(events, "handoff.created");
      expect(handoffs.map((h) => [h.fromTarget, h.toTarget, h.strategy, h.coveredRunOrdinals])).toEqual([
        ["alpha", "beta", "full_thread_summary", [1]],
        ["beta", "alpha", "delta_since_last_seen", [2]],
      ]);
      const delta = handoffs[1]!;
      expect(delta.text).toContain("the plan is B");
      expect(delta.text).not.toContain("secret is 42");
      const alphaSends = alpha.calls.filter((c) => c.method === "sendRun").map((c) => c.input);
      expect(alphaSends.map((s) => s.text)).toEqual(["secret is 42", "what is the plan?"]);
      expect(alphaSends[0]!.context).toBeNull();
      expect(alphaSends[1]!.context).toEqual({ kind: "handoff", text: delta.text, delivery: "developer" });
      const types = events.map((r) => r.event.type);
      expect(types.lastIndexOf("handoff.created")).toBeLessThan(types.lastIndexOf("attempt.turn_bound"));
    } finally {
      await cleanup();
    }
  });

  it("a failed first send after a switch does not lose the handoff, and it is recorded once (review a16)", async () => {
    const alpha = createScriptedAdapter({ script: ({ text }) => [{ type: "text", text: `alpha: ${text}` }] });
    const betaBase = createScriptedAdapter({ script: ({ text }) => [{ type: "text", text: `beta: ${text}` }] });
    let sends = 0;
    const beta = recordCalls(
      override(betaBase, {
        sendRun: async (input) => {
          sends += 1;
          if (sends === 1) throw new Error("transient 503");
          return betaBase.sendRun(input);
        },
      }),
    );
    const { rt, events, cleanup } = await openTestRuntime({ alpha, beta: beta.adapter });
    try {
      const { threadId } = await rt.createThread({ providerTarget: "alpha" });
      await rt.waitForRun((await rt.sendMessage({ threadId, text: "secret is 42" })).runId);
      const failed = await rt.waitForRun(
        (await rt.sendMessage({ threadId, text: "q1", providerTarget: "beta" })).runId,
      );
      expect([failed.status, failed.failure?.message]).toEqual(["failed", "transient 503"]);
      const retried = await rt.waitForRun(
        (await rt.sendMessage({ threadId, text: "q1 again", providerTarget: "beta" })).runId,
      );
      expect(retried.status).toBe("completed");
      const handoffs = ofType(events, "handoff.created");
      expect(handoffs.map((h) => [h.fromTarget, h.toTarget, h.coveredRunOrdinals])).toEqual([["alpha", "beta", [1]]]);
      expect(handoffs[0]!.text).toContain("secret is 42");
      const betaSends = beta.calls.filter((c) => c.method === "sendRun").map((c) => c.input);
      expect(betaSends.map((s) => s.text)).toEqual(["q1", "q1 again"]);
      for (const send of betaSends)
        expect(send.context).toEqual({ kind: "handoff", text: handoffs[0]!.text, delivery: "developer" });
    } finally {
      await cleanup();
    }
  });

  it(
    "a handoff carried by a turn while a later run is queued " + "appears in the run whose turn carried it (review s2)",
    async () => {
      const alpha = createScriptedAdapter({
        script: ({ text }) => (text === "one" ? hang : [{ type: "text", text: `alpha: ${text}` }]),
      });
      const beta = createScriptedAdapter({ script: ({ text }) => [{ type: "text", text: `beta: ${text}` }] });
      const { rt, events, cleanup } = await openTestRuntime({ alpha, beta });
      try {
        const { threadId } = await rt.createThread({ providerTarget: "alpha" });
        const r1 = await rt.sendMessage({ threadId, text: "one" });
        await nextEvent(rt, "node.delta", (e) => e.runId === r1.runId);
        const r2 = await rt.sendMessage({ threadId, text: "two", providerTarget: "beta", mode: "queue" });
        const r3 = await rt.sendMessage({ threadId, text: "three", providerTarget: "beta", mode: "queue" });
        expect([r2.queuePosition, r3.queuePosition]).toEqual([1, 2]);
        await rt.interrupt({ runId: r1.runId });
        await rt.waitForRun(r2.runId);
        await rt.waitForRun(r3.runId);
        const snapshot = await rt.readThread(threadId);
        expect(snapshot.runs.map((r) => [r.ordinal, r.status, r.items.map((i) => i.kind)])).toEqual([
          [1, "interrupted", ["user_message", "assistant_message", "interrupt_request"]],
          [2, "completed", ["user_message", "handoff", "assistant_message"]],
          [3, "completed", ["user_message", "assistant_message"]],
        ]);
        const handoffs = ofType(events, "handoff.created");
        expect(handoffs.map((h) => [h.runId, h.toTarget, h.coveredRunOrdinals])).toEqual([[r2.runId, "beta", [1]]]);
      } finally {
        await cleanup();
      }
    },
  );

  it(
    "after a provider thread was rebuilt for a failed resume, " +
      "later switches back to it are provider_switch deltas, not resume_failed (review s13)",
    async () => {
      const first = await openTestRuntime({ alpha: createScriptedAdapter(), beta: createScriptedAdapter() });
      const { threadId } = await first.rt.createThread({ providerTarget: "alpha" });
      await first.rt.waitForRun((await first.rt.sendMessage({ threadId, text: "one" })).runId);
      await first.rt.close();

      // A new backend: the stored cursor is unknown there, so the resume fails and alpha rebuilds.
      const alpha = recordCalls(createScriptedAdapter());
      const second = await openTestRuntime(
        { alpha: alpha.adapter, beta: createScriptedAdapter() },
        { dataDir: first.dataDir },
      );
      try {
        const { rt, events } = second;
        for (const [text, providerTarget] of [
          ["two", "alpha"],
          ["three", "beta"],
          ["four", "alpha"],
        ] as const) {
          expect((await rt.waitForRun((await rt.sendMessage({ threadId, text, providerTarget })).runId)).status).toBe(
            "completed",
          );
        }
        // Returning to alpha re-decides how it catches up: it takes deltas, so its thread is resumed.
        expect(ofType(events, "provider_thread.bound").map((b) => [b.providerTarget, b.via])).toEqual([
          ["alpha", "rebuilt"],
          ["beta", "created"],
          ["alpha", "resumed"],
        ]);
        const handoffs = ofType(events, "handoff.created");
        expect(handoffs.map((h) => [h.toTarget, h.reason, h.strategy, h.coveredRunOrdinals])).toEqual([
          ["alpha", "resume_failed", "full_thread_summary", [1]],
          ["beta", "provider_switch", "full_thread_summary", [1, 2]],
          ["alpha", "provider_switch", "delta_since_last_seen", [3]],
        ]);
        const contexts = alpha.calls.filter((c) => c.method === "sendRun").map((c) => c.input.context);
        expect(contexts.map((c) => c?.kind ?? null)).toEqual(["rebuild", "handoff"]);
        expect(contexts[1]).toEqual({ kind: "handoff", text: handoffs[2]!.text, delivery: "developer" });
        expect(handoffs[2]!.text).toContain("user: three");
        expect(handoffs[2]!.text).not.toContain("user: two");
      } finally {
        await second.cleanup();
      }
    },
  );

  it("a thread rebuilt on a provider that cannot consume summaries fails its run typed, never uninformed", async () => {
    const first = await openTestRuntime({ alpha: createScriptedAdapter() });
    const { threadId } = await first.rt.createThread({ providerTarget: "alpha" });
    await first.rt.waitForRun((await first.rt.sendMessage({ threadId, text: "one" })).runId);
    await first.rt.close();

    // A new backend: the stored cursor is unknown there, so the thread must be rebuilt from a summary.
    const alpha = recordCalls(
      createScriptedAdapter({ capabilities: { context: { canConsumeHandoffSummaries: false } } }),
    );
    const second = await openTestRuntime({ alpha: alpha.adapter }, { dataDir: first.dataDir });
    try {
      const { rt, events } = second;
      const run = await rt.waitForRun((await rt.sendMessage({ threadId, text: "two" })).runId);
      expect([run.status, run.failure?.failureClass]).toEqual(["failed", "capability_unsupported"]);
      expect(alpha.calls.filter((c) => c.method === "sendRun")).toEqual([]);
      expect(ofType(events, "handoff.created")).toEqual([]);
    } finally {
      await second.cleanup();
    }
  });
});
