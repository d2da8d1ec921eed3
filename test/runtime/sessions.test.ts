import { describe, expect, it } from "vitest";
import { createScriptedAdapter } from "../../src/adapters/scripted/adapter.js";
import type { ProviderAdapter } from "../../src/adapters/contract.js";
import { openTestRuntime, ofType } from "../support/runtime.js";

/**
 * Sessions through the real runtime and the scripted provider: the session actor is claimed
 * from the moment a turn has its session (so no idle deadline can stop it while the turn's
 * provider thread is still being loaded), and given back when the turn ends.
 */

/** An adapter whose next provider-thread load waits for the test (the provider boundary). */
function gatedLoads(adapter: ProviderAdapter) {
  let open: (() => void) | null = null;
  let entered: (() => void) | null = null;
  const wrapped = Object.create(adapter) as ProviderAdapter;
  wrapped.ensureProviderThread = async (input) => {
    if (open === null && entered === null) return adapter.ensureProviderThread(input);
    const gate = new Promise<void>((resolve) => (open = resolve));
    entered?.();
    entered = null;
    await gate;
    open = null;
    return adapter.ensureProviderThread(input);
  };
  return {
    adapter: wrapped,
    /** Holds the next load; resolves once it is held. */
    holdNext: () => new Promise<void>((resolve) => (entered = resolve)),
    release: () => open?.(),
  };
}

describe("sessions", () => {
  it("a turn claims its session before its provider thread loads: the shared session is running, with no idle deadline, while the load waits", async () => {
    const gated = gatedLoads(createScriptedAdapter());
    const { rt, events, cleanup } = await openTestRuntime({ alpha: gated.adapter }, { sessionIdleMs: 60_000 });
    try {
      const a = await rt.createThread({ providerTarget: "alpha" });
      await rt.waitForRun((await rt.sendMessage({ threadId: a.threadId, text: "one" })).runId);
      const [session] = [...rt.actors.sessions.values()];
      expect(session!.getSnapshot().value).toEqual({ ready: "countingDown" });

      // A second thread shares the session; its provider thread is loaded while the session idles.
      const b = await rt.createThread({ providerTarget: "alpha" });
      const held = gated.holdNext();
      const run = await rt.sendMessage({ threadId: b.threadId, text: "two" });
      await held;
      expect(rt.actors.sessions.size).toBe(1);
      const during = session!.getSnapshot();
      expect([during.value, during.context.claims, during.context.deadline]).toEqual(["running", 1, null]);

      gated.release();
      expect((await rt.waitForRun(run.runId)).status).toBe("completed");
      const after = session!.getSnapshot();
      expect([after.value, after.context.claims]).toEqual([{ ready: "countingDown" }, 0]);
      expect(ofType(events, "session.state").map((e) => e.status)).toEqual(["running", "ready", "running", "ready"]);
    } finally {
      await cleanup();
    }
  });

  it("a turn that fails before its provider thread is loaded gives its claim back", async () => {
    const adapter = createScriptedAdapter();
    const failing = Object.create(adapter) as ProviderAdapter;
    failing.ensureProviderThread = async () => {
      throw new Error("cannot load");
    };
    const { rt, cleanup } = await openTestRuntime({ alpha: failing });
    try {
      const { threadId } = await rt.createThread({ providerTarget: "alpha" });
      const run = await rt.waitForRun((await rt.sendMessage({ threadId, text: "one" })).runId);
      expect(run.status).toBe("failed");
      const [session] = [...rt.actors.sessions.values()];
      expect([session!.getSnapshot().value, session!.getSnapshot().context.claims]).toEqual([{ ready: "countingDown" }, 0]);
    } finally {
      await cleanup();
    }
  });
});
