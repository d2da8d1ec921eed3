import { gemini } from "./harness.js";
import { agentSuite } from "./suite.js";

/**
 * Gemini CLI 0.61.0 (`gemini --acp`) under the ACP adapter, offline against the simulator's Gemini dialect. Its
 * initialize advertises `loadSession` and nothing of `sessionCapabilities`: no fork, no resume (a new process loads the
 * session, after the chat-file workaround of its preset), no steering extension (steering is interrupt-restart).
 */
agentSuite(gemini, {
  fields: {
    "threads.canForkThread": false,
    "turns.supportsActiveSteering": false,
    "turns.supportsSteeringByInterruptRestart": true,
    "planning.emitsPlanUpdated": false,
    "approvals.supportsFileReadApproval": false,
    "tools.emitsToolOutput": false,
  },
});
