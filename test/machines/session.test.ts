import { afterEach, beforeEach, describe, expect, it, vi } from "vitest";
import { defineCapabilities, fullCapabilities, type ProviderCapabilities } from "../../src/capabilities/index.js";
import { DEFAULT_RUNTIME_MODE } from "../../src/domain/entities.js";
import type { DomainEvent } from "../../src/domain/events.js";
import { IDLE_MS, openSession, settled, type SessionHarness } from "./sessionHarness.js";

/**
 * The session machine alone (createActor, its records and signals), with the provider calls
 * it invokes as controllable promises and the clock faked (the idle deadline is a clock
 * boundary). Expectations come from the session lifecycle of the domain model: a session
 * starts, is ready, runs while a turn uses it, stops after the idle time, retires for a model
 * it cannot switch to, and ends when the provider says it stopped or failed.
 */

const noSwitch = defineCapabilities({
  sessions: { supportsModelSwitchInSession: false, supportsMultipleProviderThreadsPerSession: false },
});

async function started(h: SessionHarness, capabilities: ProviderCapabilities = fullCapabilities()): Promise<void> {
  h.provider.resolve({ capabilities, hostGeneration: 3 });
  await settled();
}

const statuses = (records: DomainEvent[]) => records.flatMap((r) => (r.type === "session.state" ? [r.status] : []));

beforeEach(() => {
  vi.useFakeTimers({ toFake: ["setTimeout", "clearTimeout", "Date"] });
  vi.setSystemTime(1_000_000);
});
afterEach(() => vi.useRealTimers());

