import { describe, expect, it } from "vitest";
import { runConformance, scriptedWorld, type ConformanceReport } from "../../src/conformance/index.js";
import { HONEST, LIES } from "./lies/corpus.js";

/**
 * The suite blames the right field: every lie of the corpus (`lies/corpus.ts`: the scripted provider wrapped to tell
 * exactly one lie about its record) has the field it lies about refuted, and no other; every honest control, wrapped
 * with the same helpers, has nothing refuted. `npx tsx test/conformance/lieReport.ts` prints the same as a table.
 */

const refutedIn = (report: ConformanceReport) =>
  report.fields.filter((f) => f.verdict === "refuted").map((f) => `${f.field}: ${f.detail}`);

/**
 * Fields the seed ties to one behaviour, so that a lie about one is a lie about the other (one method serves both, or
 * one says how reliable the other is): a lie may be refuted on its field's twin beside its own, never elsewhere.
 */
const TWINS: string[][] = [
  ["threads.canReadThreadSnapshot", "checkpointing.providerCanReadConversationSnapshot"],
  ["threads.canRollbackThread", "checkpointing.providerCanRollbackConversation"],
  ["approvals.approvalsHaveNativeRequestIds", "identity.nativeRequestIds"],
  ["turns.emitsTurnCompleted", "turns.terminalStatusQuality"],
  ["sessions.pendingRequestsSurviveRestart", "approvals.approvalCallbacksAreLiveOnly"],
  ["context.canGenerateSummaries", "context.maxRecommendedHandoffChars"],
];
const twinsOf = (field: string) => TWINS.find((pair) => pair.includes(field)) ?? [field];

describe("conformance: runConformance runs the paths asked for", () => {
  it("by the model events a path takes: only interrupts; what no such path reaches, not exercisable", async () => {
    const report = await runConformance({ world: scriptedWorld(), paths: (events) => events.includes("INTERRUPT") });
    expect(report.paths.map((p) => p.events)).toEqual([["HOLD", "INTERRUPT"]]);
    expect(report.fields.find((f) => f.field === "turns.supportsInterrupt")?.verdict).toBe("verified");
    expect(report.fields.find((f) => f.field === "threads.canForkThread")?.verdict).toBe("not exercisable");
  }, 120_000);
});

describe("conformance: each lie of the corpus is refuted on its field, and only there", () => {
  for (const lie of LIES) {
    it(`${lie.name} (${lie.class}): ${lie.field} refuted`, async () => {
      const world = scriptedWorld({ name: lie.name, adapter: lie.adapter, capabilities: lie.capabilities });
      const report = await runConformance({ world, fields: [lie.field] });
      const target = report.fields.find((f) => f.field === lie.field);
      const refuted = report.fields.filter((f) => f.verdict === "refuted").map((f) => f.field);
      expect(target?.verdict, `${lie.field}: ${target?.detail}\n${report.table}`).toBe("refuted");
      expect(
        refuted.filter((f) => !twinsOf(lie.field).includes(f)),
        refutedIn(report).join("\n"),
      ).toEqual([]);
    }, 120_000);
  }
});

describe("conformance: the honest controls of the corpus refute nothing", () => {
  for (const honest of HONEST) {
    it(
      honest.name,
      async () => {
        const world = scriptedWorld({ name: honest.name, adapter: honest.adapter, capabilities: honest.capabilities });
        const report = await runConformance({ world });
        expect(refutedIn(report)).toEqual([]);
        expect(report.refuted).toBe(0);
        expect(report.ok).toBe(true);
      },
      120_000,
    );
  }
});
