import { spawn } from "node:child_process";
import { mkdtemp, rm } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { fileURLToPath } from "node:url";
import { describe, expect, it } from "vitest";
import { StdioChannel } from "../../src/adapters/kit/stdioChannel.js";
import { FrameRing } from "../../src/adapters/kit/ring.js";
import { alive, killIfAlive } from "./helpers.js";

/**
 * Issue 12, item 4: a host that writes a very long line with no newline killed the embedding
 * process (`RangeError: Invalid string length` from readline, past V8's ~512 MiB string
 * limit). Each scenario runs a whole embedding process (runtime + hosted scripted adapter) in
 * a child, so a runtime that dies of it fails the test instead of taking the runner down.
 */

const child = fileURLToPath(new URL("./hostLineChild.ts", import.meta.url));

interface Step {
  step: string;
  [key: string]: any;
}

async function embed(transport: "stdio" | "websocket", stream: "stdout" | "stderr" | "websocket", mib: number) {
  const dataDir = await mkdtemp(join(tmpdir(), "tiller-hostline-"));
  const proc = spawn(process.execPath, ["--import", "tsx", child, dataDir, transport, stream, String(mib)], {
    stdio: ["ignore", "pipe", "pipe"],
  });
  let stdout = "";
  let stderr = "";
  proc.stdout.on("data", (d: Buffer) => (stdout += d.toString()));
  proc.stderr.on("data", (d: Buffer) => (stderr += d.toString()));
  try {
    const exit = await new Promise<{ code: number | null; signal: NodeJS.Signals | null }>((resolve) =>
      proc.once("close", (code, signal) => resolve({ code, signal })),
    );
    const steps = stdout
      .split("\n")
      .filter((line) => line.startsWith("{"))
      .map((line) => JSON.parse(line) as Step);
    return { exit, stderr, step: (name: string) => steps.find((s) => s.step === name) };
  } finally {
    killIfAlive(proc.pid);
    await rm(dataDir, { recursive: true, force: true });
  }
}

