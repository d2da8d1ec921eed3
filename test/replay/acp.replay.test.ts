import { createRequire } from "node:module";
import { join } from "node:path";
import { pathToFileURL } from "node:url";
import { createAcpAdapter, type AcpAdapterOptions } from "../../src/adapters/acp/adapter.js";
import { claudeAgent, codexAgent, geminiAgent } from "../../src/adapters/acp/agents.js";
import { acpCases, acpScenarios, type AcpCase } from "./acpScenarios.js";
import { replaySuite } from "./replaySuite.js";

/**
 * Replays the recorded ACP transcripts (Gemini CLI, claude-agent-acp, codex-acp) against the real runtime and ACP
 * adapter, with each agent's preset (its behaviour, authentication, raw output fields), whose agent command is the
 * replay host (acpReplayHost.ts, under node with tsx) instead of the agent: no agent, no model simulator. Fixtures are
 * rewritten with `npm run record:acp`.
 */

const host = join(import.meta.dirname, "acpReplayHost.ts");
const tsx = pathToFileURL(createRequire(import.meta.url).resolve("tsx")).href;
/** Never started: each preset's agent command is replaced by the replay host's. */
const REPLAYED = "replayed-agent";

/** The agent's preset as the real-agent harness (test/acp/harness.ts) configures it, minus its command. */
const presets: Record<AcpCase["name"], (home: string) => AcpAdapterOptions> = {
  gemini: (home) => geminiAgent({ home, executable: REPLAYED }),
  claude: (home) => claudeAgent({ home, configDir: join(home, ".claude"), executable: REPLAYED }),
  codex: (home) => codexAgent({ home, codexHome: join(home, ".codex"), executable: REPLAYED, bwrapDir: null }),
};

for (const c of acpCases)
  replaySuite(
    c.agent.target,
    "acp-replay",
    acpScenarios(c),
    ({ root, home, fixture }) =>
      createAcpAdapter({
        ...presets[c.name](home),
        // Part of the host key: every fixture gets its own agent process.
        agent: {
          command: process.execPath,
          args: ["--import", tsx, host],
          env: { ACP_REPLAY_FIXTURE: fixture, ACP_REPLAY_ROOT: root },
        },
      }),
    { fixtures: `acp/${c.name}` },
  );
