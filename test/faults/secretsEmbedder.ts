/**
 * An embedding app whose environment holds credentials (the parent test puts them first in it), and the key it means
 * Claude to use: runs a Claude turn against the model simulator, prints "host <pid>" once Claude asked the model,
 * waits for the run to end (the parent kills the host), closes the runtime and prints "done <status>".
 */
import { mkdir } from "node:fs/promises";
import { join } from "node:path";
import { createClaudeAdapter } from "../../src/adapters/claude/adapter.js";

import { startModelSimulator } from "../../src/simulator/index.js";
import { PASSED_KEY } from "../chaos/secretCorpus.js";
import { openRuntime } from "../support/internals.js";

const [root] = process.argv.slice(2);
if (!root) throw new Error("usage: secretsEmbedder.ts <root>");
const home = join(root, "home");
const workspace = join(root, "workspace");
await Promise.all([mkdir(home, { recursive: true }), mkdir(workspace, { recursive: true })]);
const sim = await startModelSimulator();
// The app keeps the key in a variable of its own, which no host inherits: the adapter hands its value to Claude.
process.env.APP_ANTHROPIC_KEY = PASSED_KEY;
const adapter = createClaudeAdapter({
  home,
  configDir: join(home, ".claude"),
  model: { baseUrl: sim.url, apiKeyEnv: "APP_ANTHROPIC_KEY" },
});
const rt = await openRuntime({ dataDir: join(root, "data"), providers: { claude: adapter } });
const { threadId } = await rt.createThread({ providerTarget: "claude", cwd: workspace });
sim.push({ hang: true, text: "working" });
const { runId } = await rt.sendMessage({ threadId, text: "start and wait" });
await sim.waitForRequests(1);
const [sessionId] = rt.views.sessions.keys();
process.stdout.write(`host ${adapter.hostPid(sessionId!)}\n`);
const run = await rt.waitForRun(runId);
await rt.close();
await sim.close();
process.stdout.write(`done ${run.status}\n`);
