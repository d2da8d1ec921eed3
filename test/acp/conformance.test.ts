import { describe, it } from "vitest";
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