describe("a host that never ends its line", () => {
  // 600 MiB: past V8's string limit, which is what crashed readline (300 MiB only stalled it).
  it.each([
    { transport: "stdio", stream: "stdout", mib: 600, limit: "a stdout line over 16 MiB" },
    { transport: "stdio", stream: "stderr", mib: 600, limit: "a stderr line over 1 MiB" },
    { transport: "websocket", stream: "stderr", mib: 600, limit: "a stderr line over 1 MiB" },
    { transport: "websocket", stream: "websocket", mib: 20, limit: "a WebSocket message over 16 MiB" },
  ] as const)(
    "$transport host, $mib MiB on $stream: its run fails with the reason, the embedder lives, a new host serves",
    async ({ transport, stream, mib, limit }) => {
      const { exit, stderr, step } = await embed(transport, stream, mib);
      expect(stderr).not.toMatch(/RangeError|Invalid string length/);
      expect(exit).toEqual({ code: 0, signal: null });
      const flooded = step("flooded")!;
      const failed = step("failed")!;
      const recovered = step("recovered")!;
      try {
        expect(failed.status).toBe("failed");
        expect(failed.failure.failureClass).toBe("provider_session_lost");
        expect(failed.failure.message).toContain(`the host sent ${limit} (its size limit) and is cut off as broken`);
        // The session's record carries the ring: the over-long line is counted and sampled there.
        expect(failed.report).toMatch(/note frame_too_large #1: (stdout|stderr|websocket): .*(xxxx|bytes)/);
        expect(recovered.status).toBe("completed");
        expect(recovered.pid).not.toBe(flooded.pid);
        expect(alive(flooded.pid)).toBe(false);
      } finally {
        killIfAlive(flooded?.pid);
        killIfAlive(recovered?.pid);
      }
    },
  );
});

/** A tiny host: writes the given lines, echoes what it reads back as `echo` notifications, then waits. */
function scriptedPeer(lines: string[]) {
  const source = `
    const out = ${JSON.stringify(lines)};
    for (const line of out) process.stdout.write(line + "\\n");
    let buffered = "";
    process.stdin.on("data", (d) => {
      buffered += d;
      let i;
      while ((i = buffered.indexOf("\\n")) >= 0) {
        const line = buffered.slice(0, i);
        buffered = buffered.slice(i + 1);
        const msg = JSON.parse(line);
        if (msg.method === "ping")
          process.stdout.write(JSON.stringify({ jsonrpc: "2.0", id: msg.id, result: "pong" }) + "\\n");
        else process.stdout.write(JSON.stringify({ jsonrpc: "2.0", method: "echo", params: msg }) + "\\n");
      }
    });
  `;
  return spawn(process.execPath, ["-e", source], { stdio: ["pipe", "pipe", "pipe"] });
}

describe("what a host sends that nobody can use", () => {
  it("is counted by kind and sampled into the ring, and the channel keeps serving", async () => {
    const proc = scriptedPeer([
      "this is not json",
      '{"hello": "json, but no JSON-RPC"}',
      JSON.stringify({ jsonrpc: "2.0", method: "surprise", params: { x: 1 } }),
      JSON.stringify({ jsonrpc: "2.0", id: 99, result: "a reply nobody asked for" }),
      JSON.stringify({ jsonrpc: "2.0", id: null, error: { code: -32700, message: "parse error" } }),
      JSON.stringify({ jsonrpc: "2.0", method: "boom", params: null }),
      JSON.stringify({ jsonrpc: "2.0", id: 7, method: "approve", params: {} }),
      "",
    ]);
    const ring = new FrameRing();
    const channel = new StdioChannel(proc, ring);
    try {
      channel.expectNotifications(["boom", "echo"]);
      channel.onNotification((method) => {
        if (method === "boom") throw new Error("a listener that throws");
      });
      // The unhandled request is refused (never left waiting): the peer echoes our error reply.
      const refusal = (await channel.nextNotification("echo")) as { id: number; error: { message: string } };
      expect(refusal).toMatchObject({ id: 7, error: { message: "approve is not handled by this client" } });
      expect(await channel.call("ping", {})).toBe("pong");
      expect(ring.counts).toEqual({
        not_json: 1,
        not_rpc: 1,
        unknown_notification: 1,
        unknown_reply: 2,
        listener_error: 1,
        unhandled_request: 1,
      });
      const notes = ring.tail(200).filter((e) => e.startsWith("note "));
      expect(notes).toEqual([
        "note not_json #1: this is not json",
        'note not_rpc #1: {"hello": "json, but no JSON-RPC"}',
        'note unknown_notification #1: surprise {"x":1}',
        "note unknown_reply #1: id 99: result",
        "note unknown_reply #2: id null: error -32700 parse error",
        "note listener_error #1: boom: a listener that throws",
        "note unhandled_request #1: approve (id 7)",
      ]);
    } finally {
      killIfAlive(proc.pid);
    }
  });

  it("a stdout line over the cap fails the channel with a typed reason; its calls fail, nothing waits", async () => {
    const proc = spawn(
      process.execPath,
      ["-e", `process.stdout.write("y".repeat(3 << 20)); setInterval(() => {}, 1 << 30);`],
      { stdio: ["pipe", "pipe", "pipe"] },
    );
    const ring = new FrameRing();
    const channel = new StdioChannel(proc, ring, { maxFrameBytes: 1 << 20 });
    try {
      const failure = await new Promise<Error>((resolve) => channel.onFailed(resolve));
      expect(failure).toMatchObject({
        code: "host_unavailable",
        details: { reason: "frame_too_large", stream: "stdout", limitBytes: 1 << 20 },
      });
      expect(failure.message).toBe("the host sent a stdout line over 1 MiB (its size limit) and is cut off as broken");
      await expect(channel.call("anything")).rejects.toBe(failure);
      expect(ring.counts).toEqual({ frame_too_large: 1 });
      // A listener registered after the failure still hears it.
      expect(await new Promise<Error>((resolve) => channel.onFailed(resolve))).toBe(failure);
    } finally {
      killIfAlive(proc.pid);
    }
  });

  it("limits are checked where a channel is built", () => {
    const proc = { stdout: null } as never;
    expect(() => new StdioChannel(proc, new FrameRing(), { maxFrameBytes: 0 })).toThrow(
      /maxFrameBytes must be an integer/,
    );
    expect(() => new StdioChannel(proc, new FrameRing(), { maxStderrLineBytes: 1e12 })).toThrow(
      /maxStderrLineBytes must be an integer/,
    );
  });
});
