import { describe, it } from "vitest";
import { claudeConformanceWorld } from "./claudeWorld.js";
import { expectConforms } from "./conforms.js";

/**
 * The conformance suite for Claude Code (the binary the pinned Agent SDK ships), offline against the model
 * simulator: every field its record claims is verified or not exercisable (explained in src/adapters/claude/GAP.md),
 * none refuted.
 */
describe("conformance: claude", () => {
  it("every claimed field verified or not exercisable, none refuted", async () => {
    await expectConforms(claudeConformanceWorld(), 30_000);
  }, 600_000);
});
