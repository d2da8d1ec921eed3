import { describe, expect, expectTypeOf, it } from "vitest";
import type { ClaudeAdapter } from "../../src/adapters/claude/adapter.js";
import { claudeCapabilities, type ClaudeCapabilities } from "../../src/adapters/claude/capabilities.js";
import type { CodexAdapter } from "../../src/adapters/codex/adapter.js";
import { codexCapabilities, type CodexCapabilities } from "../../src/adapters/codex/capabilities.js";
import {
  createScriptedAdapter,
  createScriptedHostAdapter,
  defineAdapter,
  fullCapabilities,
  minimalCapabilities,
  type FullCapabilities,
  type HostedCapabilities,
  type ProviderAdapter,
  type ProviderCapabilities,
  type RequiredMethods,
  type ScriptedAdapter,
  type ScriptedHostAdapter,
  type Serving,
} from "../../src/index.js";
import { openTestRuntime, override } from "../support/runtime.js";

/**
 * A declared capability is linked to the method that serves it (`SERVED_BY`): a record that claims one without its
 * method does not type-check where the record is literal, fails `defineAdapter`, fails `createRuntime` (the record an
 * adapter declares), and fails the session (the record a session announces at its handshake), each with a typed error.
 */

/** A scripted adapter that cannot steer, and a record that says it can (literally `true`). */
function steeringLiar() {
  const base = createScriptedAdapter({ capabilities: { turns: { supportsActiveSteering: false } } });
  const full = fullCapabilities();
  const claims = { ...full, turns: { ...full.turns, supportsActiveSteering: true as const } };
  return { base, claims };
}

describe("a capability declared without the method that serves it", () => {
  it("does not type-check, and fails defineAdapter, typed", () => {
    const { base, claims } = steeringLiar();
    const { steerRun: _none, ...methods } = base;
    const wrong = { ...methods, provider: base.provider, getCapabilities: () => claims };
    // @ts-expect-error supportsActiveSteering is declared true: steerRun is required
    expect(() => defineAdapter(wrong)).toThrow(
      expect.objectContaining({
        code: "invalid_input",
        details: expect.objectContaining({ field: "capabilities.turns.supportsActiveSteering" }),
      }),
    );
    // With its method, the same record type-checks and passes.
    const right = defineAdapter({ ...wrong, steerRun: async () => undefined });
    expect(right.getCapabilities().turns.supportsActiveSteering).toBe(true);
  });

  it("fails createRuntime, naming the provider and the capability", async () => {
    const { base, claims } = steeringLiar();
    const adapter: ProviderAdapter = override(base, { getCapabilities: () => claims as ProviderCapabilities });
    await expect(openTestRuntime({ s: adapter })).rejects.toMatchObject({
      code: "invalid_input",
      details: { field: "providers.s.capabilities.turns.supportsActiveSteering" },
    });
  });

  it("announced by a session at its handshake: the session fails, protocol_error, and so does the run", async () => {
    const { base, claims } = steeringLiar();
    const adapter = override(base, {
      startSession: async (input) => ({ ...(await base.startSession(input)), capabilities: claims }),
    });
    const { rt, cleanup } = await openTestRuntime({ s: adapter });
    try {
      const { threadId } = await rt.createThread({ providerTarget: "s" });
      const run = await rt.waitForRun((await rt.sendMessage({ threadId, text: "go" })).runId);
      expect(run.status).toBe("failed");
      expect(run.failure).toMatchObject({ failureClass: "protocol_error" });
      expect(run.failure?.message).toContain("turns.supportsActiveSteering (no steerRun)");
    } finally {
      await cleanup();
    }
  });
});

/** Whether `defineAdapter` takes an adapter of type `A`: it has the method serving each capability its record claims */
type Accepted<A> = A extends { getCapabilities(): infer C } ? (A extends Serving<C> ? true : false) : never;

/** For each method an adapter type's record requires: whether that adapter without it would be taken. */
type WithoutEach<A> = A extends { getCapabilities(): infer C }
  ? { [M in RequiredMethods<C>]: Accepted<Omit<A, M>> }
  : never;

/** The error `defineAdapter` throws for a record claiming `field` without its method. */
const unserved = (field: string) =>
  expect.objectContaining({ code: "invalid_input", details: expect.objectContaining({ field }) });

/**
 * The shipped adapters' records are typed as they declare them (literal `true`/`false` for each field a method
 * serves), so the link applies to them: each adapter type requires the methods its record claims, and the same adapter
 * without one of them does not type-check through `defineAdapter`.
 */
