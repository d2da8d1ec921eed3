import { afterEach, beforeEach, describe, expect, it, vi } from "vitest";
import { createActor } from "xstate";
import { defineCapabilities, fullCapabilities, type ProviderCapabilities } from "../../src/capabilities/index.js";
import type { DynamicToolDefinition } from "../../src/adapters/contract.js";
import { DEFAULT_RUNTIME_MODE, type RuntimeMode } from "../../src/domain/entities.js";
import type { DomainEvent } from "../../src/domain/events.js";
import { sessionMachine, sessionSlot } from "../../src/machines/session.js";
import { IDLE_MS, openSession, settled, type SessionHarness } from "./sessionHarness.js";

/**
 * The session machine's decisions that the lifecycle suite (session.test.ts) leaves open, each
 * pinned by what the specification says rather than by what the code does (issue 14, mutation
 * testing): what a session is started with (the capability seed: dynamic tools only where the
 * provider calls tools back), the session-wide degradations its announced record implies (one
 * per missing planning or tool capability), recovery taking up a session that outlived the
 * runtime (domain model: startup recovery, `pendingRequestsSurviveRestart`), and a new session
 * for a model or runtime mode the provider cannot switch in session (capability seed: "if model
 * switching is unsupported, start a new provider session"; the same for the runtime mode).
 * Capability records are written field by field from the seed, never through src predicates.
 */

const PLAN_MODE: RuntimeMode = { interaction: "plan", approvals: "on_request" };
const NO_APPROVALS_MODE: RuntimeMode = { interaction: "default", approvals: "never" };
const TOOL: DynamicToolDefinition = {
  name: "lookup_ticket",
  description: "Look a ticket up",
  inputSchema: { type: "object" },
};

/** Every capability, tool callbacks included (the full preset leaves them off). */
const CALLS_TOOLS_BACK = defineCapabilities({ tools: { supportsDynamicToolCallbacks: true } });

/** A session per thread (the provider cannot host several threads), with the given session fields. */
function perThread(sessions: Partial<ProviderCapabilities["sessions"]>): ProviderCapabilities {
  return defineCapabilities({ sessions: { supportsMultipleProviderThreadsPerSession: false, ...sessions } });
}

async function announce(h: SessionHarness, capabilities: ProviderCapabilities, hostGeneration = 3): Promise<void> {
  h.provider.resolve({ capabilities, hostGeneration });
  await settled();
}

const policies = (records: DomainEvent[]) =>
  records.flatMap((r) => (r.type === "policy.applied" ? [{ policy: r.policy, detail: r.detail }] : []));
const states = (records: DomainEvent[]) =>
  records.flatMap((r) => (r.type === "session.state" ? [{ status: r.status, message: r.message }] : []));
const state = (h: SessionHarness) => h.actor.getSnapshot().value;

beforeEach(() => {
  vi.useFakeTimers({ toFake: ["setTimeout", "clearTimeout", "Date"] });
  vi.setSystemTime(1_000_000);
});
afterEach(() => vi.useRealTimers());

describe("session start: what the provider is asked for", () => {
  it("starts with the session's id, working directory, model, runtime mode and sandbox", () => {
    const h = openSession({ cwd: "/repo", model: "model-x", runtimeMode: PLAN_MODE, sandbox: "read-only" });
    expect(h.startInputs).toEqual([
      { sessionId: "ses_1", cwd: "/repo", model: "model-x", runtimeMode: PLAN_MODE, sandbox: "read-only" },
    ]);
    expect(h.reattachInputs).toEqual([]);
  });

  it("offers the registered tools where the declared record says the provider calls tools back", () => {
    const h = openSession({ tools: [TOOL], declared: CALLS_TOOLS_BACK });
    expect(h.startInputs[0]!.tools).toEqual([TOOL]);
  });

  it("offers no tools where the provider calls none back, nor an empty list when none are registered", () => {
    const refused = openSession({
      tools: [TOOL],
      declared: defineCapabilities({ tools: { supportsDynamicToolCallbacks: false } }),
    });
    const empty = openSession({ tools: [], declared: CALLS_TOOLS_BACK });
    const unset = openSession({ declared: CALLS_TOOLS_BACK });
    const inputs = [refused, empty, unset].map((h) => h.startInputs[0]!);
    expect(inputs.map((input) => "tools" in input)).toEqual([false, false, false]);
  });
});

