import { codex, updatePlan } from "./harness.js";
import { agentSuite } from "./suite.js";

/**
 * Codex through codex-acp 0.16.0 under the ACP adapter, offline against the simulator's Responses dialect. Its
 * initialize advertises resume, close and list: no fork, no steering extension (steering is interrupt-restart).
 */
agentSuite(codex, {
  fields: {
    "threads.canForkThread": false,
    "turns.supportsActiveSteering": false,
    "turns.supportsSteeringByInterruptRestart": true,
    "planning.emitsPlanUpdated": true,
    "approvals.supportsFileReadApproval": false,
    "tools.emitsToolOutput": true,
  },
  plan: {
    reply: updatePlan,
    steps: [
      { step: "look", status: "completed" },
      { step: "edit", status: "in_progress" },
    ],
  },
});
