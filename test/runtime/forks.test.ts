import { describe, expect, it } from "vitest";
import { createScriptedAdapter, keyedScript, ScriptedBackend } from "../../src/index.js";
import type { CapabilityOverrides } from "../../src/index.js";
import { holding, scripted, streaming, turns } from "../support/policies.js";
import { ofType, openTestRuntime, recordCalls, said, sendAndWait } from "../support/runtime.js";

/**
 * Forks: native only where the provider's thread holds every run up to the fork point, what a
 * fork's provider is told when the fork moves to another provider or its thread breaks, and a
 * fork point taken while a later run is still running.
 */

describe("forks across providers", () => {
  const mk = (name: string) =>
    recordCalls(createScriptedAdapter({ script: ({ text }) => [{ type: "text", text: `${name}: ${text}` }] }));

  it(
    "a fork whose fork point ran partly on another provider resolves portable " +
      "(no native fork from a foreign turn) and its runs complete (review a13)",
    async () => {
      const alpha = mk("alpha");
      const beta = mk("beta");
      const { rt, events, cleanup } = await openTestRuntime({ alpha: alpha.adapter, beta: beta.adapter });
      try {
        const { threadId } = await rt.createThread({ providerTarget: "alpha" });
        await rt.waitForRun((await rt.sendMessage({ threadId, text: "one" })).runId);
        const r2 = await rt.sendMessage({ threadId, text: "two", providerTarget: "beta" });
        await rt.waitForRun(r2.runId);
        await rt.waitForRun((await rt.sendMessage({ threadId, text: "three", providerTarget: "alpha" })).runId);
        const fork = await rt.forkThread({ threadId, afterRunId: r2.runId, providerTarget: "alpha" });
        const sendsBefore = alpha.calls.filter((c) => c.method === "sendRun").length;
        for (const text of ["fork-1", "fork-2"]) {
          const run = await rt.waitForRun((await rt.sendMessage({ threadId: fork.threadId, text })).runId);
          expect([run.status, run.failure, run.providerTarget]).toEqual(["completed", null, "alpha"]);
          expect(run.items.at(-1)?.text).toBe(`alpha: ${text}`);
        }
        const resolved = ofType(events, "fork.resolved").filter((e) => e.threadId === fork.threadId);
        expect(resolved.map((e) => e.resolution)).toEqual(["portable"]);
        expect([...alpha.calls, ...beta.calls].filter((c) => c.method === "forkThread")).toEqual([]);
        expect(
          ofType(events, "policy.applied")
            .filter((e) => e.threadId === fork.threadId)
            .map((e) => e.policy),
        ).toEqual(["synthetic_fork"]);
        const forkSends = alpha.calls.filter((c) => c.method === "sendRun").slice(sendsBefore);
        expect(forkSends[0]!.input.context).toMatchObject({ kind: "fork" });
        expect(forkSends[0]!.input.context.text).toContain("user: one");
        expect(forkSends[0]!.input.context.text).toContain("user: two");
        expect(forkSends[0]!.input.context.text).not.toContain("user: three");
        expect(forkSends[1]!.input.context).toBeNull();
      } finally {
        await cleanup();
      }
    },
  );

  it(
    "native fork, then a switch: " + "the new provider hears the parent's history and the fork's own runs (review s3)",
    async () => {
      const alpha = mk("alpha");
      const beta = mk("beta");
      const { rt, events, cleanup } = await openTestRuntime({ alpha: alpha.adapter, beta: beta.adapter });
      try {
        const { threadId } = await rt.createThread({ providerTarget: "alpha" });
        const parentRun = await rt.sendMessage({ threadId, text: "parent secret 42" });
        await rt.waitForRun(parentRun.runId);
        const fork = await rt.forkThread({ threadId, providerTarget: "alpha" });
        const f1 = await rt.sendMessage({ threadId: fork.threadId, text: "fork run one" });
        expect((await rt.waitForRun(f1.runId)).status).toBe("completed");
        expect(ofType(events, "fork.resolved").map((e) => [e.threadId, e.resolution])).toEqual([
          [fork.threadId, "native"],
        ]);
        const f2 = await rt.waitForRun(
          (await rt.sendMessage({ threadId: fork.threadId, text: "fork run two", providerTarget: "beta" })).runId,
        );
        expect([f2.status, said(f2.items)]).toEqual(["completed", "beta: fork run two"]);

        // What beta is told: the parent's run up to the fork point, and the fork's own run on alpha.
        const sends = beta.calls.filter((c) => c.method === "sendRun").map((c) => c.input);
        expect(sends.map((s) => s.text)).toEqual(["fork run two"]);
        expect(sends[0]!.context).toMatchObject({ kind: "handoff", delivery: "developer" });
        expect(sends[0]!.context.text).toContain("user: parent secret 42");
        expect(sends[0]!.context.text).toContain("user: fork run one");

        const handoffs = ofType(events, "handoff.created").filter((h) => h.threadId === fork.threadId);
        expect(
          handoffs.map((h) => [
            h.runId,
            h.fromTarget,
            h.toTarget,
            h.reason,
            h.strategy,
            h.coveredRunIds,
            h.coveredRunOrdinals,
          ]),
        ).toEqual([
          [f2.runId, "alpha", "beta", "provider_switch", "full_thread_summary", [parentRun.runId, f1.runId], [1]],
        ]);
        expect(sends[0]!.context.text).toBe(handoffs[0]!.text);
      } finally {
        await cleanup();
      }
    },
  );

  it(
    "portable fork, then a switch: a fork handoff first, " + "then a switch handoff with both histories (review s3)",
    async () => {
      const alpha = mk("alpha");
      const beta = mk("beta");
      const { rt, events, cleanup } = await openTestRuntime({ alpha: alpha.adapter, beta: beta.adapter });
      try {
        const { threadId } = await rt.createThread({ providerTarget: "alpha" });
        const parentRun = await rt.sendMessage({ threadId, text: "parent secret 42" });
        await rt.waitForRun(parentRun.runId);
        const fork = await rt.forkThread({ threadId, providerTarget: "beta" });
        const f1 = await rt.sendMessage({ threadId: fork.threadId, text: "fork run one" });
        expect((await rt.waitForRun(f1.runId)).status).toBe("completed");
        expect(ofType(events, "fork.resolved").map((e) => [e.threadId, e.resolution])).toEqual([
          [fork.threadId, "portable"],
        ]);
        const alphaSendsBefore = alpha.calls.filter((c) => c.method === "sendRun").length;
        const f2 = await rt.waitForRun(
          (await rt.sendMessage({ threadId: fork.threadId, text: "fork run two", providerTarget: "alpha" })).runId,
        );
        expect([f2.status, said(f2.items)]).toEqual(["completed", "alpha: fork run two"]);

        // beta's first turn of the fork carried the parent's history as a portable fork.
        const betaSends = beta.calls.filter((c) => c.method === "sendRun").map((c) => c.input);
        expect(betaSends.map((s) => s.text)).toEqual(["fork run one"]);
        expect(betaSends[0]!.context).toMatchObject({ kind: "fork", delivery: "developer" });
        expect(betaSends[0]!.context.text).toContain("user: parent secret 42");
        // alpha is told the parent's history and the fork's own run on beta.
        const alphaSend = alpha.calls.filter((c) => c.method === "sendRun")[alphaSendsBefore]!.input;
        expect(alphaSend.text).toBe("fork run two");
        expect(alphaSend.context).toMatchObject({ kind: "handoff", delivery: "developer" });
        expect(alphaSend.context.text).toContain("user: parent secret 42");
        expect(alphaSend.context.text).toContain("user: fork run one");

        const handoffs = ofType(events, "handoff.created").filter((h) => h.threadId === fork.threadId);
        expect(
          handoffs.map((h) => [
            h.runId,
            h.fromTarget,
            h.toTarget,
            h.reason,
            h.strategy,
            h.coveredRunIds,
            h.coveredRunOrdinals,
          ]),
        ).toEqual([
          [f1.runId, "alpha", "beta", "fork", "full_thread_summary", [parentRun.runId], []],
          // alpha's provider thread of the fork is fresh, and the fork has a run of its own: a switch, with everything.
          [f2.runId, "beta", "alpha", "provider_switch", "full_thread_summary", [parentRun.runId, f1.runId], [1]],
        ]);
        expect(betaSends[0]!.context.text).toBe(handoffs[0]!.text);
        expect(alphaSend.context.text).toBe(handoffs[1]!.text);
      } finally {
        await cleanup();
      }
    },
  );

  it(
    "a portable fork's broken provider thread is replaced " +
      "with the parent's history and the fork's runs (review s3b)",
    async () => {
      const alpha = createScriptedAdapter();
      const beta = recordCalls(
        createScriptedAdapter({
          script: ({ text }) =>
            text.includes("[break]")
              ? [
                  { type: "text", text: "x" },
                  { type: "fail", message: "thread corrupt", broken: true },
                ]
              : [{ type: "text", text: `beta: ${text}` }],
        }),
      );
      const { rt, events, cleanup } = await openTestRuntime({ alpha, beta: beta.adapter });
      try {
        const { threadId } = await rt.createThread({ providerTarget: "alpha" });
        const parentRun = await rt.sendMessage({ threadId, text: "parent secret 42" });
        await rt.waitForRun(parentRun.runId);
        const fork = await rt.forkThread({ threadId, providerTarget: "beta" });
        const f1 = await rt.sendMessage({ threadId: fork.threadId, text: "fork fact 7" });
        expect((await rt.waitForRun(f1.runId)).status).toBe("completed");
        const broken = await rt.waitForRun((await rt.sendMessage({ threadId: fork.threadId, text: "[break]" })).runId);
        expect([broken.status, broken.failure?.message]).toEqual(["failed", "thread corrupt"]);
        const after = await rt.waitForRun((await rt.sendMessage({ threadId: fork.threadId, text: "after" })).runId);
        expect([after.status, said(after.items)]).toEqual(["completed", "beta: after"]);

        // The replacement is told the parent's history and every run of the fork, the broken one included.
        const last = beta.calls.filter((c) => c.method === "sendRun").at(-1)!.input;
        expect(last.text).toBe("after");
        expect(last.context).toMatchObject({ kind: "rebuild", delivery: "developer" });
        expect(last.context.text).toContain("user: parent secret 42");
        expect(last.context.text).toContain("user: fork fact 7");
        expect(last.context.text).toContain("user: [break]");

        expect(
          ofType(events, "provider_thread.bound")
            .filter((b) => b.threadId === fork.threadId)
            .map((b) => b.via),
        ).toEqual(["created", "replaced"]);
        const handoffs = ofType(events, "handoff.created").filter((h) => h.threadId === fork.threadId);
        expect(
          handoffs.map((h) => [h.runId, h.toTarget, h.reason, h.strategy, h.coveredRunIds, h.coveredRunOrdinals]),
        ).toEqual([
          [f1.runId, "beta", "fork", "full_thread_summary", [parentRun.runId], []],
          [
            after.runId,
            "beta",
            "thread_broken",
            "full_thread_summary",
            [parentRun.runId, f1.runId, broken.runId],
            [1, 2],
          ],
        ]);
        expect(last.context.text).toBe(handoffs[1]!.text);
        // Inherited runs are labelled as such, so two "run 1"s never read alike.
        expect(last.context.text).toContain("[before the fork, run 1, completed] user: parent secret 42");
        expect(last.context.text).toContain("[run 1, completed] user: fork fact 7");
      } finally {
        await cleanup();
      }
    },
  );
});

