import { describe, expect, it } from "vitest";
import type { InspectionEvent } from "xstate";
import { createScriptedAdapter } from "../../src/index.js";
import { openTestRuntime } from "../support/runtime.js";

/**
 * What an inspector sees of the session and provider-thread actors: their decisions fire as
 * transitions of their own machines (a thread created, then resumed in a new session after the
 * first one idled out; the session started, claimed, released), not as state mirrored from
 * elsewhere.
 */

function statesOf(events: InspectionEvent[], machine: string): string[] {
  const seen: string[] = [];
  for (const e of events) {
    if (e.type !== "@xstate.snapshot" || (e.actorRef as { logic?: { id?: string } }).logic?.id !== machine) continue;
    const value = JSON.stringify((e.snapshot as { value?: unknown }).value);
    if (seen.at(-1) !== value) seen.push(value);
  }
  return seen;
}

describe("the inspector sees the decisions of sessions and provider threads", () => {
  it("create, then resume from the cursor in a session started after the first idled out", async () => {
    const events: InspectionEvent[] = [];
    const { rt, cleanup } = await openTestRuntime(
      { s: createScriptedAdapter() },
      { inspect: (e) => void events.push(e), sessionIdleMs: 1 },
    );
    try {
      const { threadId } = await rt.createThread({ providerTarget: "s" });
      await rt.waitForRun((await rt.sendMessage({ threadId, text: "one" })).runId);
      // Waits on the session's own stopped record, never on time.
      await new Promise<void>((resolve) => {
        const stop = rt.subscribe({ afterSeq: 0 }, (r) => {
          if (r.event.type === "session.state" && r.event.status === "stopped") {
            stop();
            resolve();
          }
        });
      });
      await rt.waitForRun((await rt.sendMessage({ threadId, text: "two" })).runId);

      // (The second session idles out too, at a moment of its own: only what comes before is compared.)
      const threads = statesOf(events, "providerThread");
      expect(threads.slice(0, 10)).toEqual([
        '"unloaded"',
        '{"creating":"calling"}',
        '{"loaded":"idle"}',
        '{"loaded":"active"}',
        '{"loaded":"idle"}',
        '"unloaded"',
        '"resuming"',
        '{"loaded":"idle"}',
        '{"loaded":"active"}',
        '{"loaded":"idle"}',
      ]);
      const sessions = statesOf(events, "session");
      expect(sessions.slice(0, 5)).toEqual([
        '"starting"',
        '{"ready":"countingDown"}',
        '"running"',
        '{"ready":"countingDown"}',
        '"idleStopping"',
      ]);
    } finally {
      await cleanup();
    }
  });
});
