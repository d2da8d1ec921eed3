import { claude, todoWrite } from "./harness.js";
import { agentSuite } from "./suite.js";

/**
 * Claude Code through claude-agent-acp 0.101.0 under the ACP adapter, offline against the simulator's Messages dialect.
 * Its initialize advertises fork, resume, close and list, and the steering extension (`_meta.steering`): unlike
 * Gemini's, its record forks natively and steers natively.
 */
agentSuite(claude, {
  fields: {
    "threads.canForkThread": true,
    "turns.supportsActiveSteering": true,
    "turns.supportsSteeringByInterruptRestart": false,
    "planning.emitsPlanUpdated": true,
    "approvals.supportsFileReadApproval": true,
    "tools.emitsToolOutput": true,
  },
  plan: {
    reply: todoWrite,
    // claude-agent-acp shows a step in progress by its active form, the others by their content.
    steps: [
      { step: "look", status: "completed" },
      { step: "Editing", status: "in_progress" },
    ],
  },
});
