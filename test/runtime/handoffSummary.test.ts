import { describe, expect, it } from "vitest";
import { createScriptedAdapter, type ScriptStep } from "../../src/index.js";
import { tempDir } from "../support/files.js";
import { nextEvent, ofType, openTestRuntime, override } from "../support/runtime.js";

/**
 * What a handoff summary tells the provider that takes a thread over: each run's messages,
 * the commands it ran, the files it changed and what the user decided, within the receiving
 * provider's recommended size; the log records exactly which runs the text carries and which
 * it left out, and a left-out run rides along with a later handoff that has room.
 */

/** Each prompt `n`: a command that asks first, a file change, then a reply. */
const work = ({ text }: { text: string }): ScriptStep[] =>
  text === "x"
    ? [{ type: "text", text: "short" }]
    : [
        { type: "command", command: `make step-${text}`, output: "ok\n", approval: true },
        { type: "file_change", path: `step-${text}.txt`, diff: `+${text}`, content: `${text}\n` },
        { type: "text", text: `did step ${text}` },
      ];

async function switchAfterRuns(runs: number, maxChars: number) {
  const alpha = createScriptedAdapter({ script: work });
  const beta = createScriptedAdapter({
    // The runtime's own summariser (the provider writes none).
    capabilities: { context: { maxRecommendedHandoffChars: maxChars, canGenerateSummaries: false } },
    script: ({ text }) => [{ type: "text", text: `beta: ${text}` }],
  });
  const opened = await openTestRuntime({ alpha, beta });
  const workspace = await tempDir("tiller-handoff-summary-");
  const { rt } = opened;
  const { threadId } = await rt.createThread({ providerTarget: "alpha", cwd: workspace.dir });
  const runIds: string[] = [];
  for (let n = 1; n <= runs; n++) {
    const { runId } = await rt.sendMessage({ threadId, text: String(n) });
    runIds.push(runId);
    const { event: asked } = await nextEvent(rt, "request.opened", (e) => e.runId === runId);
    await rt.respond({
      requestId: asked.requestId,
      response: { kind: "decision", decision: n === 2 ? "decline" : "accept" },
    });
    await rt.waitForRun(runId);
  }
  await rt.waitForRun((await rt.sendMessage({ threadId, text: "over to you", providerTarget: "beta" })).runId);
  const cleanup = async () => {
    await opened.cleanup();
    await workspace.cleanup();
  };
  return { ...opened, cleanup, threadId, runIds, handoffs: () => ofType(opened.events, "handoff.created") };
}

describe("handoff summaries", () => {
  it("carry each run's commands, file changes and the user's decisions, not only its messages", async () => {
    const { handoffs, cleanup } = await switchAfterRuns(2, 16_000);
    try {
      const [handoff] = handoffs();
      expect(handoff!.text).toContain("[run 1, completed] user: 1");
      expect(handoff!.text).toContain("ran: make step-1 (exit 0)");
      expect(handoff!.text).toContain("changed: step-1.txt");
      expect(handoff!.text).toContain("user decided: command make step-1: accept");
      expect(handoff!.text).toContain("user decided: command make step-2: decline");
      expect(handoff!.text).toContain("assistant: did step 2");
      expect(handoff!.omittedRunIds).toEqual([]);
    } finally {
      await cleanup();
    }
  });

  it("within the bound, record exactly the runs the text carries and those it left out, alike each time", async () => {
    const first = await switchAfterRuns(4, 400);
    const second = await switchAfterRuns(4, 400);
    try {
      const [handoff] = first.handoffs();
      expect(handoff!.text.length).toBeLessThanOrEqual(400);
      // The oldest runs are left out whole, and the log says so: they are not covered.
      expect(handoff!.omittedRunIds.length).toBeGreaterThan(0);
      expect([...handoff!.omittedRunIds, ...handoff!.coveredRunIds]).toEqual(first.runIds);
      expect(handoff!.coveredRunOrdinals).toEqual(handoff!.coveredRunIds.map((id) => first.runIds.indexOf(id) + 1));
      expect(handoff!.text).toContain(`(${handoff!.omittedRunIds.length} earlier runs omitted)`);
      for (const ordinal of handoff!.coveredRunOrdinals) expect(handoff!.text).toContain(`[run ${ordinal},`);
      expect(handoff!.text).not.toContain("[run 1,");
      // Same runs in, same summary out.
      expect(second.handoffs()[0]!.text).toBe(handoff!.text);
    } finally {
      await first.cleanup();
      await second.cleanup();
    }
  });

  it("a run left out for the bound rides along with a later handoff with room, and alone calls for none", async () => {
    const { rt, threadId, handoffs, cleanup } = await switchAfterRuns(3, 400);
    try {
      const [first] = handoffs();
      expect(first!.omittedRunIds.length).toBeGreaterThan(0);
      // Another turn on beta: the left-out runs alone do not call for another handoff.
      await rt.waitForRun((await rt.sendMessage({ threadId, text: "still beta" })).runId);
      expect(handoffs()).toHaveLength(1);
      // A short run back on alpha, then beta again: its delta has room for what was left out.
      await rt.waitForRun((await rt.sendMessage({ threadId, text: "x", providerTarget: "alpha" })).runId);
      await rt.waitForRun((await rt.sendMessage({ threadId, text: "and you", providerTarget: "beta" })).runId);
      const again = handoffs().filter((h) => h.toTarget === "beta");
      expect(again).toHaveLength(2);
      expect(again[1]!.strategy).toBe("delta_since_last_seen");
      expect(again[1]!.coveredRunIds).toEqual(expect.arrayContaining(first!.omittedRunIds));
      expect(again[1]!.omittedRunIds).toEqual([]);
    } finally {
      await cleanup();
    }
  });

  it("a provider that writes summaries writes this one, bounded; failing, the local one does, named", async () => {
    for (const fails of [false, true]) {
      const writer = createScriptedAdapter({ capabilities: { context: { maxRecommendedHandoffChars: 120 } } });
      const beta = fails
        ? override(writer, { summarize: async () => Promise.reject(new Error("model overloaded")) })
        : writer;
      const { rt, events, cleanup } = await openTestRuntime({ alpha: createScriptedAdapter(), beta });
      try {
        const { threadId } = await rt.createThread({ providerTarget: "alpha" });
        for (const text of ["one", "two", "three"])
          await rt.waitForRun((await rt.sendMessage({ threadId, text })).runId);
        await rt.waitForRun((await rt.sendMessage({ threadId, text: "go", providerTarget: "beta" })).runId);
        const [handoff] = ofType(events, "handoff.created");
        expect(handoff!.text.length).toBeLessThanOrEqual(120);
        const local = ofType(events, "policy.applied").filter((p) => p.policy === "summary_by_local_summariser");
        if (fails) {
          expect(handoff!.summarizedBy).toBe("runtime");
          expect(local.map((p) => p.detail)).toEqual([expect.stringContaining("model overloaded")]);
        } else {
          expect(handoff!.summarizedBy).toBe("provider");
          expect(handoff!.text).toMatch(/^Summary written by the scripted provider/);
          // The provider's summary carries every run: none is recorded as left out.
          expect([handoff!.coveredRunIds.length, handoff!.omittedRunIds]).toEqual([3, []]);
          expect(local).toEqual([]);
        }
      } finally {
        await cleanup();
      }
    }
  });
});
