import { mkdirSync } from "node:fs";
import { join } from "node:path";
import { createCodexAdapter } from "../../src/adapters/codex/adapter.js";
import { replaySuite } from "./replaySuite.js";
import { scenarios } from "./scenarios.js";

/**
 * Replays the recorded Codex transcripts against the real runtime and Codex adapter, whose
 * `binary` is the replay host (test/replay/codex-replay). Fixtures are rewritten with
 * `npm run record:codex`.
 */
replaySuite("codex", "codex-replay", scenarios, ({ root, home, fixture }) => {
  const codexHome = join(root, "codex-home");
  mkdirSync(codexHome, { recursive: true });
  return createCodexAdapter({
    binary: join(import.meta.dirname, "codex-replay"),
    codexHome,
    home,
    // Part of the host key (hashed as credentials): every fixture gets its own host.
    env: { CODEX_REPLAY_FIXTURE: fixture, CODEX_REPLAY_ROOT: root },
    approvalPolicy: "untrusted",
  });
});
