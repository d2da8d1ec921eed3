import { spawn } from "node:child_process";
import { readdirSync, readFileSync } from "node:fs";
import { mkdtemp, readdir, readFile, rm } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { createInterface } from "node:readline";
import { afterEach, describe, expect, it } from "vitest";
import { EMBEDDER_SECRETS, PASSED_KEY } from "../chaos/secretCorpus.js";
import { codexWorld } from "../codex/harness.js";
import { hostEnvironment } from "../../src/runtime/hosts/environment.js";
import { nextEvent } from "../support/runtime.js";
import { hosted, killIfAlive, openFaultRuntime } from "./helpers.js";

/**
 * The embedder's environment holds its cloud keys, tokens and passwords. A host process gets
 * none of them (only the documented allowlist and what the adapter's `env` passes), nothing
 * derived from the environment crosses the host's RPC, and when the host is lost the frame
 * ring's dump in the log carries no secret: nothing anywhere in the data directory does.
 */

const saved = new Map<string, string | undefined>();
function embedderEnvironment(): void {
  for (const [name, value] of Object.entries(EMBEDDER_SECRETS)) {
    saved.set(name, process.env[name]);
    process.env[name] = value;
  }
}

const cleanups: Array<() => Promise<void>> = [];
afterEach(async () => {
  for (const cleanup of cleanups.splice(0)) await cleanup();
  for (const [name, value] of saved) {
    if (value === undefined) delete process.env[name];
    else process.env[name] = value;
  }
  saved.clear();
});

/** Every file under `dir`, as text (the log, the state document, host records, checkpoints...). */
async function everyFile(dir: string): Promise<Array<{ path: string; text: string }>> {
  const out: Array<{ path: string; text: string }> = [];
  for (const entry of await readdir(dir, { withFileTypes: true, recursive: true })) {
    if (!entry.isFile()) continue;
    const path = join(entry.parentPath, entry.name);
    out.push({ path, text: await readFile(path, "latin1") });
  }
  return out;
}

function expectNoSecretIn(files: Array<{ path: string; text: string }>, secrets: string[]): void {
  const found = files.flatMap(({ path, text }) => secrets.filter((s) => text.includes(s)).map((s) => `${path}: ${s}`));
  expect(found).toEqual([]);
}

/** The initial environment of a live process, from /proc. */
function environOf(pid: number): Record<string, string> {
  const raw = readFileSync(`/proc/${pid}/environ`, "utf8");
  return parseEnviron(raw);
}

/** The same, or null for a process already gone (a short-lived helper a host started). */
function environIfAlive(pid: number): Record<string, string> | null {
  try {
    return environOf(pid);
  } catch {
    return null;
  }
}

function parseEnviron(raw: string): Record<string, string> {
  return Object.fromEntries(
    raw
      .split("\0")
      .filter(Boolean)
      .map((kv) => [kv.slice(0, kv.indexOf("=")), kv.slice(kv.indexOf("=") + 1)]),
  );
}

/** Children of `parent` (the processes a host started), from /proc. */
function childrenOf(parent: number): number[] {
  return readdirSync("/proc")
    .filter((entry) => /^\d+$/.test(entry))
    .map(Number)
    .filter((pid) => {
      try {
        return Number(readFileSync(`/proc/${pid}/stat`, "utf8").split(")").at(-1)!.trim().split(" ")[1]) === parent;
      } catch {
        return false; // gone meanwhile
      }
    });
}

const secretValues = Object.values(EMBEDDER_SECRETS);
const embedder = join(import.meta.dirname, "secretsEmbedder.ts");

