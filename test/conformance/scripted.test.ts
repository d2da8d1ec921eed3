import { describe, it } from "vitest";
import { minimalCapabilities, type CapabilityOverrides, type ProviderCapabilities } from "../../src/index.js";
import { scriptedWorld } from "../../src/conformance/index.js";
import { expectConforms } from "./conforms.js";

/**
 * The conformance suite for the scripted provider, which honours whatever record it is given: under each record,
 * every field it claims is verified or not exercisable (with its reason), never refuted.
 */

const records: Record<string, ProviderCapabilities | CapabilityOverrides> = {
  /** Everything the scripted provider can do, strong identities. */
  full: {},
  /**
   * Between: steering only by interrupt-restart, forks of the whole thread (and of a subagent's) only, a provider that
   * queues, weak terminals, no message completions, no empty threads, handoffs as developer context written by the
   * runtime, never as deltas.
   */
  between: {
    turns: { supportsActiveSteering: false, supportsQueuedMessages: true, terminalStatusQuality: "weak" },
    threads: { canForkFromTurn: false, canCreateEmptyThread: false },
    streaming: { emitsMessageCompleted: false },
    approvals: { supportsFileChangeApproval: false, approvalsHaveNativeRequestIds: false },
    planning: { emitsTodoList: false, supportsStructuredQuestions: false },
    identity: { nativeItemIds: "weak", nativeRequestIds: "none" },
    subagents: { canForkSubagentThread: true },
    context: { supportsDeltaHandoff: false, canGenerateSummaries: false, acceptsSystemContext: false },
  },
  /** Context as system instructions: the delivery after developer context. */
  "system context": { context: { acceptsDeveloperContext: false } },
  /** Context only as a user message (`handoff_as_user_context`), as Codex and Claude take it. */
  "user context": { context: { acceptsDeveloperContext: false, acceptsSystemContext: false } },
  /** Minimal: a turn and its text; no ids, no steering, no interrupt, no fork, no rollback, no approvals. */
  minimal: minimalCapabilities(),
  /**
   * Minimal, without turn terminals (ends inferred at idle) and without app checkpoints (rollback refused), told a
   * conversation as synthetic user context.
   */
  "minimal, no terminals": {
    ...minimalCapabilities(),
    turns: { ...minimalCapabilities().turns, emitsTurnCompleted: false, terminalStatusQuality: "none" },
    checkpointing: { ...minimalCapabilities().checkpointing, appCanCheckpointFilesystem: false },
    // A conversation it has not seen reaches it as synthetic user context only (forks are told, not refused).
    context: { ...minimalCapabilities().context, canConsumeHandoffSummaries: true, supportsFullThreadHandoff: true },
  },
};

describe("conformance: scripted provider", () => {
  for (const [name, capabilities] of Object.entries(records)) {
    it(`${name}: every claimed field verified or not exercisable, none refuted`, async () => {
      await expectConforms(scriptedWorld({ capabilities, name: `scripted (${name})` }));
    }, 300_000);
  }
});
