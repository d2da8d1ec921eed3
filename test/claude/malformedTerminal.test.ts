import { mkdtemp, rm } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterEach, describe, expect, it } from "vitest";
import { createClaudeAdapter } from "../../src/adapters/claude/adapter.js";
import type { SpawnSpec } from "../../src/adapters/kit/hostSpec.js";
import { sequentialIds } from "../../src/index.js";
import { openRuntime } from "../support/internals.js";

/**
 * A turn's end from the Claude host that fails the adapter's event check still ends its turn: the run fails at once as
 * `protocol_error`, not at the turn watchdog. The host is a stand-in process speaking the host protocol on stdio (no
 * Claude is started): it opens threads, takes a turn, and answers it with one malformed `turn.terminal` and nothing
 * else, so only that frame can end the run.
 */

const FAKE_HOST = `
  const say = (m) => process.stdout.write(JSON.stringify({ jsonrpc: "2.0", ...m }) + "\\n");
  say({ method: "host.ready", params: { pid: process.pid, protocol: 1 } });
  const event = (sessionId, e) => say({ method: "event", params: { sessionId, event: e } });
  let threads = 0;
  const sessionOf = new Map();
  require("node:readline").createInterface({ input: process.stdin }).on("line", (line) => {
    const { id, method, params } = JSON.parse(line);
    if (method === "openThread") {
      const cursor = "fake-session-" + ++threads;
      sessionOf.set(cursor, params.sessionId);
      return say({ id, result: { cursor } });
    }
    if (method === "turnAlive") return say({ id, result: { alive: true } });
    say({ id, result: null });
    if (method === "send") {
      const sessionId = sessionOf.get(params.cursor);
      event(sessionId, { type: "turn.started", threadRef: params.cursor });
      event(sessionId, { type: "turn.terminal", threadRef: params.cursor, status: 7, threadDisposition: "reusable" });
    }
  });`;

let root: string | null = null;
afterEach(async () => {
  if (root) await rm(root, { recursive: true, force: true });
  root = null;
});

describe("claude host: a turn's end of the wrong shape", () => {
  it("a refused turn.terminal that names its thread fails the run at once as protocol_error", async () => {
    root = await mkdtemp(join(tmpdir(), "tiller-claude-malformed-"));
    const adapter = createClaudeAdapter({ home: join(root, "home"), configDir: join(root, "home", ".claude") });
    // The host the registry spawns is the stand-in: same spec, its own command.
    const spawn = adapter.hostSpec.spawn as SpawnSpec;
    Object.assign(spawn, { command: process.execPath, args: ["-e", FAKE_HOST], env: { HOME: join(root, "home") } });
    const rt = await openRuntime({ dataDir: join(root, "data"), providers: { claude: adapter }, ids: sequentialIds() });
    try {
      const { threadId } = await rt.createThread({ providerTarget: "claude" });
      const run = await rt.waitForRun((await rt.sendMessage({ threadId, text: "hello" })).runId);
      expect([run.status, run.failure?.failureClass]).toEqual(["failed", "protocol_error"]);
      expect(run.failure?.message).toMatch(/^the claude host sent a turn\.terminal that does not match its schema/);
      expect(run.failure?.message).toContain("event.status");
    } finally {
      await rt.close();
    }
  }, 30_000);
});
