import { describe, expect, it } from "vitest";
import { createScriptedAdapter } from "../../src/index.js";
import { hang } from "../support/policies.js";
import { nextEvent, ofType, openTestRuntime, override, said } from "../support/runtime.js";

/**
 * A provider session that goes away, or a target whose event stream ends: the run it held fails
 * as provider_session_lost, and what comes next either starts on a new session or fails typed,
 * never hangs.
 */

describe("a provider session lost with a run active and another queued", () => {
  it("fails the active run and starts the queued one on a new session, where it completes (review s9)", async () => {
    const adapter = createScriptedAdapter({
      script: ({ text }) => (text === "one" ? hang : [{ type: "text", text: `re: ${text}` }]),
    });
    const { rt, events, cleanup } = await openTestRuntime({ p: adapter });
    try {
      const { threadId } = await rt.createThread({ providerTarget: "p" });
      const r1 = await rt.sendMessage({ threadId, text: "one" });
      await nextEvent(rt, "node.delta", (e) => e.runId === r1.runId);
      const r2 = await rt.sendMessage({ threadId, text: "two", mode: "queue" });
      expect(r2).toMatchObject({ disposition: "queued", queuePosition: 1 });
      const first = ofType(events, "session.started")[0]!.sessionId;
      await adapter.stopSession({ sessionId: first }); // the provider host went away

      const run1 = await rt.waitForRun(r1.runId);
      expect([run1.status, run1.reason]).toEqual(["failed", "provider_session_lost"]);
      const run2 = await rt.waitForRun(r2.runId);
      expect([run2.status, run2.reason, run2.failure]).toEqual(["completed", null, null]);
      expect(said(run2.items)).toBe("re: two");

      const sessions = ofType(events, "session.started").map((s) => s.sessionId);
      expect(sessions).toHaveLength(2);
      expect(sessions[0]).toBe(first);
      expect(sessions[1]).not.toBe(first);
      // Run 2's provider thread lives in the new session.
      const bound = ofType(events, "provider_thread.bound");
      expect(bound.map((b) => b.sessionId)).toEqual(sessions);
      expect(run2.attempts.map((a) => a.providerThreadId)).toEqual([bound[1]!.providerThreadId]);
    } finally {
      await cleanup();
    }
  });
});

describe("a target whose event stream ends", () => {
  it(
    "fails its running run with a warning, " + "and a later run fails host_unavailable instead of hanging (review s12)",
    async () => {
      const base = createScriptedAdapter({ script: () => hang });
      const adapter = override(base, {
        streamEvents: () => ({
          async *[Symbol.asyncIterator]() {
            for await (const e of base.streamEvents()) {
              yield e;
              if (e.event.type === "item.delta") return; // the provider host died
            }
          },
        }),
      });
      const { rt, events, cleanup } = await openTestRuntime({ p: adapter });
      try {
        const { threadId } = await rt.createThread({ providerTarget: "p" });
        const r1 = await rt.sendMessage({ threadId, text: "go" });
        const run1 = await rt.waitForRun(r1.runId);
        expect([run1.status, run1.reason]).toEqual(["failed", "provider_session_lost"]);
        expect(run1.failure?.message).toMatch(/provider event stream ended/);
        expect(rt.actors.runs.has(r1.runId)).toBe(false);
        expect(ofType(events, "warning").map((w) => w.message)).toEqual(["p: provider event stream ended"]);

        const r2 = await rt.sendMessage({ threadId, text: "next" });
        const run2 = await rt.waitForRun(r2.runId);
        expect(run2.status).toBe("failed");
        expect(run2.failure).toMatchObject({ failureClass: "host_unavailable" });
        expect(run2.failure?.message).toMatch(/^p is unavailable: provider event stream ended/);
        // Only the first session was ever started: the dead target starts no more.
        expect(ofType(events, "session.started")).toHaveLength(1);
      } finally {
        await cleanup();
      }
    },
  );
});