describe("native forks", () => {
  it(
    "a provider that accepts no explicit context but forks natively: " +
      "the fork's first message goes through natively (review)",
    async () => {
      const caps: CapabilityOverrides = {
        context: { acceptsSystemContext: false, acceptsDeveloperContext: false, acceptsSyntheticUserContext: false },
      };
      const backend = new ScriptedBackend();
      const { rt, events, cleanup } = await openTestRuntime({ a: scripted(caps, undefined, backend) });
      try {
        const { threadId } = await rt.createThread({ providerTarget: "a" });
        const r1 = await sendAndWait(rt, threadId, "one");
        expect(rt.affordances(threadId).fork).toEqual([{ afterRunId: r1.runId, source: "native", reason: null }]);
        const fork = await rt.forkThread({ threadId });
        const f1 = await sendAndWait(rt, fork.threadId, "in fork");
        expect(f1.status).toBe("completed");
        expect(ofType(events, "fork.resolved").map((e) => [e.threadId, e.resolution])).toEqual([
          [fork.threadId, "native"],
        ]);
        expect(ofType(events, "handoff.created")).toEqual([]);
        expect(turns(holding(backend, "in fork"))).toEqual([
          ["one", null],
          ["in fork", null],
        ]);
        expect(turns(holding(backend, "one"))).toEqual([["one", null]]);
      } finally {
        await cleanup();
      }
    },
  );

  it("a fork after run 1 while run 2 is still running holds run 1 only (review)", async () => {
    const backend = new ScriptedBackend();
    const script = keyedScript({ "[hang]": [{ type: "text", text: "working" }, { type: "hang" }] });
    const { rt, cleanup } = await openTestRuntime({ a: scripted({}, script, backend) });
    try {
      const { threadId } = await rt.createThread({ providerTarget: "a" });
      const r1 = await sendAndWait(rt, threadId, "one");
      const { runId } = await rt.sendMessage({ threadId, text: "[hang] two" });
      await streaming(rt, runId);
      const fork = await rt.forkThread({ threadId, afterRunId: r1.runId });
      const f1 = await sendAndWait(rt, fork.threadId, "in fork");
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
