import { existsSync } from "node:fs";
import { stat } from "node:fs/promises";
import { dirname } from "node:path";
import { afterEach, describe, expect, it } from "vitest";
import type { ProviderThreadHandle } from "../../src/adapters/contract.js";
import {
  AttachResultSchema,
  ReattachResultSchema,
  type ReattachResult,
} from "../../src/adapters/scripted/protocol/host.js";
import type { ScriptStep } from "../../src/adapters/scripted/host/script.js";
import { createScriptedHostAdapter } from "../../src/index.js";
import { killSocketHosts, SocketClient, spawnSocketHost } from "./socketHost.js";

/*
 * The scripted host on a unix socket, driven over its real transport by a bare client: no
 * token, a private socket, a host a new client takes up without replay (`attach`) and asks
 * what a session still waits on (`reattach`), and its exit when nobody adopts it.
 */

const twoApprovals: ScriptStep[] = [
  { type: "command", command: "ls", output: "x", approval: true },
  { type: "command", command: "rm -rf build", output: "", approval: true },
  { type: "text", text: "done" },
];

afterEach(killSocketHosts);

async function initialized(client: SocketClient, capabilities: Record<string, unknown> = {}) {
  await client.call("init", { capabilities, scripts: { "[two]": twoApprovals } });
}

async function startTurn(client: SocketClient, sessionId: string) {
  const cwd = process.cwd();
  await client.call("startSession", { sessionId, cwd, model: null });
  const thread = await client.call<ProviderThreadHandle>("ensureProviderThread", { sessionId, cwd });
  const { turnRef } = await client.call<{ turnRef: string | null }>("sendRun", {
    sessionId,
    thread: { ...thread, cwd },
    text: "[two] go",
    context: null,
    model: null,
  });
  return { thread: { ...thread, cwd }, turnRef };
}

describe("scripted host on a unix socket", () => {
  it("listens on a socket only its user may open, with no token, and greets every connection", async () => {
    const host = await spawnSocketHost();
    expect((await stat(host.endpoint)).mode & 0o777).toBe(0o600);
    for (let i = 0; i < 2; i++) {
      const client = await SocketClient.connect(host.endpoint);
      expect(client.messages[0]).toMatchObject({ method: "host.ready", params: { pid: host.pid } });
      await client.close();
    }
  });

  it.each([
    ["native request ids", {}],
    ["no native request ids (by ordinal)", { approvals: { approvalsHaveNativeRequestIds: false } }],
  ])(
    "a new client attaches without replay and reattaches a session: its turn and what it waits on (%s)",
    async (_name, capabilities) => {
      const host = await spawnSocketHost();
      const first = await SocketClient.connect(host.endpoint);
      await initialized(first, capabilities);
      const { thread, turnRef } = await startTurn(first, "s1");
      const firstRequest = await first.waitEvent((e) => e.type === "request.opened");
      const firstRef = firstRequest.event.type === "request.opened" ? (firstRequest.event.requestRef ?? null) : null;
      await first.call("respondToRequest", {
        sessionId: "s1",
        thread,
        request: { requestRef: firstRef, turnRef, ordinal: 1 },
        response: { kind: "decision", decision: "accept" },
      });
      const second = await first.waitEvent(
        (e) => e.type === "request.opened" && e.request.kind === "command" && e.request.command === "rm -rf build",
      );
      const secondOpened = second.event.type === "request.opened" ? second.event : null;
      await first.close(); // the runtime that started it is gone

      const next = await SocketClient.connect(host.endpoint);
      const { seq } = AttachResultSchema.parse(await next.call("attach", {}));
      expect(seq).toBeGreaterThanOrEqual(second.seq);
      const expected: ReattachResult = {
        turns: [
          {
            threadRef: thread.threadRef,
            turnRef,
            pendingRequests: [{ requestRef: secondOpened?.requestRef ?? null, ordinal: 2 }],
          },
        ],
      };
      expect(ReattachResultSchema.parse(await next.call("reattach", { sessionId: "s1" }))).toEqual(expected);
      expect(await next.call("reattach", { sessionId: "unknown" })).toBeNull();

      await next.call("respondToRequest", {
        sessionId: "s1",
        thread,
        request: { requestRef: secondOpened?.requestRef ?? null, turnRef, ordinal: 2 },
        response: { kind: "decision", decision: "accept" },
      });
      const terminal = await next.waitEvent((e) => e.type === "turn.terminal");
      expect(terminal.event).toMatchObject({ status: "completed", turnRef });
      // Nothing from before the attach came again: every event this client got is newer.
      const seqs = next.messages.flatMap((m) =>
        "method" in m && m.method === "event" ? [(m.params as { seq: number }).seq] : [],
      );
      expect(seqs.length).toBeGreaterThan(0);
      expect(seqs.every((s) => s > seq)).toBe(true);
      expect(await next.call("reattach", { sessionId: "s1" })).toEqual({ turns: [] });
    },
  );

  it("refuses attach and reattach before init", async () => {
    const host = await spawnSocketHost();
    const client = await SocketClient.connect(host.endpoint);
    await expect(client.call("attach", {})).rejects.toMatchObject({ code: "protocol_error" });
    await expect(client.call("reattach", { sessionId: "s1" })).rejects.toMatchObject({ code: "protocol_error" });
  });

  it("exits once nobody has been connected for --orphan-ttl-ms, leaving neither socket nor directory", async () => {
    const host = await spawnSocketHost(["--orphan-ttl-ms=200"]);
    const client = await SocketClient.connect(host.endpoint);
    await initialized(client);
    await startTurn(client, "s1"); // a turn waiting on an approval does not keep it alive
    await client.close();
    expect(await host.exited).toEqual({ code: 0, signal: null });
    expect(existsSync(host.endpoint)).toBe(false);
    expect(existsSync(dirname(host.endpoint))).toBe(false);
  });
});

describe("a record that says pending requests survive a restart", () => {
  it("is refused (invalid_input) for a host that dies with the runtime: stdio or a loopback WebSocket", () => {
    const capabilities = { sessions: { pendingRequestsSurviveRestart: true } };
    for (const transport of ["stdio", "websocket"] as const)
      expect(() => createScriptedHostAdapter({ transport, capabilities })).toThrow(
        expect.objectContaining({
          code: "invalid_input",
          field: "capabilities.sessions.pendingRequestsSurviveRestart",
        }),
      );
    expect(createScriptedHostAdapter({ transport: "socket", capabilities }).reattachSession).toBeTypeOf("function");
  });
});