describe("session machine", () => {
  it(
    "starts by its invoked provider call: " +
      "records the record it announced, signals ready, and arms the idle deadline",
    async () => {
      const h = openSession();
      expect(h.actor.getSnapshot().value).toBe("starting");
      await started(h);
      expect(h.records[0]).toMatchObject({
        type: "session.started",
        sessionId: "ses_1",
        providerTarget: "alpha",
        hostGeneration: 3,
      });
      expect(h.signals).toEqual([
        { type: "ready", sessionId: "ses_1", capabilities: fullCapabilities(), hostGeneration: 3 },
      ]);
      expect(h.actor.getSnapshot().value).toEqual({ ready: "countingDown" });
      expect(h.actor.getSnapshot().context.deadline).toBe(1_000_000 + IDLE_MS);
    },
  );

  it(
    "a provider without plan updates or approvals gets " + "its session-wide degradations recorded once, at start",
    async () => {
      const h = openSession();
      const approvals = {
        supportsCommandApproval: false,
        supportsFileReadApproval: false,
        supportsFileChangeApproval: false,
        supportsApplyPatchApproval: false,
      };
      await started(h, defineCapabilities({ planning: { emitsPlanUpdated: false }, approvals }));
      const policies = h.records.flatMap((r) => (r.type === "policy.applied" ? [r.policy] : []));
      expect(policies).toEqual(["approvals_by_sandbox", "no_plan_artifacts"]);
      expect(h.records.find((r) => r.type === "policy.applied")).toMatchObject({
        threadId: null,
        detail: expect.stringContaining("workspace-write"),
      });
    },
  );

  it("a failed start ends in error: the caller gets the provider's own error, the log a redacted message", async () => {
    const h = openSession();
    const error = Object.assign(new Error("spawn failed: token=sk-ant-abcdefghijklmnopqrstuvwx"), {
      code: "host_unavailable",
    });
    h.provider.reject(error);
    await settled();
    expect(h.actor.getSnapshot().status).toBe("done");
    expect(h.signals).toEqual([{ type: "startFailed", sessionId: "ses_1", error }]);
    const state = h.records.find((r) => r.type === "session.state");
    expect(state).toMatchObject({ status: "error" });
    expect(JSON.stringify(state)).not.toContain("sk-ant-abcdefghijklmnopqrstuvwx");
  });

  it("stops itself once idle past its deadline, and gives its host lease back through the provider", async () => {
    const h = openSession();
    await started(h);
    await vi.advanceTimersByTimeAsync(IDLE_MS - 1);
    expect(h.stops).toEqual([]);
    await vi.advanceTimersByTimeAsync(1);
    expect(h.actor.getSnapshot().value).toBe("idleStopping");
    expect(h.signals.at(-1)).toEqual({ type: "stopping", sessionId: "ses_1", reason: "idle" });
    expect(h.stops).toEqual(["ses_1"]);
    // The provider's own word ends it.
    h.actor.send({ type: "STOPPED", message: null });
    expect(h.actor.getSnapshot().value).toBe("stopped");
    expect(statuses(h.records)).toEqual(["stopped"]);
  });

  it("is never stopped while claimed: the deadline starts again when the last claim is released", async () => {
    const h = openSession();
    await started(h);
    await vi.advanceTimersByTimeAsync(IDLE_MS / 2);
    h.actor.send({ type: "CLAIM" });
    h.actor.send({ type: "CLAIM" });
    expect(h.actor.getSnapshot().value).toBe("running");
    await vi.advanceTimersByTimeAsync(IDLE_MS * 3);
    h.actor.send({ type: "RELEASE" });
    expect(h.actor.getSnapshot().value).toBe("running");
    h.actor.send({ type: "RELEASE" });
    expect(h.actor.getSnapshot().value).toEqual({ ready: "countingDown" });
    expect(statuses(h.records)).toEqual(["running", "ready"]);
    await vi.advanceTimersByTimeAsync(IDLE_MS - 1);
    expect(h.stops).toEqual([]);
    await vi.advanceTimersByTimeAsync(1);
    expect(h.stops).toEqual(["ses_1"]);
  });

  it("with idle release turned off, it waits for turns for ever", async () => {
    const h = openSession({ idleMs: null });
    await started(h);
    expect(h.actor.getSnapshot().value).toEqual({ ready: "held" });
    await vi.advanceTimersByTimeAsync(10 * IDLE_MS);
    expect(h.stops).toEqual([]);
  });

  it("restored from a persisted snapshot, it stops at the deadline it had, not a fresh one", async () => {
    const first = openSession();
    await started(first);
    await vi.advanceTimersByTimeAsync(IDLE_MS / 2);
    const persisted = first.actor.getPersistedSnapshot();
    first.actor.stop();
    const h = openSession({}, persisted);
    h.actor.send({ type: "RESTORED" });
    await vi.advanceTimersByTimeAsync(IDLE_MS / 2 - 1);
    expect(h.stops).toEqual([]);
    await vi.advanceTimersByTimeAsync(1);
    expect(h.stops).toEqual(["ses_1"]);
  });

  it(
    "retires when its thread asks for a model the provider cannot switch to in session; " + "keeps running otherwise",
    async () => {
      const switching = openSession();
      await started(switching);
      switching.actor.send({ type: "USE_SETTINGS", model: "model-b", runtimeMode: DEFAULT_RUNTIME_MODE });
      expect(switching.actor.getSnapshot().value).toEqual({ ready: "countingDown" });

      const h = openSession({ declared: noSwitch });
      await started(h, noSwitch);
      h.actor.send({ type: "USE_SETTINGS", model: "model-a", runtimeMode: DEFAULT_RUNTIME_MODE });
      expect(h.actor.getSnapshot().value).toEqual({ ready: "countingDown" });
      h.actor.send({ type: "USE_SETTINGS", model: "model-b", runtimeMode: DEFAULT_RUNTIME_MODE });
      expect(h.actor.getSnapshot().value).toBe("retiring");
      expect(h.signals.at(-1)).toEqual({ type: "stopping", sessionId: "ses_1", reason: "retired" });
      await settled();
      expect(h.stops).toEqual(["ses_1"]);
    },
  );

  it("asked to retire while a turn uses it, it retires once the turn gives it back, never under the turn", async () => {
    const h = openSession({ declared: noSwitch });
    await started(h, noSwitch);
    h.actor.send({ type: "CLAIM" });
    h.actor.send({ type: "USE_SETTINGS", model: "model-b", runtimeMode: DEFAULT_RUNTIME_MODE });
    expect(h.actor.getSnapshot().value).toBe("running");
    h.actor.send({ type: "CLAIM" });
    h.actor.send({ type: "RELEASE" });
    expect(h.actor.getSnapshot().value).toBe("running");
    expect(h.stops).toEqual([]);
    h.actor.send({ type: "RELEASE" });
    expect(h.actor.getSnapshot().value).toBe("retiring");
    await settled();
    expect(h.stops).toEqual(["ses_1"]);
  });

  it("asked to retire while still starting, it retires as soon as it started (its start still recorded)", async () => {
    const h = openSession({ declared: noSwitch });
    h.actor.send({ type: "USE_SETTINGS", model: "model-b", runtimeMode: DEFAULT_RUNTIME_MODE });
    await started(h, noSwitch);
    expect(h.records[0]).toMatchObject({ type: "session.started" });
    expect(h.actor.getSnapshot().value).toBe("retiring");
    expect(h.stops).toEqual(["ses_1"]);
  });

  it("ends in error when the provider says the session failed, whatever it was doing", async () => {
    const h = openSession();
    await started(h);
    h.actor.send({ type: "CLAIM" });
    h.actor.send({ type: "FAILED", message: "host exited" });
    expect(h.actor.getSnapshot().value).toBe("error");
    expect(h.actor.getSnapshot().context.lastError).toBe("host exited");
    expect(statuses(h.records)).toEqual(["running", "error"]);
  });
});
