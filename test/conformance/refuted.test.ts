import { describe, expect, it } from "vitest";
import {
  createScriptedAdapter,
  fullCapabilities,
  type ProviderAdapter,
  type ScriptedAdapterOptions,
} from "../../src/index.js";
import {
  assertConformance,
  runConformance,
  scriptedWorld,
  type ConformanceReport,
} from "../../src/conformance/index.js";

/**
 * The suite catches an adapter that claims more than it does: the scripted provider, wrapped to declare a capability
 * it does not honour, has that field refuted (with what was observed) and fails the report.
 */

function verdictOf(report: ConformanceReport, field: string) {
  return report.fields.find((f) => f.field === field)!;
}

/** The adapter with some methods replaced (whatever the adapter is made of: an object, a class instance). */
function overriding(adapter: ProviderAdapter, overrides: Partial<ProviderAdapter>): ProviderAdapter {
  return new Proxy(adapter, {
    get(target, property) {
      if (property in overrides) return overrides[property as keyof ProviderAdapter];
      const value = Reflect.get(target, property, target) as unknown;
      return typeof value === "function" ? (value as (...a: unknown[]) => unknown).bind(target) : value;
    },
  });
}

async function conformanceOf(name: string, lie: (adapter: ProviderAdapter) => ProviderAdapter) {
  const adapter = (options: ScriptedAdapterOptions) => lie(createScriptedAdapter(options));
  const report = await runConformance({ world: scriptedWorld({ name, adapter }) });
  console.log(`${report.summary}\n${report.table}`);
  return report;
}

describe("conformance: a lying adapter is caught", () => {
  it("declares active steering, its steerRun resolves without steering: supportsActiveSteering refuted", async () => {
    const report = await conformanceOf("steers-nothing", (adapter) =>
      overriding(adapter, { steerRun: async () => {} }),
    );
    const steering = verdictOf(report, "turns.supportsActiveSteering");
    expect(steering.declared).toBe(true);
    expect(steering.verdict).toBe("refuted");
    expect(steering.detail).toContain("the provider's turn saw []");
    expect(report.refuted).toBe(1);
    expect(report.ok).toBe(false);
    expect(() => assertConformance(report)).toThrow(/turns\.supportsActiveSteering \(declared true\)/);
    expect(report.summary).toMatch(
      /^conformance: steers-nothing declared \d+, verified \d+, refuted 1, not exercisable/,
    );
    // The rest of what it declares still holds.
    expect(verdictOf(report, "turns.supportsInterrupt").verdict).toBe("verified");
  }, 120_000);

  it("declares native forks, and its fork is a fresh thread without the history: canForkThread refuted", async () => {
    const report = await conformanceOf("forgetful-fork", (adapter) =>
      overriding(adapter, {
        // A thread of the provider's, but an empty one: the conversation is lost.
        forkThread: ({ sessionId, cwd }) => adapter.ensureProviderThread({ sessionId, cwd }),
      }),
    );
    // Every fork it declares (of the whole thread, from a turn, of a subagent's thread) forgets.
    const forks = [
      "threads.canForkThread",
      "threads.canForkFromTurn",
      "threads.canForkFromSubagentThread",
      "subagents.canForkSubagentThread",
    ];
    for (const field of forks) {
      const fork = verdictOf(report, field);
      expect(fork.verdict).toBe("refuted");
      expect(fork.detail).toContain("the provider had []");
    }
    expect(report.refuted).toBe(forks.length);
    expect(report.ok).toBe(false);
    expect(verdictOf(report, "threads.canRollbackThread").verdict).toBe("verified");
  }, 120_000);

  it("declares the full record at session start, honours less: each field it does not honour refuted", async () => {
    const declared = fullCapabilities();
    const adapter = (options: ScriptedAdapterOptions) => {
      // The provider behaves without file-change approvals and todo lists, and says it has them.
      const honoured = { approvals: { supportsFileChangeApproval: false }, planning: { emitsTodoList: false } };
      const real = createScriptedAdapter({ ...options, capabilities: honoured });
      return overriding(real, {
        getCapabilities: () => declared,
        startSession: async (input) => ({ ...(await real.startSession(input)), capabilities: declared }),
      });
    };
    const report = await runConformance({ world: scriptedWorld({ name: "overclaims", adapter }) });
    console.log(`${report.summary}\n${report.table}`);
    expect(report.fields.filter((f) => f.verdict === "refuted").map((f) => f.field)).toEqual([
      "approvals.supportsFileChangeApproval",
      "planning.emitsTodoList",
    ]);
    expect(verdictOf(report, "approvals.supportsFileChangeApproval").detail).toContain("no file_change approval");
    expect(report.ok).toBe(false);
  }, 120_000);
});