describe("the shipped adapters, held to their records by type", () => {
  it("Codex: every supported version's record claims steering, snapshot, rollback and fork", () => {
    expectTypeOf(codexCapabilities).returns.toEqualTypeOf<CodexCapabilities>();
    expectTypeOf<CodexCapabilities["turns"]["supportsActiveSteering"]>().toEqualTypeOf<true>();
    expectTypeOf<CodexCapabilities["context"]["canGenerateSummaries"]>().toEqualTypeOf<false>();
    expectTypeOf<CodexCapabilities["sessions"]["pendingRequestsSurviveRestart"]>().toEqualTypeOf<false>();
    expectTypeOf<RequiredMethods<CodexCapabilities>>().toEqualTypeOf<
      "steerRun" | "readThreadSnapshot" | "rollbackThread" | "forkThread"
    >();
    expectTypeOf<ReturnType<CodexAdapter["getCapabilities"]>>().toEqualTypeOf<CodexCapabilities>();
    expectTypeOf<CodexAdapter["steerRun"]>().toEqualTypeOf<NonNullable<ProviderAdapter["steerRun"]>>();
    expectTypeOf<Accepted<CodexAdapter>>().toEqualTypeOf<true>();
    expectTypeOf<WithoutEach<CodexAdapter>>().toEqualTypeOf<{
      steerRun: false;
      readThreadSnapshot: false;
      rollbackThread: false;
      forkThread: false;
    }>();

    // Codex's record on an adapter without steerRun: not a Codex adapter, by type and at once.
    const { steerRun: _none, ...noSteer } = createScriptedAdapter();
    const codexLike = { ...noSteer, provider: "codex", getCapabilities: () => codexCapabilities("0.171.0") };
    // @ts-expect-error the Codex record claims active steering: steerRun is required
    expect(() => defineAdapter(codexLike)).toThrow(unserved("capabilities.turns.supportsActiveSteering"));
    // Plan mode's record differs in planning only: the same methods are required.
    const planLike = { ...noSteer, provider: "codex", getCapabilities: () => codexCapabilities("0.172.0", "plan") };
    // @ts-expect-error the same in Plan mode
    expect(() => defineAdapter(planLike)).toThrow(unserved("capabilities.turns.supportsActiveSteering"));
  });

  it("Claude: its record claims rollback and fork", () => {
    expectTypeOf(claudeCapabilities).returns.toEqualTypeOf<ClaudeCapabilities>();
    expectTypeOf<ClaudeCapabilities["turns"]["supportsActiveSteering"]>().toEqualTypeOf<false>();
    expectTypeOf<RequiredMethods<ClaudeCapabilities>>().toEqualTypeOf<"rollbackThread" | "forkThread">();
    expectTypeOf<ReturnType<ClaudeAdapter["getCapabilities"]>>().toEqualTypeOf<ClaudeCapabilities>();
    expectTypeOf<Accepted<ClaudeAdapter>>().toEqualTypeOf<true>();
    expectTypeOf<WithoutEach<ClaudeAdapter>>().toEqualTypeOf<{ rollbackThread: false; forkThread: false }>();

    const { forkThread: _none, ...noFork } = createScriptedAdapter();
    const claudeLike = { ...noFork, provider: "claude", getCapabilities: () => claudeCapabilities() };
    // @ts-expect-error the Claude record claims forks: forkThread is required
    expect(() => defineAdapter(claudeLike)).toThrow(unserved("capabilities.threads.canForkThread"));
    // Steering it does not claim: an adapter without steerRun is a Claude adapter.
    const { steerRun: _steer, ...noSteer } = createScriptedAdapter();
    const claudeNoSteer = defineAdapter({
      ...noSteer,
      provider: "claude",
      getCapabilities: () => claudeCapabilities(),
    });
    expect("steerRun" in claudeNoSteer).toBe(false);
  });

  it("scripted, in process: typed with the record it is given", () => {
    // No record: fullCapabilities()', whose served fields are literal.
    expectTypeOf(createScriptedAdapter()).toEqualTypeOf<ScriptedAdapter<{}>>();
    expectTypeOf(createScriptedAdapter().getCapabilities()).toEqualTypeOf<FullCapabilities>();
    expectTypeOf<RequiredMethods<FullCapabilities>>().toEqualTypeOf<
      | "steerRun"
      | "readThreadSnapshot"
      | "rollbackThread"
      | "forkThread"
      | "summarize"
      | "waitForSubagent"
      | "closeSubagent"
    >();
    expectTypeOf<WithoutEach<ScriptedAdapter<{}>>>().toEqualTypeOf<{
      steerRun: false;
      readThreadSnapshot: false;
      rollbackThread: false;
      forkThread: false;
      summarize: false;
      waitForSubagent: false;
      closeSubagent: false;
    }>();

    // Overrides: those they set are what they say.
    const steers = createScriptedAdapter({ capabilities: { turns: { supportsActiveSteering: true } } });
    expectTypeOf(steers.steerRun).toEqualTypeOf<NonNullable<ProviderAdapter["steerRun"]>>();
    const still = createScriptedAdapter({ capabilities: { turns: { supportsActiveSteering: false } } });
    expectTypeOf(still.steerRun).toEqualTypeOf<ProviderAdapter["steerRun"]>();
    expect(still.steerRun).toBeUndefined();
    expectTypeOf(still.forkThread).toEqualTypeOf<NonNullable<ProviderAdapter["forkThread"]>>();

    // A full record given literally: its own literals (minimalCapabilities() is typed wide: nothing claimed there).
    const min = minimalCapabilities();
    const onlySteers = createScriptedAdapter({
      capabilities: { ...min, turns: { ...min.turns, supportsActiveSteering: true } },
    });
    expectTypeOf<RequiredMethods<ReturnType<typeof onlySteers.getCapabilities>>>().toEqualTypeOf<"steerRun">();
    expect(typeof onlySteers.steerRun).toBe("function");

    // A record known only by its schema type claims nothing: its methods stay optional.
    const wide: ProviderCapabilities = fullCapabilities();
    const unknown = createScriptedAdapter({ capabilities: wide });
    expectTypeOf<RequiredMethods<ReturnType<typeof unknown.getCapabilities>>>().toEqualTypeOf<never>();
    expectTypeOf(unknown.steerRun).toEqualTypeOf<ProviderAdapter["steerRun"]>();

    // Without the method its record claims, it does not type-check through defineAdapter.
    const { steerRun: _none, ...noSteer } = steers;
    // @ts-expect-error the record claims active steering: steerRun is required
    expect(() => defineAdapter(noSteer)).toThrow(unserved("capabilities.turns.supportsActiveSteering"));

    // In process, nothing serves reattachSession: a record claiming restart survival is refused.
    expect(() =>
      // @ts-expect-error the in-process provider cannot keep pending requests across a restart
      createScriptedAdapter({ capabilities: { sessions: { pendingRequestsSurviveRestart: true } } }),
    ).toThrow(unserved("capabilities.sessions.pendingRequestsSurviveRestart"));
    // An unknown field below a group's top level is refused by type too (and by the schema).
    expect(() =>
      // @ts-expect-error turns has no supportsTimeTravel
      createScriptedAdapter({ capabilities: { turns: { supportsTimeTravel: true } } }),
    ).toThrow(expect.objectContaining({ code: "invalid_input" }));
  });

  it("scripted, hosted: typed with the record hostedCapabilities makes of what it is given", async () => {
    expectTypeOf<RequiredMethods<HostedCapabilities<{}>>>().toEqualTypeOf<
      "steerRun" | "readThreadSnapshot" | "rollbackThread" | "forkThread" | "summarize"
    >();
    expectTypeOf<WithoutEach<ScriptedHostAdapter<{}>>>().toEqualTypeOf<{
      steerRun: false;
      readThreadSnapshot: false;
      rollbackThread: false;
      forkThread: false;
      summarize: false;
    }>();

    // Subagent wait and close do not cross the host: never declared, never required, whatever it is given.
    const adapter = createScriptedHostAdapter({ capabilities: { subagents: { canWaitForSubagents: true } } });
    try {
      expectTypeOf(adapter.getCapabilities().subagents.canWaitForSubagents).toEqualTypeOf<false>();
      expectTypeOf(adapter.waitForSubagent).toEqualTypeOf<ProviderAdapter["waitForSubagent"]>();
      expect(adapter.getCapabilities().subagents.canWaitForSubagents).toBe(false);
      const { forkThread: _none, ...noFork } = adapter;
      // @ts-expect-error the hosted record claims forks: forkThread is required
      expect(() => defineAdapter(noFork)).toThrow(unserved("capabilities.threads.canForkThread"));
    } finally {
      await adapter.close();
    }

    // Restart survival is served (reattachSession) where the host may be a socket, and refused elsewhere.
    const survives = { sessions: { pendingRequestsSurviveRestart: true } } as const;
    expectTypeOf<"reattachSession">().toExtend<RequiredMethods<HostedCapabilities<typeof survives>>>();
    expectTypeOf<ScriptedHostAdapter<typeof survives>["reattachSession"]>().toEqualTypeOf<
      NonNullable<ProviderAdapter["reattachSession"]>
    >();
    expect(() =>
      // @ts-expect-error a stdio host dies with the runtime: its pending requests cannot survive a restart
      createScriptedHostAdapter({ transport: "stdio", capabilities: survives }),
    ).toThrow(unserved("capabilities.sessions.pendingRequestsSurviveRestart"));
  });
});
