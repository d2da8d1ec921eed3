import { describe, expect, it } from "vitest";
import {
  createScriptedAdapter,
  defineAdapter,
  fullCapabilities,
  type ProviderAdapter,
  type ProviderCapabilities,
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
