import { PassThrough } from "node:stream";
import type { ChildProcess } from "node:child_process";
import { readdir, readFile } from "node:fs/promises";
import { join } from "node:path";
import { afterEach, describe, expect, it } from "vitest";
import { createCodexAdapter } from "../../src/adapters/codex/adapter.js";
import { CodexChannel, type CodexNotification } from "../../src/adapters/codex/transport.js";
import { FrameRing } from "../../src/adapters/kit/ring.js";
import { InvalidInputError, ProtocolError } from "../../src/domain/errors.js";
import { codexWorld, type CodexWorld } from "./harness.js";

/**
 * The model endpoint option on the real binary: an OpenAI-compatible endpoint (the model
 * simulator) with no config file anywhere, the key read from the embedder's environment and
 * handed to the app-server's environment only. And the transport's check of what the
 * app-server sends, on a channel whose process is a double (the one boundary it has).
 */

const KEY_VARIABLE = "TILLER_TEST_CODEX_ENDPOINT_KEY";
const KEY = "sk-tiller-endpoint-test-8c1f0e";

let world: CodexWorld | null = null;
afterEach(async () => {
  await world?.cleanup();
  world = null;
  delete process.env[KEY_VARIABLE];
});

async function filesUnder(dir: string): Promise<string[]> {
  const entries = await readdir(dir, { withFileTypes: true, recursive: true });
  return entries.filter((e) => e.isFile()).map((e) => join(e.parentPath, e.name));
}

describe("codex: a model endpoint as an option", () => {
  it("runs a text turn against an OpenAI-compatible endpoint with no config file; the key is on no disk", async () => {
    process.env[KEY_VARIABLE] = KEY;
    world = await codexWorld({
      adapter: (sim) => ({
        // No `env`: the key comes from the embedder's environment, by name.
        env: {},
        model: { baseUrl: `${sim.url}/v1`, apiKeyEnv: KEY_VARIABLE, name: "gpt-5.5", maxRetries: 0 },
      }),
    });
    const { spawn, secrets, identity } = world.adapter.hostSpec;
    // The provider home the app-server gets holds nothing: no config file.
    expect(await readdir(join(world.root, "codex-home"))).toEqual([]);

    const { threadId } = await world.rt.createThread({ providerTarget: "codex", cwd: world.workspace });
    world.sim.push({ text: "Hello through the endpoint option" });
    const run = await world.rt.waitForRun((await world.rt.sendMessage({ threadId, text: "say hi" })).runId);
    expect(run.status).toBe("completed");
    expect(run.items.at(-1)?.text).toBe("Hello through the endpoint option");
    const request = world.sim.requests.at(-1)!;
    expect(request.url).toBe("/v1/responses");
    expect(request.headers.authorization).toBe("[redacted]");
    expect((request.body as { model?: string }).model).toBe("gpt-5.5");

    // The key: in the app-server's environment and masked in its diagnostics, nowhere else.
    if (typeof spawn === "function") throw new Error("the codex spawn spec is static");
    expect(spawn.env[KEY_VARIABLE]).toBe(KEY);
    expect(secrets).toContain(KEY);
    expect(JSON.stringify(spawn.args)).not.toContain(KEY);
    expect(JSON.stringify(identity)).not.toContain(KEY);
    const codexHomeFiles = await filesUnder(join(world.root, "codex-home"));
    expect(codexHomeFiles.some((f) => f.endsWith("config.toml"))).toBe(false);
    for (const file of await filesUnder(world.root))
      expect((await readFile(file)).includes(KEY), `${file} holds the key`).toBe(false);
  });

  it("a key variable that is not set is an invalid_input at creation, never a host that cannot authenticate", () => {
    const create = () =>
      createCodexAdapter({
        binary: "/nonexistent/codex",
        model: { baseUrl: "http://127.0.0.1:9/v1", apiKeyEnv: "TILLER_TEST_CODEX_UNSET_KEY" },
      });
    expect(create).toThrow(InvalidInputError);
    expect(create).toThrow(/TILLER_TEST_CODEX_UNSET_KEY is not set/);
  });
});

describe("codex transport: what the app-server sends is checked", () => {
  function channel() {
    const stdout = new PassThrough();
    const child = { stdout, stderr: new PassThrough(), stdin: new PassThrough() } as unknown as ChildProcess;
    const ring = new FrameRing();
    const codex = new CodexChannel(child, ring);
    const seen: CodexNotification[] = [];
    const rejected: ProtocolError[] = [];
    codex.onCodexNotification(
      (n) => seen.push(n),
      (e) => rejected.push(e),
    );
    const send = (frame: unknown) => stdout.write(`${JSON.stringify(frame)}\n`);
    return { ring, seen, rejected, send, stdout };
  }

  it("a notification that does not match its schema is a protocol_error and counted, not mapped", async () => {
    const { ring, seen, rejected, send, stdout } = channel();
    const at = { threadId: "t1", turnId: "u1" };
    send({ method: "turn/plan/updated", params: { ...at, plan: [{ step: "a", status: "someday" }] } });
    send({ method: "turn/plan/updated", params: { ...at, plan: [{ step: "a", status: "pending" }] } });
    stdout.end();
    await new Promise((resolve) => stdout.on("end", resolve));
    await until(() => seen.length + rejected.length === 2);
    expect(rejected.map((e) => e.code)).toEqual(["protocol_error"]);
    expect(rejected[0]!.message).toContain("turn/plan/updated");
    expect(seen).toEqual([
      { method: "turn/plan/updated", params: { ...at, plan: [{ step: "a", status: "pending" }] } },
    ]);
    expect(ring.counts.invalid_params).toBe(1);
  });
});

async function until(condition: () => boolean): Promise<void> {
  while (!condition()) await new Promise((resolve) => setImmediate(resolve));
}