describe("session start: session-wide degradations from the announced record", () => {
  it("a provider with every planning capability and structured approvals degrades nothing", async () => {
    const h = openSession({ tools: [TOOL], declared: CALLS_TOOLS_BACK });
    await announce(h, CALLS_TOOLS_BACK);
    expect(policies(h.records)).toEqual([]);
  });

  it("each missing planning capability is its own named degradation, naming the session and its target", async () => {
    const h = openSession();
    await announce(
      h,
      defineCapabilities({
        planning: {
          emitsPlanUpdated: false,
          emitsTodoList: false,
          emitsProposedPlan: false,
          supportsStructuredQuestions: false,
        },
      }),
    );
    const applied = policies(h.records);
    expect(applied.map((p) => p.policy)).toEqual([
      "no_plan_artifacts",
      "no_todo_artifacts",
      "no_proposed_plans",
      "questions_as_text",
    ]);
    for (const { detail } of applied) expect(detail).toMatch(/ses_1 \(alpha\)/);
  });

  it("follows the record the session announced, not the one the adapter declared", async () => {
    const h = openSession({ declared: defineCapabilities({ planning: { emitsTodoList: false } }) });
    await announce(h, defineCapabilities({ planning: { emitsProposedPlan: false } }));
    expect(policies(h.records).map((p) => p.policy)).toEqual(["no_proposed_plans"]);
  });

  it("registered tools a provider cannot call back are refused by name, once, at the start", async () => {
    const noCallbacks = defineCapabilities({ tools: { supportsDynamicToolCallbacks: false } });
    const h = openSession({ declared: noCallbacks, tools: [TOOL, { ...TOOL, name: "open_ticket" }] });
    await announce(h, noCallbacks);
    expect(policies(h.records)).toEqual([
      {
        policy: "dynamic_tools_unsupported",
        detail: expect.stringMatching(/ses_1 \(alpha\).*lookup_ticket, open_ticket/),
      },
    ]);
  });

  it("without registered tools, a provider that calls none back degrades nothing", async () => {
    const noCallbacks = defineCapabilities({ tools: { supportsDynamicToolCallbacks: false } });
    const h = openSession({ declared: noCallbacks });
    await announce(h, noCallbacks);
    expect(policies(h.records)).toEqual([]);
  });

  it("a provider with even one kind of structured approval is not left to the sandbox", async () => {
    const h = openSession();
    await announce(
      h,
      defineCapabilities({
        approvals: {
          supportsCommandApproval: false,
          supportsFileReadApproval: false,
          supportsApplyPatchApproval: false,
        },
      }),
    );
    expect(policies(h.records)).toEqual([]);
  });
});

describe("session start failures", () => {
  it("a provider that rejects with something other than an Error still has it logged, as text", async () => {
    const h = openSession();
    h.provider.reject("host refused the handshake");
    await settled();
    expect(states(h.records)).toEqual([{ status: "error", message: "host refused the handshake" }]);
    expect(h.actor.getSnapshot().context.lastError).toBe("host refused the handshake");
  });
});

describe("recovery: a session taken up in the host that outlived the runtime", () => {
  it("is re-attached by its id, never started again", () => {
    const h = openSession({ reattach: true });
    expect(state(h)).toBe("reattaching");
    expect(h.reattachInputs).toEqual([{ sessionId: "ses_1" }]);
    expect(h.startInputs).toEqual([]);
  });

  it("a session not marked for re-attachment is started", () => {
    const h = openSession({ reattach: false });
    expect([state(h), h.reattachInputs.length, h.startInputs.length]).toEqual(["starting", 0, 1]);
  });

  it(
    "once re-attached it is ready again in the host generation it names: " +
      "no second start record, no degradations said twice, and its idle deadline armed",
    async () => {
      const h = openSession({ reattach: true });
      const caps = defineCapabilities({ planning: { emitsTodoList: false } });
      await announce(h, caps, 7);
      expect(h.records).toEqual([
        {
          type: "session.state",
          sessionId: "ses_1",
          providerTarget: "alpha",
          status: "ready",
          message: expect.stringContaining("generation 7"),
        },
      ]);
      expect(h.signals).toEqual([{ type: "ready", sessionId: "ses_1", capabilities: caps, hostGeneration: 7 }]);
      expect(h.actor.getSnapshot().context).toMatchObject({ capabilities: caps, hostGeneration: 7 });
      expect(state(h)).toEqual({ ready: "countingDown" });
    },
  );

  it("a session the provider no longer holds ends in error, and its callers get the provider's error", async () => {
    const h = openSession({ reattach: true });
    const error = Object.assign(new Error("no such session"), { code: "resume_failed" });
    h.provider.reject(error);
    await settled();
    expect(state(h)).toBe("error");
    expect(h.signals).toEqual([{ type: "startFailed", sessionId: "ses_1", error }]);
    expect(states(h.records)).toEqual([{ status: "error", message: "no such session" }]);
  });
});

