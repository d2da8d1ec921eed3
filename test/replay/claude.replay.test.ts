import { join } from "node:path";
import { createClaudeAdapter } from "../../src/adapters/claude/adapter.js";
import { claudeScenarios } from "./claudeScenarios.js";
import { replaySuite } from "./replaySuite.js";

/**
 * Replays the recorded Claude Code transcripts against the real runtime, Claude adapter,
 * host and Agent SDK, whose `executable` is the replay host (test/replay/claude-replay)
 * instead of the Claude binary. Fixtures are rewritten with `npm run record:claude`.
 */
replaySuite("claude", "claude-replay", claudeScenarios, ({ root, home, fixture }) =>
  createClaudeAdapter({
    executable: join(import.meta.dirname, "claude-replay"),
    home,
    configDir: join(home, ".claude"),
    env: { CLAUDE_REPLAY_FIXTURE: fixture, CLAUDE_REPLAY_ROOT: root },
  }),
);
