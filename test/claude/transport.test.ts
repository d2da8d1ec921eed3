import { spawn, type ChildProcess } from "node:child_process";
import { mkdtemp, rm } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterEach, describe, expect, it } from "vitest";
import { claudeHostSpec } from "../../src/adapters/claude/transport.js";
import type { ProviderEvent } from "../../src/adapters/contract.js";
import type { SpawnedHost, SpawnSpec } from "../../src/adapters/kit/hostSpec.js";
import { FrameRing } from "../../src/adapters/kit/ring.js";
import { hostEnvironment } from "../../src/runtime/hosts/environment.js";
import { until } from "./harness.js";

/**
 * The host boundary, both ways: the Claude host checks every call against its schema before it acts, and the adapter
 * takes from a host only events of the contract's shape. No Claude process is started: the host opens none without a
 * well-formed `openThread`, and the misbehaving host is a stand-in.
 */

const started: ChildProcess[] = [];
const dirs: string[] = [];
afterEach(async () => {
  for (const child of started.splice(0)) if (child.exitCode === null) process.kill(child.pid!, "SIGKILL");
  for (const dir of dirs.splice(0)) await rm(dir, { recursive: true, force: true });
});

const asSpawned = (child: ChildProcess) => ({ child, pid: child.pid! }) as SpawnedHost;

function start(command: string, args: string[], env: Record<string, string>): ChildProcess {
  const child = spawn(command, args, { env, stdio: ["pipe", "pipe", "pipe"] });
  started.push(child);
  return child;
}

describe("claude host boundary", () => {
  it("the host refuses a call it does not know, and params not of the call's shape, before acting", async () => {
    const home = await mkdtemp(join(tmpdir(), "tiller-claude-transport-"));
    dirs.push(home);
    const spec = claudeHostSpec({ home, configDir: join(home, ".claude") }, () => undefined);
    const { command, args, env, inherit } = spec.spawn as SpawnSpec;
    const host = start(command, args, hostEnvironment(env, inherit));
    const channel = await spec.connect(asSpawned(host), new FrameRing());
    await expect(channel.call("openThread", { sessionId: "s", cwd: 7 })).rejects.toMatchObject({
      code: "protocol_error",
    });
    await expect(channel.call("rollback", { cursor: "c", turns: 0 })).rejects.toMatchObject({
      code: "protocol_error",
    });
    await expect(channel.call("exec", { command: "ls" })).rejects.toMatchObject({ code: "protocol_error" });
    // A well-formed call reaches the host's own state.
    await expect(channel.call("respond", { requestRef: "r", allow: true })).rejects.toMatchObject({
      code: "provider_error",
      message: "claude host: request r is not pending",
    });
    expect(await channel.call("turnAlive", { cursor: "c" })).toEqual({ alive: false });
  });

  it("the adapter drops an event not of the contract's shape, noting it, and takes the next", async () => {
    // A host that says it is ready, answers init, then sends a malformed event and a good one.
    const fake = `
      const say = (m) => process.stdout.write(JSON.stringify({ jsonrpc: "2.0", ...m }) + "\\n");
      say({ method: "host.ready", params: { pid: process.pid, protocol: 1 } });
      require("node:readline").createInterface({ input: process.stdin }).on("line", (line) => {
        const { id } = JSON.parse(line);
        say({ id, result: null });
        const event = (e) => say({ method: "event", params: { sessionId: "s1", event: e } });
        event({ type: "item.delta", threadRef: 5 });
        event({ type: "warning", threadRef: "t", message: "ok" });
      });`;
    const events: Array<[string, ProviderEvent]> = [];
    const spec = claudeHostSpec({}, (sessionId, event) => events.push([sessionId, event]));
    const ring = new FrameRing();
    await spec.connect(asSpawned(start(process.execPath, ["-e", fake], { PATH: process.env.PATH ?? "" })), ring);
    await until("the good event", () => events.length > 0);
    expect(events).toEqual([["s1", { type: "warning", threadRef: "t", message: "ok" }]]);
    expect(ring.counts.invalid_params).toBe(1);
  });
});