describe("a new session for settings the provider cannot switch in session", () => {
  it("a provider that cannot switch its runtime mode retires the session for another mode", async () => {
    const caps = perThread({ supportsRuntimeModeSwitchInSession: false });
    const h = openSession({ declared: caps });
    await announce(h, caps);
    h.actor.send({ type: "USE_SETTINGS", model: "model-a", runtimeMode: PLAN_MODE });
    expect(state(h)).toBe("retiring");
    expect(h.signals.at(-1)).toEqual({ type: "stopping", sessionId: "ses_1", reason: "retired" });
  });

  it("the same mode (equal, not the same object) and the same model keep the session", async () => {
    const caps = perThread({ supportsRuntimeModeSwitchInSession: false, supportsModelSwitchInSession: false });
    const h = openSession({ declared: caps });
    await announce(h, caps);
    h.actor.send({ type: "USE_SETTINGS", model: "model-a", runtimeMode: { ...DEFAULT_RUNTIME_MODE } });
    expect(state(h)).toEqual({ ready: "countingDown" });
  });

  it("another approval policy is another mode too", async () => {
    const caps = perThread({ supportsRuntimeModeSwitchInSession: false });
    const h = openSession({ declared: caps });
    await announce(h, caps);
    h.actor.send({ type: "USE_SETTINGS", model: "model-a", runtimeMode: NO_APPROVALS_MODE });
    expect(state(h)).toBe("retiring");
  });

  it(
    "a provider that switches modes in session keeps it for another mode, " +
      "and one that switches models for another model",
    async () => {
      const modes = perThread({ supportsModelSwitchInSession: false, supportsRuntimeModeSwitchInSession: true });
      const h = openSession({ declared: modes });
      await announce(h, modes);
      h.actor.send({ type: "USE_SETTINGS", model: "model-a", runtimeMode: PLAN_MODE });
      expect(state(h)).toEqual({ ready: "countingDown" });

      const models = perThread({ supportsModelSwitchInSession: true, supportsRuntimeModeSwitchInSession: false });
      const m = openSession({ declared: models });
      await announce(m, models);
      m.actor.send({ type: "USE_SETTINGS", model: "model-b", runtimeMode: DEFAULT_RUNTIME_MODE });
      expect(state(m)).toEqual({ ready: "countingDown" });
    },
  );

  it("a session shared by the target's threads is never retired for one thread's settings", async () => {
    const shared = defineCapabilities({
      sessions: { supportsModelSwitchInSession: false, supportsRuntimeModeSwitchInSession: false },
    });
    const h = openSession({ declared: shared });
    await announce(h, shared);
    h.actor.send({ type: "USE_SETTINGS", model: "model-b", runtimeMode: PLAN_MODE });
    expect(state(h)).toEqual({ ready: "countingDown" });
  });

  it("once announced, the session's own record decides, not the adapter's declaration", async () => {
    const declared = perThread({ supportsModelSwitchInSession: false });
    const h = openSession({ declared });
    await announce(h, perThread({ supportsModelSwitchInSession: true }));
    h.actor.send({ type: "USE_SETTINGS", model: "model-b", runtimeMode: DEFAULT_RUNTIME_MODE });
    expect(state(h)).toEqual({ ready: "countingDown" });

    const d = openSession({ declared: perThread({ supportsModelSwitchInSession: true }) });
    await announce(d, declared);
    d.actor.send({ type: "USE_SETTINGS", model: "model-b", runtimeMode: DEFAULT_RUNTIME_MODE });
    expect(state(d)).toBe("retiring");
  });
});

