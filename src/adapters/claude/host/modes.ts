import type { Options, PermissionMode } from "../protocol/sdk.js";
import type { RuntimeMode } from "../../../domain/entities.js";
import type { SandboxPolicy } from "../../contract.js";
import { sandboxOptions } from "./sandbox.js";

/**
 * The runtime mode on Claude. `interaction: "plan"` is Claude's plan mode, whatever the sandbox: Claude is told to
 * plan and writes nothing unasked but its plan file (in its config directory). Otherwise the sandbox's permission
 * mode. A live query switches mode (`setPermissionMode`), so each turn runs in its own.
 */
export function permissionModeOf(sandbox: SandboxPolicy, mode: RuntimeMode): PermissionMode {
  return mode.interaction === "plan" ? "plan" : sandboxOptions(sandbox).permissionMode!;
}

/**
 * A query's options for a thread starting in this mode; under full-access a later turn may go back to bypassing.
 * Plan mode keeps Claude's `default` semantics: where auto mode is available, Claude's plan mode otherwise lets its
 * classifier allow commands unasked (`useAutoModeDuringPlan`, on by default), and what it allows could change things.
 */
export function modeOptions(
  sandbox: SandboxPolicy,
  mode: RuntimeMode,
): Pick<Options, "permissionMode" | "allowDangerouslySkipPermissions" | "settings"> {
  return {
    ...sandboxOptions(sandbox),
    permissionMode: permissionModeOf(sandbox, mode),
    settings: { useAutoModeDuringPlan: false },
  };
}

/** Tools whose permission prompt asks the user something rather than for a go-ahead to act. */
const QUESTIONS = new Set(["AskUserQuestion"]);

/** What Claude is told when it proposes its plan in a plan-mode turn: the plan is the turn's outcome. */
const PLAN_KEPT =
  "The user reviews this plan and stays in plan mode for now: stop here. They will ask for it to be carried out.";
/** What Claude is told of any other go-ahead it asks for in a plan-mode turn. */
const PLAN_CHANGES_NOTHING = "Not allowed in plan mode: nothing is changed. Plan without it.";
/** What Claude is told of a go-ahead it asks for under `approvals: "never"`, so it goes on without it. */
const NEVER_ASKED =
  "Not allowed: the user is not being asked for permissions now. Do without this, or say what you would need.";

/**
 * The host's answer to Claude's permission prompt for a tool in a turn's mode: null to ask the user, else the reason
 * it is refused at once, unasked. Questions always reach the user. Otherwise:
 * - plan: refused. Claude's plan mode asks before writes and commands (as `default` does), so a user's yes would
 *   change things in a plan turn; and ExitPlanMode's plan arrives as the proposed plan, carried out by a later turn;
 * - approvals `never`: refused. What the permission mode lets through runs unasked; the rest is what would ask.
 *   (Claude's `dontAsk` does so for `default` only, with no `acceptEdits` counterpart; the SDK's
 *   `permissionPrompts: "none"` is fixed for a whole query, so it cannot follow the turns.)
 */
export function refusal(tool: string, mode: RuntimeMode): string | null {
  if (QUESTIONS.has(tool)) return null;
  if (mode.interaction === "plan") return tool === "ExitPlanMode" ? PLAN_KEPT : PLAN_CHANGES_NOTHING;
  return mode.approvals === "never" ? NEVER_ASKED : null;
}
