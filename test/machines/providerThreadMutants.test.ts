import { describe, expect, it } from "vitest";
import { defineCapabilities } from "../../src/capabilities/index.js";
import { pendingCall } from "../../src/machines/providerThread.js";
import { DEGRADATIONS } from "../../src/machines/policies.js";
import { openProviderThread } from "./providerThreadHarness.js";

/**
 * The provider-thread machine's records and state beyond its choice of call (issue 14): a degradation it applies is
 * recorded against the app thread it serves (events.md: `threadId` is null only for a session-wide policy), with the
 * capability the registry names; a thread it throws away for a fresh one is named in the record, so the log says
 * which provider thread lost its part of the conversation; and a thread re-attached in a session a previous life
 * started (guarantees.md, "Unless the provider still holds them") is loaded there, its turn running, with no new
 * provider call.
 */

const stored = { providerThreadId: "pth_old", resumeCursor: "cursor-0" };

/** The policy record a thread-scoped degradation leaves before any run of it is named. */
const threadPolicy = (policy: keyof typeof DEGRADATIONS) => ({
  type: "policy.applied",
  threadId: "thr_1",
  runId: null,
  policy,
  capability: DEGRADATIONS[policy].capability,
  outcome: DEGRADATIONS[policy].outcome,
});

describe("the degradations the provider-thread machine applies are the app thread's", () => {
  it("a provider that makes no empty threads: thread_created_with_first_turn, on this app thread", () => {
    const m = openProviderThread();
    m.load({ capabilities: defineCapabilities({ threads: { canCreateEmptyThread: false } }) });
    expect(m.policiesApplied()).toEqual([
      { ...threadPolicy("thread_created_with_first_turn"), detail: expect.any(String) },
    ]);
  });

  it("a returning provider without delta handoff: handoff_fresh_thread names the thread that missed runs", () => {
    const m = openProviderThread();
    m.load({
      stored,
      missedRuns: true,
      capabilities: defineCapabilities({ context: { supportsDeltaHandoff: false } }),
    });
    expect(m.policiesApplied()).toEqual([
      { ...threadPolicy("handoff_fresh_thread"), detail: expect.stringContaining("pth_old") },
    ]);
  });

  it("after a divergent rollback: divergent_thread_rebuilt names the diverged thread", () => {
    const m = openProviderThread();
    m.load({ stored, divergent: true });
    expect(m.policiesApplied()).toEqual([
      { ...threadPolicy("divergent_thread_rebuilt"), detail: expect.stringContaining("pth_old") },
    ]);
  });
});

describe("a thread re-attached in a session a previous life started", () => {
  it("is loaded there with its turn running, asks the provider for nothing, and records nothing", () => {
    const m = openProviderThread();
    const handle = { threadRef: "native-7", resumeCursor: "cursor-7" };
    m.actor.send({ type: "REATTACHED", providerThreadId: "pth_7", sessionId: "ses_old", handle });
    const snapshot = m.actor.getSnapshot();
    expect(snapshot.value).toEqual({ loaded: "active" });
    expect(pendingCall(snapshot)).toBeNull();
    expect(snapshot.context).toMatchObject({ providerThreadId: "pth_7", sessionId: "ses_old", handle });
    expect(m.records).toEqual([]);
    m.actor.send({ type: "TURN_ENDED" });
    expect(m.actor.getSnapshot().value).toEqual({ loaded: "idle" });
    m.actor.send({ type: "UNLOAD" });
    expect(m.actor.getSnapshot().context).toMatchObject({ sessionId: null, handle: null });
  });
});

/**
 * A degradation's detail says what the runtime did instead, in the terms of its registry entry (degradations.md): a
 * record naming the policy and the thread but not the fallback taken would leave the log's reader guessing.
 */
describe("what the provider-thread machine's degradations say they did instead", () => {
  it("no empty threads: the detail names the target and says the first turn makes the thread", () => {
    const m = openProviderThread();
    m.load({ capabilities: defineCapabilities({ threads: { canCreateEmptyThread: false } }) });
    const [policy] = m.policiesApplied();
    expect(policy).toMatchObject({ detail: expect.stringContaining("alpha") });
    expect(policy).toMatchObject({ detail: expect.stringMatching(/turn makes its provider thread/) });
  });

  it("no delta handoff: the detail says a fresh provider thread gets the whole conversation", () => {
    const m = openProviderThread();
    m.load({
      stored,
      missedRuns: true,
      capabilities: defineCapabilities({ context: { supportsDeltaHandoff: false } }),
    });
    expect(m.policiesApplied()).toEqual([
      expect.objectContaining({ detail: expect.stringMatching(/no delta handoff.*fresh provider thread/) }),
    ]);
  });

  it("a divergent rollback: the detail says a fresh provider thread gets the app's history", () => {
    const m = openProviderThread();
    m.load({ stored, divergent: true });
    expect(m.policiesApplied()).toEqual([
      expect.objectContaining({ detail: expect.stringMatching(/rollback.*fresh provider thread/) }),
    ]);
  });

  it("divergent with no stored thread to name: still realigned on a fresh provider thread, the policy recorded", () => {
    const m = openProviderThread();
    m.load({ stored: null, divergent: true });
    expect(pendingCall(m.actor.getSnapshot())).toEqual({ call: "create", via: "realigned" });
    expect(m.policiesApplied()).toEqual([{ ...threadPolicy("divergent_thread_rebuilt"), detail: expect.any(String) }]);
  });
});