describe("a session machine not wired to a provider target", () => {
  it.each([
    ["start", {}],
    ["re-attach", { reattach: true }],
  ])("never reports a session it was not given the means to %s", async (_, overrides) => {
    const signals: string[] = [];
    const actor = createActor(sessionMachine, {
      input: {
        sessionId: "ses_1",
        providerTarget: "alpha",
        provider: "scripted",
        sandbox: "workspace-write",
        cwd: "/work",
        model: null,
        runtimeMode: DEFAULT_RUNTIME_MODE,
        declared: fullCapabilities(),
        idleMs: IDLE_MS,
        ...overrides,
      },
    });
    actor.on("*", (emitted) => signals.push(emitted.type));
    actor.start();
    await settled();
    expect(signals).not.toContain("ready");
    expect(signals).toContain("startFailed");
  });
});

describe("claims and statuses", () => {
  it(
    "every claim is counted: two turns claim, one gives it back, a third claims, " +
      "one more gives back: still in use",
    async () => {
      const h = openSession();
      await announce(h, fullCapabilities());
      h.actor.send({ type: "CLAIM" });
      h.actor.send({ type: "CLAIM" });
      h.actor.send({ type: "RELEASE" });
      h.actor.send({ type: "CLAIM" });
      h.actor.send({ type: "RELEASE" });
      expect(state(h)).toBe("running");
      h.actor.send({ type: "RELEASE" });
      expect(state(h)).toEqual({ ready: "countingDown" });
    },
  );

  it("running and ready carry no message; a stop keeps the provider's message and is no error", async () => {
    const h = openSession();
    await announce(h, fullCapabilities());
    h.actor.send({ type: "CLAIM" });
    h.actor.send({ type: "RELEASE" });
    h.actor.send({ type: "STOPPED", message: "provider shut down" });
    expect(states(h.records)).toEqual([
      { status: "running", message: null },
      { status: "ready", message: null },
      { status: "stopped", message: "provider shut down" },
    ]);
    expect(h.actor.getSnapshot().context.lastError).toBeNull();
  });
});

describe("which session a thread's turn runs in (its registry slot)", () => {
  const slot = (caps: ProviderCapabilities, threadId: string, model: string | null, mode: RuntimeMode) =>
    sessionSlot(caps, threadId, model, mode);

  it("a provider that hosts many threads and switches model and mode in session has one session per target", () => {
    const shared = fullCapabilities();
    const a = slot(shared, "thr_1", "model-a", DEFAULT_RUNTIME_MODE);
    const b = slot(shared, "thr_2", "model-b", PLAN_MODE);
    expect(a).toEqual(b);
    expect(a.owner).toBe("");
  });

  it("otherwise a session per thread, owned by that thread", () => {
    const caps = perThread({});
    const a = slot(caps, "thr_1", "model-a", DEFAULT_RUNTIME_MODE);
    expect(a.owner).toBe("thr_1");
    expect(a.key).not.toBe(slot(caps, "thr_2", "model-a", DEFAULT_RUNTIME_MODE).key);
    expect(a.key).toBe(slot(caps, "thr_1", "model-b", PLAN_MODE).key);
  });

  it("a session per model where the model cannot be switched in session, and per mode likewise", () => {
    const byModel = defineCapabilities({ sessions: { supportsModelSwitchInSession: false } });
    const key = (caps: ProviderCapabilities, model: string | null, mode: RuntimeMode) =>
      slot(caps, "thr_1", model, mode).key;
    expect(key(byModel, "model-a", DEFAULT_RUNTIME_MODE)).not.toBe(key(byModel, "model-b", DEFAULT_RUNTIME_MODE));
    expect(key(byModel, "model-a", DEFAULT_RUNTIME_MODE)).toBe(key(byModel, "model-a", PLAN_MODE));
    const byMode = defineCapabilities({ sessions: { supportsRuntimeModeSwitchInSession: false } });
    const modes = [DEFAULT_RUNTIME_MODE, PLAN_MODE, NO_APPROVALS_MODE].map((mode) => key(byMode, "model-a", mode));
    expect(new Set(modes).size).toBe(3);
    expect(key(byMode, "model-a", { ...PLAN_MODE })).toBe(modes[1]);
    expect(key(byMode, "model-a", PLAN_MODE)).toBe(key(byMode, "model-b", PLAN_MODE));
  });

  it("no two different threads and models share a slot, however their names run together", () => {
    const caps = perThread({ supportsModelSwitchInSession: false });
    expect(slot(caps, "thr_1", "2-model", DEFAULT_RUNTIME_MODE).key).not.toBe(
      slot(caps, "thr_12", "-model", DEFAULT_RUNTIME_MODE).key,
    );
  });
});
