import { describe, expect, it } from "vitest";
import { defineCapabilities, fullCapabilities, type ProviderCapabilities } from "../../src/capabilities/index.js";
import type { LoadSituation } from "../../src/machines/providerThread.js";
import { openProviderThread } from "./providerThreadHarness.js";

/**
 * The provider-thread machine alone: how an app thread's provider thread is loaded, decided
 * by guarded transitions over the capability record and the thread's situation, and the
 * records each decision leaves. Expectations come from the context-handoff and fork policies
 * of the capability seed and the domain model (invariants 8 and 9), not from the machine.
 */

const stored = { providerThreadId: "pth_old", resumeCursor: "cursor-0" };
const noDelta = defineCapabilities({ context: { supportsDeltaHandoff: false } });
const fork = (
  capabilities: ProviderCapabilities,
  over: Partial<NonNullable<LoadSituation["fork"]>> = {},
): LoadSituation["fork"] => ({
  transferId: "trf_1",
  capabilities,
  fromInside: false,
  parentRanHere: true,
  adapterForks: true,
  hasForkPointRef: true,
  why: "the parent has no thread on this provider",
  capability: "threads.canForkThread",
  parentProviderThreadId: "pth_parent",
  runCount: 2,
  ...over,
});

describe("provider-thread machine", () => {
  it("a provider that makes no empty threads: no call now, the next turn makes it (named), then it is bound", () => {
    const m = openProviderThread();
    m.load({ capabilities: defineCapabilities({ threads: { canCreateEmptyThread: false } }) });
    expect([m.actor.getSnapshot().value, m.call()]).toEqual([{ creating: "withFirstTurn" }, "withTurn"]);
    expect(m.types()).toEqual(["policy:thread_created_with_first_turn"]);
    m.bind();
    expect(m.actor.getSnapshot().value).toEqual({ loaded: "idle" });
    expect(m.types()).toEqual(["policy:thread_created_with_first_turn", "provider_thread.bound"]);
  });

  it("a thread never loaded on this target is created, and the binding is recorded", () => {
    const m = openProviderThread();
    expect(m.actor.getSnapshot().value).toBe("unloaded");
    m.load();
    expect([m.actor.getSnapshot().value, m.call()]).toEqual([{ creating: "calling" }, "create"]);
    m.bind();
    expect(m.actor.getSnapshot().value).toEqual({ loaded: "idle" });
    expect(m.records).toEqual([
      {
        type: "provider_thread.bound",
        threadId: "thr_1",
        providerThreadId: "pth_new",
        providerTarget: "alpha",
        sessionId: "ses_1",
        nativeThreadRef: "native-1",
        resumeCursor: "cursor-1",
        via: "created",
      },
    ]);
  });

  it("a stored thread that saw every run is resumed from its cursor, under its own id", () => {
    const m = openProviderThread();
    m.load({ stored });
    expect([m.actor.getSnapshot().value, m.call()]).toEqual(["resuming", "resume"]);
    m.bind("pth_old");
    expect(m.records).toMatchObject([{ type: "provider_thread.bound", providerThreadId: "pth_old", via: "resumed" }]);
  });

  it(
    "a stored thread that missed runs is resumed when the provider takes a delta, " +
      "refreshed with a full summary when it does not",
    () => {
      const delta = openProviderThread();
      delta.load({ stored, missedRuns: true });
      expect(delta.call()).toBe("resume");
      expect(delta.records).toEqual([]);

      const m = openProviderThread();
      m.load({ stored, missedRuns: true, capabilities: noDelta });
      expect([m.actor.getSnapshot().value, m.call()]).toEqual([{ refreshing: "calling" }, "create"]);
      m.bind();
      expect(m.types()).toEqual(["policy:handoff_fresh_thread", "provider_thread.bound"]);
      expect(m.records[0]).toMatchObject({
        capability: "context.supportsDeltaHandoff",
        outcome: "fallback",
        threadId: "thr_1",
      });
      expect(m.records[1]).toMatchObject({ via: "refreshed", providerThreadId: "pth_new" });
    },
  );

  it("after a divergent rollback a fresh thread is realigned from the app's history, whatever else holds", () => {
    const m = openProviderThread();
    m.load({ stored, divergent: true, missedRuns: true });
    expect([m.actor.getSnapshot().value, m.call()]).toEqual([{ realigning: "calling" }, "create"]);
    m.bind();
    expect(m.types()).toEqual(["policy:divergent_thread_rebuilt", "provider_thread.bound"]);
    expect(m.records[1]).toMatchObject({ via: "realigned" });
  });

  it("a resume the provider refuses is never silent: a warning, then a thread rebuilt from app context", () => {
    const m = openProviderThread();
    m.load({ stored });
    m.actor.send({ type: "RESUME_FAILED", message: "no such thread" });
    expect([m.actor.getSnapshot().value, m.call()]).toEqual([{ rebuilding: "calling" }, "create"]);
    m.bind();
    expect(m.types()).toEqual(["warning", "provider_thread.bound"]);
    expect(m.records[0]).toMatchObject({ message: expect.stringContaining("no such thread") });
    expect(m.records[1]).toMatchObject({ via: "rebuilt" });
  });

  it("a thread whose last provider thread broke gets a replacement", () => {
    const m = openProviderThread();
    m.load({ hadBroken: true });
    m.bind();
    expect(m.records).toMatchObject([{ via: "replaced" }]);
  });

  it("a fork whose parent ran here on a provider that forks is realised natively", () => {
    const m = openProviderThread();
    m.load({ fork: fork(fullCapabilities()) });
    expect([m.actor.getSnapshot().value, m.call()]).toEqual(["forkingNatively", "fork"]);
    m.bind();
    expect(m.types()).toEqual(["fork.resolved", "provider_thread.bound"]);
    expect(m.records[0]).toMatchObject({
      resolution: "native",
      transferId: "trf_1",
      detail: expect.stringContaining("pth_parent"),
    });
    expect(m.records[1]).toMatchObject({ via: "forked" });
  });

  it("a native fork that fails falls back to a portable fork, saying why", () => {
    const m = openProviderThread();
    m.load({ fork: fork(fullCapabilities()) });
    m.actor.send({ type: "FORK_FAILED", message: "boom" });
    expect([m.actor.getSnapshot().value, m.call()]).toEqual([{ forkingPortably: "calling" }, "create"]);
    m.bind();
    expect(m.types()).toEqual(["policy:synthetic_fork", "fork.resolved", "provider_thread.bound"]);
    expect(m.records[1]).toMatchObject({ resolution: "portable", detail: "native fork failed (boom)" });
    expect(m.records[2]).toMatchObject({ via: "created" });
  });

  it(
    "a fork is portable when the provider cannot fork, " +
      "the parent did not run here, or the point has no native turn id",
    () => {
      const cases: Array<[string, NonNullable<LoadSituation["fork"]>]> = [
        ["cannot fork a thread", fork(defineCapabilities({ threads: { canForkThread: false } }))!],
        [
          "cannot fork from a turn",
          fork(defineCapabilities({ threads: { canForkFromTurn: false } }), {
            fromInside: true,
            capability: "threads.canForkFromTurn",
          })!,
        ],
        ["parent elsewhere", fork(fullCapabilities(), { parentRanHere: false })!],
        ["no fork point", fork(fullCapabilities(), { fromInside: true, hasForkPointRef: false })!],
        ["adapter cannot fork", fork(fullCapabilities(), { adapterForks: false })!],
      ];
      for (const [name, situation] of cases) {
        const m = openProviderThread();
        m.load({ fork: situation });
        expect([name, m.actor.getSnapshot().value]).toEqual([name, { forkingPortably: "calling" }]);
        expect(m.records[0]).toMatchObject({
          type: "policy.applied",
          policy: "synthetic_fork",
          capability: situation.capability,
        });
      }
    },
  );

  it("runs turns while loaded; a session loss unloads it, and the next load decides again for the new session", () => {
    const m = openProviderThread();
    m.load();
    m.bind();
    m.actor.send({ type: "TURN_BEGAN" });
    expect(m.actor.getSnapshot().value).toEqual({ loaded: "active" });
    m.actor.send({ type: "TURN_ENDED" });
    m.actor.send({ type: "UNLOAD" });
    expect([m.actor.getSnapshot().value, m.actor.getSnapshot().context.sessionId]).toEqual(["unloaded", null]);
    m.load({ sessionId: "ses_2", stored: { providerThreadId: "pth_new", resumeCursor: "cursor-1" } });
    expect(m.call()).toBe("resume");
    m.bind("pth_new");
    expect(m.actor.getSnapshot().context.sessionId).toBe("ses_2");
  });

  it("a load that fails binds nothing and leaves the thread unloaded", () => {
    const m = openProviderThread();
    m.load();
    m.actor.send({ type: "LOAD_FAILED" });
    expect(m.actor.getSnapshot().value).toBe("unloaded");
    expect(m.records).toEqual([]);
  });
});
