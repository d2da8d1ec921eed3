import { describe, expect, it } from "vitest";
import type { ProviderAdapter } from "../../src/adapters/contract.js";
import type { ProviderCapabilities } from "../../src/capabilities/schema.js";
import { runConformance } from "../../src/conformance/index.js";
import { expectConforms } from "../conformance/conforms.js";
import { claudeConformanceWorld, codexConformanceWorld, geminiConformanceWorld } from "./worlds.js";

/**
 * The conformance suite on each real ACP agent's declared record, offline against the model simulator: every field
 * the record claims is verified or not exercisable (src/adapters/acp/GAP.md says why), none refuted.
 */
describe("conformance: ACP agents", () => {
  it("gemini: every claimed field verified or not exercisable, none refuted", async () => {
    await expectConforms(geminiConformanceWorld(), 30_000);
  }, 600_000);

  it("claude-agent-acp: every claimed field verified or not exercisable, none refuted", async () => {
    await expectConforms(claudeConformanceWorld(), 30_000);
  }, 600_000);

  it("codex-acp: every claimed field verified or not exercisable, none refuted", async () => {
    await expectConforms(codexConformanceWorld(), 30_000);
  }, 600_000);
});

/** The real adapter, declaring `changes` over the record its agent negotiated (at `getCapabilities` and at start). */
function claiming(changes: Record<string, Record<string, unknown>>) {
  const over = (caps: ProviderCapabilities): ProviderCapabilities => {
    const out = structuredClone(caps) as unknown as Record<string, Record<string, unknown>>;
    for (const [group, fields] of Object.entries(changes)) Object.assign(out[group]!, fields);
    return out as unknown as ProviderCapabilities;
  };
  return (adapter: ProviderAdapter): ProviderAdapter =>
    new Proxy(adapter, {
      get(target, property) {
        if (property === "getCapabilities") return () => over(target.getCapabilities());
        if (property === "startSession")
          return async (input: Parameters<ProviderAdapter["startSession"]>[0]) => {
            const info = await target.startSession(input);
            return { ...info, capabilities: over(info.capabilities) };
          };
        const value = Reflect.get(target, property, target) as unknown;
        return typeof value === "function" ? (value as (...a: unknown[]) => unknown).bind(target) : value;
      },
    });
}

describe("conformance: ACP adapters that claim what their agent does not advertise", () => {
  it("codex-acp said to steer natively: the claim refuted on the real agent", async () => {
    const steering = await runConformance({
      world: codexConformanceWorld({
        name: "codex-acp (claims native steering)",
        wrap: claiming({ turns: { supportsActiveSteering: true, supportsSteeringByInterruptRestart: false } }),
      }),
      fields: ["turns.supportsActiveSteering"],
      timeoutMs: 30_000,
    });
    console.log(steering.summary);
    expect(steering.fields.find((f) => f.field === "turns.supportsActiveSteering")?.verdict).toBe("refuted");
  }, 600_000);
});
