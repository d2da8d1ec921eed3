import type { ProviderCapabilities } from "../../capabilities/index.js";
import type { RuntimeMode } from "../../domain/entities.js";

/**
 * Codex's collaboration modes (`turn/start.collaborationMode`, experimental API), measured on the
 * pinned binary: what each one lets the model do, and the turn parameters that select it.
 *
 * - `default`: the `update_plan` tool works (once enabled, see UPDATE_PLAN_TOOL) and each call is a
 *   `turn/plan/updated`; `request_user_input` answers the model "unavailable in Default mode";
 *   a `<proposed_plan>` block stays assistant text.
 * - `plan`: `request_user_input` becomes an `item/tool/requestUserInput` server request; a
 *   `<proposed_plan>` block becomes a `plan` item (`item/plan/delta` with the item's id, then the
 *   completed item); `update_plan` answers "not allowed in Plan mode".
 */
/** A runtime mode's interaction names its Codex collaboration mode (`default`, `plan`). */
export type CodexCollaborationMode = RuntimeMode["interaction"];

/**
 * Thread config that offers the model `update_plan` (off by default in 0.171 for the bundled
 * models): without it Codex answers the call "unsupported call: update_plan" and plans never appear.
 */
export const UPDATE_PLAN_TOOL = { tools: { update_plan: { enabled: true } } } as const;

/** What a thread runs with, from its start, resume or fork response: a mode must restate both. */
export interface ThreadTuning {
  model: string;
  effort: string | null;
}

/**
 * The `turn/start` parameters that run a turn in `mode`. Codex keeps a turn's mode for the
 * turns after it, so every turn names its own. A mode overrides the model and the reasoning
 * effort too: both are restated from the thread (an unset effort would drop the configured one);
 * `developer_instructions: null` keeps Codex's built-in instructions for the mode.
 */
export function collaborationModeParams(mode: CodexCollaborationMode, tuning: ThreadTuning) {
  return {
    collaborationMode: {
      mode,
      settings: { model: tuning.model, reasoning_effort: tuning.effort, developer_instructions: null },
    },
  };
}

/** The planning capabilities of a mode, as the real-binary tests (test/codex/planning.test.ts) show them. */
export function planningIn(mode: CodexCollaborationMode): ProviderCapabilities["planning"] {
  const plan = mode === "plan";
  return {
    // update_plan: refused in Plan mode.
    emitsPlanUpdated: !plan,
    // Codex's one checklist is update_plan, projected as the plan (it carries an explanation too).
    emitsTodoList: false,
    emitsProposedPlan: plan,
    supportsStructuredQuestions: plan,
    // Plan items (and their deltas) carry the item's id; update_plan's plans have none and never need one.
    planDeltasHaveItemIds: plan,
  };
}