describe("secrets at rest", () => {
  it(
    "a host's environment: the allowlist and the names its adapter inherits, " +
      "then what the adapter sets; nothing else",
    () => {
      const embedder = {
        ...EMBEDDER_SECRETS,
        PATH: "/usr/bin",
        HOME: "/home/ann",
        LANG: "C.UTF-8",
        LC_ALL: "C",
        https_proxy: "http://proxy:3128",
        NODE_OPTIONS: "--inspect=9229",
        CODEX_HOME: "/home/ann/.codex",
        CLAUDE_CONFIG_DIR: "/x",
        TERM: "xterm",
      };
      expect(
        hostEnvironment({ HOME: "/tmp/home", OPENAI_API_KEY: "passed", TERM: undefined }, ["CODEX_HOME"], embedder),
      ).toEqual({
        PATH: "/usr/bin",
        HOME: "/tmp/home",
        LANG: "C.UTF-8",
        LC_ALL: "C",
        https_proxy: "http://proxy:3128",
        CODEX_HOME: "/home/ann/.codex",
        OPENAI_API_KEY: "passed",
      });
    },
  );

  it(
    "Claude: the host and Claude get no embedder secret; " +
      "the lost host's frame dump in the log carries none; the data directory holds none",
    async () => {
      const root = await mkdtemp(join(tmpdir(), "tiller-secrets-"));
      // The embedding app, its credentials first in its environment (where a dump starts).
      const app = spawn(process.execPath, ["--import", "tsx", embedder, root], {
        env: { ...EMBEDDER_SECRETS, ...process.env },
        stdio: ["ignore", "pipe", "inherit"],
      });
      const pids: number[] = [app.pid!];
      cleanups.push(async () => {
        for (const pid of pids) killIfAlive(pid);
        await rm(root, { recursive: true, force: true, maxRetries: 10 });
      });
      let done = "";
      for await (const line of createInterface({ input: app.stdout })) {
        const [word, value] = line.split(" ");
        if (word === "host") {
          const host = Number(value);
          const claude = childrenOf(host);
          pids.push(host, ...claude);
          expect(claude.length).toBeGreaterThan(0);
          for (const pid of [host, ...claude]) {
            const env = pid === host ? environOf(pid) : environIfAlive(pid);
            if (!env) continue;
            expect(
              Object.values(env).filter((v) => secretValues.includes(v)),
              `process ${pid}`,
            ).toEqual([]);
            // What the embedder passes through the adapter's env does reach them.
            expect(env.ANTHROPIC_API_KEY).toBe(PASSED_KEY);
          }
          process.kill(host, "SIGKILL");
        }
        if (word === "done") done = value!;
      }
      expect(done).toBe("failed");
      const log = await readFile(join(root, "data", "events.jsonl"), "utf8");
      // The loss was recorded with the host's recent frames (the ring's dump)...
      expect(log).toContain("recent host frames");
      // ...and neither the embedder's secrets nor the key passed on purpose are anywhere on disk.
      expectNoSecretIn(await everyFile(join(root, "data")), [...secretValues, PASSED_KEY]);
    },
    60_000,
  );

  it("scripted host: spawned with the allowlist and its own token only", async () => {
    embedderEnvironment();
    const adapter = hosted({ transport: "websocket" });
    const runtime = await openFaultRuntime({ s: adapter });
    cleanups.push(runtime.cleanup);
    const { threadId } = await runtime.rt.createThread({ providerTarget: "s" });
    const { runId } = await runtime.rt.sendMessage({ threadId, text: "[gate] hold" });
    await nextEvent(runtime.rt, "node.delta", (e) => e.runId === runId);
    const [sessionId] = runtime.rt.views.sessions.keys();
    const host = adapter.hostPid(sessionId!)!;
    const env = environOf(host);
    expect(Object.values(env).filter((v) => secretValues.includes(v))).toEqual([]);
    // The token the host reads (and deletes from its environment) is the only thing added; PATH comes from the
    // allowlist.
    expect(env.TILLER_HOST_TOKEN).toMatch(/^[0-9a-f]{32}$/);
    expect(env.PATH).toBe(process.env.PATH);
    process.kill(host, "SIGKILL");
    expect((await runtime.rt.waitForRun(runId)).status).toBe("failed");
    await runtime.rt.close();
    expectNoSecretIn(await everyFile(runtime.dataDir), [...secretValues, env.TILLER_HOST_TOKEN!]);
  });

  it(
    "Codex: the app-server gets no embedder secret, only what the adapter's env passes; " +
      "its lost host's dump leaves none on disk",
    async () => {
      embedderEnvironment();
      const world = await codexWorld({ adapter: { env: { SIMULATOR_API_KEY: PASSED_KEY } } });
      cleanups.push(() => world.cleanup());
      const { threadId } = await world.rt.createThread({ providerTarget: "codex", cwd: world.workspace });
      world.sim.push({ hang: true, text: "working" });
      const { runId } = await world.rt.sendMessage({ threadId, text: "start and wait" });
      await world.sim.waitForRequests(1);
      const [sessionId] = world.rt.views.sessions.keys();
      const host = world.adapter.hostPid(sessionId!)!;
      const env = environOf(host);
      expect(Object.values(env).filter((v) => secretValues.includes(v))).toEqual([]);
      expect(env.SIMULATOR_API_KEY).toBe(PASSED_KEY);
      process.kill(host, "SIGKILL");
      expect((await world.rt.waitForRun(runId)).status).toBe("failed");
      await world.rt.close();
      expectNoSecretIn(await everyFile(join(world.root, "data")), [...secretValues, PASSED_KEY]);
    },
  );
});
