import { readdirSync, readFileSync } from "node:fs";
import { join } from "node:path";
import { afterEach, describe, expect, it } from "vitest";
import { createClaudeAdapter } from "../../src/adapters/claude/index.js";
import { endpointEnvironment } from "../../src/adapters/claude/transport.js";
import { InvalidInputError } from "../../src/domain/errors.js";
import { claudeProcesses, claudeWorld, SIMULATOR_KEY, SIMULATOR_KEY_ENV, type ClaudeWorld } from "./harness.js";

/**
 * The adapter's `model` option: Claude Code pointed at an Anthropic-compatible endpoint (here the model simulator on
 * 127.0.0.1), its key read from the embedder's environment variable the option names and handed to Claude alone.
 */

let world: ClaudeWorld | null = null;
afterEach(async () => {
  await world?.cleanup();
  world = null;
});

const environOf = (pid: number): Record<string, string> =>
  Object.fromEntries(
    readFileSync(`/proc/${pid}/environ`, "utf8")
      .split("\0")
      .filter(Boolean)
      .map((kv) => [kv.slice(0, kv.indexOf("=")), kv.slice(kv.indexOf("=") + 1)]),
  );

/** Every file under a directory, read. */
const everyFile = (dir: string): string =>
  readdirSync(dir, { recursive: true, withFileTypes: true })
    .filter((entry) => entry.isFile())
    .map((entry) => readFileSync(join(entry.parentPath, entry.name), "utf8"))
    .join("\n");

describe("claude: a model endpoint as an option", () => {
  it("runs a text turn against the endpoint, the key in Claude's environment only", async () => {
    world = await claudeWorld();
    const w = world;
    const { threadId } = await w.rt.createThread({ providerTarget: "claude", cwd: w.workspace });
    w.sim.push({ text: "through the option" });
    const run = await w.rt.waitForRun((await w.rt.sendMessage({ threadId, text: "say hi" })).runId);
    expect(run.status).toBe("completed");
    expect(run.items.at(-1)?.text).toBe("through the option");
    // Claude asked the simulator, with a key (the simulator records the header, masked).
    expect(w.sim.requests.at(-1)?.url).toMatch(/^\/v1\/messages/);
    expect(w.sim.requests.at(-1)?.headers["x-api-key"]).toBe("[redacted]");
    const [sessionId] = w.rt.views.sessions.keys();
    const host = w.adapter.hostPid(sessionId!)!;
    const claude = claudeProcesses(w);
    expect(claude.length).toBeGreaterThan(0);
    for (const pid of [host, ...claude]) {
      const env = environOf(pid);
      expect(env.ANTHROPIC_BASE_URL, `process ${pid}`).toBe(w.sim.url);
      expect(env.ANTHROPIC_API_KEY, `process ${pid}`).toBe(SIMULATOR_KEY);
      // The temporary HOME and Claude config directory, never the user's.
      expect(env.HOME).toBe(w.home);
      expect(env.CLAUDE_CONFIG_DIR).toBe(join(w.home, ".claude"));
      // The variable the key was read from is the embedder's own: no host inherits it.
      expect(env[SIMULATOR_KEY_ENV]).toBeUndefined();
    }
    // Neither the host key (a hash) nor the runtime's data directory holds the key.
    expect(JSON.stringify(w.adapter.hostSpec.identity)).not.toContain(SIMULATOR_KEY);
    expect(w.adapter.hostSpec.secrets).toContain(SIMULATOR_KEY);
    await w.rt.close();
    expect(everyFile(join(w.root, "data"))).not.toContain(SIMULATOR_KEY);
  });

  it("names the model Claude asks for", async () => {
    world = await claudeWorld({}, { model: { name: "sim-model-7" } });
    const w = world;
    const { threadId } = await w.rt.createThread({ providerTarget: "claude", cwd: w.workspace });
    w.sim.push({ text: "named" });
    const run = await w.rt.waitForRun((await w.rt.sendMessage({ threadId, text: "which model?" })).runId);
    expect(run.status).toBe("completed");
    const asked = w.sim.requests.filter((r) => r.url.startsWith("/v1/messages"));
    expect(asked.length).toBeGreaterThan(0);
    for (const request of asked) expect((request.body as { model?: string }).model).toBe("sim-model-7");
  });

  it("reads the key when the adapter is made, and refuses what it cannot use", () => {
    const model = { baseUrl: "http://127.0.0.1:9/", apiKeyEnv: "APP_KEY" };
    expect(endpointEnvironment(model, {}, { APP_KEY: "k-123" })).toEqual({
      ANTHROPIC_BASE_URL: "http://127.0.0.1:9/",
      ANTHROPIC_API_KEY: "k-123",
    });
    const refused = (f: () => unknown) => {
      try {
        f();
      } catch (error) {
        expect(error).toBeInstanceOf(InvalidInputError);
        return (error as InvalidInputError).message;
      }
      throw new Error("not refused");
    };
    expect(refused(() => endpointEnvironment(model, {}, {}))).toBe("model.apiKeyEnv: the variable APP_KEY is not set");
    expect(refused(() => endpointEnvironment({ ...model, baseUrl: "localhost:9" }, {}, { APP_KEY: "k" }))).toBe(
      "model.baseUrl: is not an http(s) URL",
    );
    expect(refused(() => endpointEnvironment({ ...model, baseUrl: "not a url" }, {}, { APP_KEY: "k" }))).toBe(
      "model.baseUrl: is not a URL",
    );
    expect(refused(() => endpointEnvironment({ ...model, apiKeyEnv: "A=B" }, {}, { APP_KEY: "k" }))).toBe(
      "model.apiKeyEnv: is not an environment variable name",
    );
    // One place says where Claude's model is: the option, or `env`, not both.
    expect(refused(() => endpointEnvironment(model, { ANTHROPIC_API_KEY: "other" }, { APP_KEY: "k" }))).toBe(
      "env: sets ANTHROPIC_API_KEY, which the model option decides",
    );
    // The adapter's `env` may hold the key (Claude gets it there too); the model's name is Claude's default model.
    expect(endpointEnvironment({ ...model, name: "m-1" }, { APP_KEY: "k-env" }, { APP_KEY: "k-123" })).toEqual({
      ANTHROPIC_BASE_URL: "http://127.0.0.1:9/",
      ANTHROPIC_API_KEY: "k-env",
      ANTHROPIC_MODEL: "m-1",
    });
    // At creation, not at the first session.
    expect(() =>
      createClaudeAdapter({ model: { baseUrl: "http://127.0.0.1:9/", apiKeyEnv: "TILLER_TEST_UNSET_KEY" } }),
    ).toThrow(InvalidInputError);
  });

  it("keys hosts by endpoint and key: another key is another host", () => {
    process.env.TILLER_TEST_KEY_A = "key-a-0123456789";
    process.env.TILLER_TEST_KEY_B = "key-b-0123456789";
    const spec = (apiKeyEnv: string) =>
      createClaudeAdapter({ model: { baseUrl: "http://127.0.0.1:9/", apiKeyEnv } }).hostSpec;
    const [a, b] = [spec("TILLER_TEST_KEY_A"), spec("TILLER_TEST_KEY_B")];
    expect(a.identity.config).toEqual(b.identity.config);
    expect(a.identity.credentials).not.toBe(b.identity.credentials);
    expect(JSON.stringify(a.identity)).not.toContain("key-a-0123456789");
    const spawn = a.spawn as { env: Record<string, string> };
    expect(spawn.env.ANTHROPIC_API_KEY).toBe("key-a-0123456789");
    expect(a.secrets).toEqual(["key-a-0123456789"]);
  });
});
