import { describe, expect, it } from "vitest";
import type { CapabilityOverrides } from "../../src/index.js";
import { holding, rejectsWith, scripted, turns } from "../support/policies.js";
import { ofType, openTestRuntime, override, recordCalls, sendAndWait } from "../support/runtime.js";
import { ScriptedBackend } from "../../src/adapters/scripted/host/backend.js";

/**
 * What a provider thread must be told of the conversation before a run may go to it (issue 14), through the real
 * runtime, from the capability seed and the domain model: a natively forked thread holds its parent's history
 * itself, so it is told only the fork's own runs it missed; a thread that has seen none of the conversation needs the
 * whole of it (`full_handoff_unsupported` where the provider takes only deltas); and a provider that accepts no
 * explicit context is never left to continue uninformed (`handoff_unsupported`, typed).
 */

const noContext: CapabilityOverrides = {
  context: { acceptsSystemContext: false, acceptsDeveloperContext: false, acceptsSyntheticUserContext: false },
};

describe("a native fork's thread on a provider that accepts no explicit context", () => {
  it("runs on with nothing to tell; once it missed the fork's own runs elsewhere, a return is refused", async () => {
    const backend = new ScriptedBackend();
    const a = recordCalls(scripted(noContext, undefined, backend));
    const { rt, events, cleanup } = await openTestRuntime({ a: a.adapter, b: scripted() });
    try {
      const { threadId } = await rt.createThread({ providerTarget: "a" });
      await sendAndWait(rt, threadId, "parent");
      const fork = await rt.forkThread({ threadId });
      for (const text of ["fork one", "fork two"]) {
        expect((await sendAndWait(rt, fork.threadId, text)).status).toBe("completed");
      }
      expect(ofType(events, "fork.resolved").map((e) => e.resolution)).toEqual(["native"]);
      expect(turns(holding(backend, "fork two"))).toEqual([
        ["parent", null],
        ["fork one", null],
        ["fork two", null],
      ]);

      const elsewhere = await sendAndWait(rt, fork.threadId, "on b", { providerTarget: "b" });
      expect(elsewhere.status).toBe("completed");
      const runsBefore = rt.views.threads.get(fork.threadId)!.runs.length;
      const error = await rejectsWith(
        rt.sendMessage({ threadId: fork.threadId, text: "back", providerTarget: "a" }),
        "capability_unsupported",
      );
      expect(error.details).toMatchObject({ policy: "handoff_unsupported" });
      expect(rt.views.threads.get(fork.threadId)!.runs).toHaveLength(runsBefore);
      expect(a.calls.filter((c) => c.method === "sendRun").map((c) => c.input.text)).not.toContain("back");
    } finally {
      await cleanup();
    }
  });
});

describe("a thread that has seen none of the conversation", () => {
  it("needs the whole of it: refused where the provider takes only deltas (full_handoff_unsupported)", async () => {
    const backend = new ScriptedBackend();
    const inner = scripted({ context: { supportsFullThreadHandoff: false } }, undefined, backend);
    // The host fails to send the first turn: a's thread exists, and has seen nothing.
    const a = override(inner, {
      sendRun: (input) =>
        input.text === "refused" ? Promise.reject(new Error("the host went away")) : inner.sendRun(input),
    });
    const { rt, events, cleanup } = await openTestRuntime({ a, b: scripted() });
    try {
      const { threadId } = await rt.createThread({ providerTarget: "a" });
      expect((await sendAndWait(rt, threadId, "refused")).status).toBe("failed");
      expect(ofType(events, "provider_thread.bound").map((b) => b.providerTarget)).toEqual(["a"]);
      expect((await sendAndWait(rt, threadId, "on b", { providerTarget: "b" })).status).toBe("completed");

      const error = await rejectsWith(
        rt.sendMessage({ threadId, text: "back", providerTarget: "a" }),
        "capability_unsupported",
      );
      expect(error.details).toMatchObject({ policy: "full_handoff_unsupported" });
    } finally {
      await cleanup();
    }
  });
});

describe("a provider that accepts no explicit context", () => {
  it("cannot have a thread rebuilt after a failed resume: the run fails typed, never sent uninformed", async () => {
    const first = await openTestRuntime({ a: scripted(noContext) });
    const { threadId } = await first.rt.createThread({ providerTarget: "a" });
    await sendAndWait(first.rt, threadId, "one");
    await first.rt.close();

    // A new backend: the stored cursor is unknown there, so the thread must be rebuilt and told the conversation.
    const a = recordCalls(scripted(noContext));
    const second = await openTestRuntime({ a: a.adapter }, { dataDir: first.dataDir });
    try {
      const run = await sendAndWait(second.rt, threadId, "two");
      expect([run.status, run.failure?.failureClass]).toEqual(["failed", "capability_unsupported"]);
      expect(run.failure?.message).toContain("accepts no explicit context");
      expect(a.calls.filter((c) => c.method === "sendRun")).toEqual([]);
      expect(ofType(second.events, "handoff.created")).toEqual([]);
    } finally {
      await second.cleanup();
    }
  });
});
