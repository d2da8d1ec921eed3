import { afterEach, beforeEach, describe, expect, it, vi, type MockInstance } from "vitest";
import { isTillerError } from "../../src/domain/errors.js";
import type { RunView } from "../../src/index.js";
import { alive } from "../faults/helpers.js";
import { until } from "../support/runtime.js";
import { anomalies, fakeWorld, shell, TARGET, type Action, type FakeScript, type FakeWorld } from "./fakeAgent.js";

/**
 * The ACP adapter against a hostile agent: a stand-in process (fakeAgent.mjs, never a real agent) speaking ACP on
 * stdio as each test scripts it, under the real adapter and the real runtime. What each test expects is the ACP
 * spec's (JSON-RPC 2.0 on stdio, newline-delimited; a request gets exactly one response; on `session/cancel` the
 * client answers every pending `session/request_permission` as `cancelled`; no batches) or Tiller's own contract
 * (docs/guarantees.md: what a host sends that nobody can use is counted by kind and sampled into the ring, a host over
 * the frame cap is cut off as broken and its runs fail, a lost session fails its runs and expires its requests;
 * docs/api.md: a reply of the wrong shape is `protocol_error`, never a raw TypeError; a request that expired or was
 * settled is refused, typed). Nothing a hostile frame does may reach the console.
 */

const ok: Action = { reply: { stopReason: "end_turn" } };
const cancelled: Action = { reply: { stopReason: "cancelled" } };
/** A turn that waits for the client's `session/cancel` and ends cancelled, as ACP has it. */
const untilCancelled: Action[] = [{ text: "working" }, { waitMethod: "session/cancel" }, cancelled];

let w: FakeWorld | null = null;
let errors: MockInstance<typeof console.error>;
let warnings: MockInstance<typeof console.warn>;
const rejections: unknown[] = [];
const onRejection = (reason: unknown) => void rejections.push(reason);

beforeEach(() => {
  errors = vi.spyOn(console, "error");
  warnings = vi.spyOn(console, "warn");
  rejections.length = 0;
  process.on("unhandledRejection", onRejection);
});
afterEach(async () => {
  process.off("unhandledRejection", onRejection);
  errors.mockRestore();
  warnings.mockRestore();
  await w?.cleanup();
  w = null;
});

/** What was printed to the console (console.error and console.warn), by the SDK or anyone. */
const printed = (): unknown[][] => [...errors.mock.calls, ...warnings.mock.calls];

/** Nothing was printed: not by the SDK, not by the adapter. */
function quiet(): void {
  expect(printed()).toEqual([]);
}

async function world(script: FakeScript, adapter: Parameters<typeof fakeWorld>[1] = {}): Promise<FakeWorld> {
  w = await fakeWorld(script, adapter);
  await w.open();
  return w;
}

async function thread(world: FakeWorld): Promise<string> {
  return (await world.rt.createThread({ providerTarget: TARGET, cwd: world.root })).threadId;
}

async function send(world: FakeWorld, threadId: string, text = "go"): Promise<string> {
  return (await world.rt.sendMessage({ threadId, text })).runId;
}

/** The run once terminal; a run still going after 20 s is stuck (a rejection, `timeout`). */
const settled = (world: FakeWorld, runId: string, timeoutMs = 20_000): Promise<RunView> =>
  world.rt.waitForRun(runId, { timeoutMs });

const textOf = (run: RunView): string =>
  run.items
    .filter((i) => i.kind === "assistant_message")
    .map((i) => i.text)
    .join("|");

const pending = async (world: FakeWorld, threadId: string, count = 1, limitMs = 10_000) => {
  await until(`${count} pending request(s)`, () => world.rt.views.pendingRequests(threadId).length >= count, limitMs);
  return world.rt.views.pendingRequests(threadId);
};

/** A JSON-RPC message from the agent, as a line. */
const rpc = (message: Record<string, unknown>) => JSON.stringify({ jsonrpc: "2.0", ...message });
const update = (sessionId: string, u: Record<string, unknown>) =>
  rpc({ method: "session/update", params: { sessionId, update: u } });
const chunk = (text: string) => ({ sessionUpdate: "agent_message_chunk", content: { type: "text", text } });

describe("acp: hostile frames mid-turn are noted, never printed, and the turn goes on", () => {
  // Each frame comes between two chunks of the turn's message: the run must complete with both, the frame counted once
  // in the agent's ring (guarantees.md: "what a host sends that nobody can use ... is counted by kind and sampled").
  const frames: Array<[string, string]> = [
    ["a line that is not JSON", "this is not json {"],
    ["a JSON number", "42"],
    ["JSON null", "null"],
    ["a JSON string", '"session/update"'],
    ["a JSON array", "[1,2,3]"],
    // ACP uses no batches: its entries are never played (BATCHED must not show in the turn).
    ["a JSON-RPC batch", `[${update("$session", chunk("BATCHED"))}]`],
    ["a reply to an id never sent", rpc({ id: 999, result: {} })],
    ["a reply with a string id never sent", rpc({ id: "nobody-asked", result: { stopReason: "end_turn" } })],
    // codex-acp answers a notification it does not know with this: an error with no id.
    ["an error object with no id", rpc({ error: { code: -32601, message: "Method not found" } })],
    ["an error with a null id", rpc({ id: null, error: { code: -32700, message: "Parse error" } })],
    ["an object that is no JSON-RPC message", JSON.stringify({ hello: "world" })],
    ["a session/update of an unknown kind", update("$session", { sessionUpdate: "brand_new_kind", x: 1 })],
    ["a session/update of the wrong shape", update("$session", { sessionUpdate: "agent_message_chunk", content: 42 })],
    ["a session/update with no params", rpc({ method: "session/update" })],
    ["a session/update of a session nobody opened", update("nobody", chunk("GHOST"))],
    ["a notification of a method ACP does not have", rpc({ method: "session/nonsense", params: {} })],
  ];

  it.each(frames)("%s", async (_, frame) => {
    const world_ = await world({ prompts: [[{ text: "hello " }, { raw: frame }, { text: "world" }, ok]] });
    const ring = world_.rings[0]!;
    const before = anomalies(ring);
    const run = await settled(world_, await send(world_, await thread(world_)));
    expect(run.status).toBe("completed");
    expect(textOf(run)).toBe("hello world");
    // Counted once, and nothing printed (the SDK's own console.error for what it cannot read included).
    expect({ counted: anomalies(ring) - before, printed: printed() }).toEqual({ counted: 1, printed: [] });
  });

  it("the prompt's id as a string is no reply to it (JSON-RPC: the same value); the real one ends it", async () => {
    const world_ = await world({
      prompts: [[{ send: { id: "$idString", result: { stopReason: "refusal" } } }, { text: "still going" }, ok]],
    });
    const ring = world_.rings[0]!;
    const run = await settled(world_, await send(world_, await thread(world_)));
    expect(run.status).toBe("completed");
    expect(textOf(run)).toBe("still going");
    expect(ring.counts.unknown_reply).toBe(1);
    quiet();
  });

  it("a request ACP gives the agent no right to (terminal/create, none offered) is refused and counted", async () => {
    const world_ = await world({
      prompts: [
        [
          { send: { id: 77, method: "terminal/create", params: { sessionId: "$session", command: "rm" } } },
          { waitReply: 77 },
          { text: "refused" },
          ok,
        ],
      ],
    });
    const ring = world_.rings[0]!;
    const before = anomalies(ring);
    const run = await settled(world_, await send(world_, await thread(world_)));
    expect(run.status).toBe("completed");
    const replies = world_.repliesTo(77);
    expect(replies).toHaveLength(1);
    expect(replies[0]).toHaveProperty("error");
    expect({ counted: anomalies(ring) - before, printed: printed() }).toEqual({ counted: 1, printed: [] });
  });

  it("a permission request of the wrong shape is refused (an error reply), counted, and shown to nobody", async () => {
    const bad = { id: 78, method: "session/request_permission", params: { sessionId: "$session", toolCall: 5 } };
    const world_ = await world({ prompts: [[{ send: bad }, { waitReply: 78 }, { text: "refused" }, ok]] });
    const ring = world_.rings[0]!;
    const before = anomalies(ring);
    const run = await settled(world_, await send(world_, await thread(world_)));
    expect(run.status).toBe("completed");
    expect(run.items.map((i) => i.kind)).toEqual(["user_message", "assistant_message"]);
    const replies = world_.repliesTo(78);
    expect(replies).toHaveLength(1);
    expect(replies[0]).toHaveProperty("error");
    expect({ counted: anomalies(ring) - before, printed: printed() }).toEqual({ counted: 1, printed: [] });
  });

  it("a tool call whose raw input nests 100,000 deep costs that tool at most: the turn completes", async () => {
    const deep = `${"[".repeat(100_000)}${"]".repeat(100_000)}`;
    const frame =
      `{"jsonrpc":"2.0","method":"session/update","params":{"sessionId":"$session","update":` +
      `{"sessionUpdate":"tool_call","toolCallId":"deep","title":"deep","kind":"other","rawInput":${deep}}}}`;
    const world_ = await world({ prompts: [[{ text: "before " }, { raw: frame }, { text: "after" }, ok]] });
    const run = await settled(world_, await send(world_, await thread(world_)));
    expect(run.status).toBe("completed");
    expect(run.items.filter((i) => i.kind === "assistant_message").map((i) => i.text)).toEqual(["before ", "after"]);
    quiet();
  });

  it("updates sent before the prompt's response are all in the turn (nothing overtakes them), in order", async () => {
    const words = Array.from({ length: 40 }, (_, i) => `w${i} `);
    const tool = {
      toolCallId: "t1",
      title: "echo hi",
      kind: "execute",
      status: "pending",
      rawInput: { command: "ls" },
    };
    const done = {
      sessionUpdate: "tool_call_update",
      toolCallId: "t1",
      status: "completed",
      content: [{ type: "content", content: { type: "text", text: "tool output" } }],
    };
    const world_ = await world({
      prompts: [
        [
          {
            group: [
              { update: { sessionUpdate: "tool_call", ...tool } },
              { update: done },
              ...words.map((text) => ({ text })),
              ok,
            ],
          },
        ],
      ],
    });
    const run = await settled(world_, await send(world_, await thread(world_)));
    expect(run.status).toBe("completed");
    expect(run.items.map((i) => i.kind)).toEqual(["user_message", "command", "assistant_message"]);
    expect(run.items[1]).toMatchObject({ status: "complete" });
    expect(textOf(run)).toBe(words.join(""));
  });

  it("an update after the prompt's response is no part of the next turn", async () => {
    const world_ = await world({
      prompts: [
        [{ text: "first" }, ok, { sleep: 100 }, { text: "LATE" }],
        [{ text: "second" }, ok],
      ],
    });
    const threadId = await thread(world_);
    const first = await settled(world_, await send(world_, threadId));
    await until("the late update", () => world_.log().some((e) => e.d === "out" && e.line.includes("LATE")));
    const second = await settled(world_, await send(world_, threadId));
    expect([textOf(first), textOf(second)]).toEqual(["first", "second"]);
  });

  it("an update of another thread's session in the same agent goes to neither run", async () => {
    const world_ = await world({
      prompts: [
        [{ text: "a0" }, ok],
        [{ text: "b0" }, ok],
        [{ text: "mine" }, { raw: update("s2", chunk("NOT MINE")) }, ok],
        [{ text: "b1" }, ok],
      ],
    });
    const [a, b] = [await thread(world_), await thread(world_)];
    const texts = [];
    // Thread a's session is s1, b's is s2 (one agent process); then a's turn sends an update of s2, idle.
    for (const threadId of [a, b, a, b]) texts.push(textOf(await settled(world_, await send(world_, threadId))));
    expect(texts).toEqual(["a0", "b0", "mine", "b1"]);
    const items = [a, b].flatMap((t) => world_.rt.views.threads.get(t)!.runs.flatMap((r) => r.items));
    expect(items.filter((i) => i.text?.includes("NOT MINE"))).toEqual([]);
  });
});

describe("acp: an over-long line", () => {
  it("cuts the agent off as broken: the run fails, the agent is stopped, a new agent goes on", async () => {
    const world_ = await world(
      {
        prompts: [
          [{ text: "partial" }, { flood: 8 * 1024 * 1024 }, { sleep: 60_000 }],
          [{ text: "back" }, ok],
        ],
      },
      { limits: { maxFrameBytes: 256 * 1024 } },
    );
    const threadId = await thread(world_);
    const run = await settled(world_, await send(world_, threadId));
    expect(run.status).toBe("failed");
    expect(run.failure?.failureClass).toBe("provider_session_lost");
    expect(world_.rings[0]!.counts.frame_too_large).toBe(1);
    const pid = world_.agentPid();
    expect(pid).not.toBeNull();
    await until("the broken agent stopped", () => !alive(pid!), 10_000);
    const next = await settled(world_, await send(world_, threadId));
    expect([next.status, textOf(next)]).toEqual(["completed", "back"]);
    quiet();
  });
});

describe("acp: permission requests", () => {
  const ask = (id: unknown, command: string, sessionId?: string): Action => ({
    permission: { id, toolCall: shell(`tool-${String(id)}-${command}`, command), ...(sessionId ? { sessionId } : {}) },
  });
  const selected = (reply: Record<string, any> | undefined) => reply?.result?.outcome?.optionId ?? null;

  it("one for a session nobody opened is answered (never left waiting) and shown to nobody", async () => {
    const world_ = await world({ prompts: [[ask(5, "rm -rf /", "ghost"), { waitReply: 5 }, { text: "done" }, ok]] });
    const threadId = await thread(world_);
    const run = await settled(world_, await send(world_, threadId));
    expect(run.status).toBe("completed");
    expect(world_.rt.views.pendingRequests(threadId)).toEqual([]);
    const replies = world_.repliesTo(5);
    expect(replies).toHaveLength(1);
    expect(selected(replies[0])).toBeNull();
    quiet();
  });

  it("one of an open session between turns is answered at once, not selected, and shown to nobody", async () => {
    const world_ = await world({
      prompts: [
        [{ text: "one" }, ok, { sleep: 100 }, ask(6, "rm -rf /", "s1")],
        [{ text: "two" }, ok],
      ],
    });
    const threadId = await thread(world_);
    const first = await settled(world_, await send(world_, threadId));
    // Nobody is asked, so nobody answers it: the client does, at once (JSON-RPC: every request gets a response).
    await until("the request answered", () => world_.repliesTo(6).length > 0, 5_000).catch(() => undefined);
    expect(world_.repliesTo(6).map(selected)).toEqual([null]);
    expect(world_.rt.views.pendingRequests(threadId)).toEqual([]);
    const second = await settled(world_, await send(world_, threadId));
    expect([first, second].map((r) => r.items.map((i) => i.kind))).toEqual([
      ["user_message", "assistant_message"],
      ["user_message", "assistant_message"],
    ]);
  });

  it("a string request id is answered with that very id", async () => {
    const world_ = await world({ prompts: [[ask("req-abc", "echo hi"), { waitReply: "req-abc" }, ok]] });
    const threadId = await thread(world_);
    const runId = await send(world_, threadId);
    const [request] = await pending(world_, threadId);
    await world_.rt.respond({ requestId: request!.requestId, response: { kind: "decision", decision: "accept" } });
    expect((await settled(world_, runId)).status).toBe("completed");
    expect(world_.repliesTo("req-abc").map(selected)).toEqual(["allow"]);
  });

  it('ids 7 and "7" are two requests (JSON-RPC ids are typed): both shown, each answered as its own', async () => {
    const world_ = await world({
      prompts: [
        [{ group: [ask(7, "echo number"), ask("7", "echo string")] }, { waitReply: 7 }, { waitReply: "7" }, ok],
      ],
    });
    const threadId = await thread(world_);
    const runId = await send(world_, threadId);
    await pending(world_, threadId, 2, 3_000).catch(() => undefined);
    const shown = world_.rt.views.pendingRequests(threadId);
    const commands = shown.map((r) => (r.payload as { command?: string }).command).sort();
    expect(commands).toEqual(["echo number", "echo string"]);
    const byCommand = (command: string) => shown.find((r) => JSON.stringify(r.payload).includes(command))!;
    const accept = { kind: "decision", decision: "accept" } as const;
    const decline = { kind: "decision", decision: "decline" } as const;
    await world_.rt.respond({ requestId: byCommand("echo number").requestId, response: accept });
    await world_.rt.respond({ requestId: byCommand("echo string").requestId, response: decline });
    expect((await settled(world_, runId)).status).toBe("completed");
    expect([world_.repliesTo(7).map(selected), world_.repliesTo("7").map(selected)]).toEqual([["allow"], ["reject"]]);
  });

  it('an approval given for request 7 never approves request "7" (another command)', async () => {
    const world_ = await world({
      prompts: [[{ group: [ask(7, "echo safe"), ask("7", "rm -rf ~")] }, { sleep: 60_000 }]],
    });
    const threadId = await thread(world_);
    await send(world_, threadId);
    await pending(world_, threadId);
    await new Promise((r) => setTimeout(r, 300)); // the second request, if it is shown at all
    const safe = world_.rt.views.pendingRequests(threadId).find((r) => JSON.stringify(r.payload).includes("echo safe"));
    expect(safe, "the request for echo safe is shown").toBeDefined();
    await world_.rt.respond({ requestId: safe!.requestId, response: { kind: "decision", decision: "accept" } });
    await until("the agent hears an answer", () => world_.repliesTo(7).length + world_.repliesTo("7").length > 0);
    await new Promise((r) => setTimeout(r, 200));
    // The user allowed "echo safe" (id 7): that answer goes to 7; "rm -rf ~" ("7") is not allowed by it.
    expect({ number: world_.repliesTo(7).map(selected), string: world_.repliesTo("7").map(selected) }).toEqual({
      number: ["allow"],
      string: [],
    });
  });

  it("two requests with one JSON-RPC id: an interrupt answers every request the agent sent, none allowed", async () => {
    const world_ = await world({
      prompts: [[{ group: [ask(8, "echo one"), ask(8, "echo two")] }, ...untilCancelled], [ok]],
    });
    const threadId = await thread(world_);
    const runId = await send(world_, threadId);
    await pending(world_, threadId);
    await world_.rt.interrupt({ runId });
    expect((await settled(world_, runId)).status).toBe("interrupted");
    // ACP: on session/cancel the client answers every pending permission request, cancelled; two were sent.
    await until("both requests answered", () => world_.repliesTo(8).length >= 2, 5_000).catch(() => undefined);
    expect(world_.repliesTo(8).map(selected)).toEqual([null, null]);
  });

  it("answered twice: the second answer is refused, typed, and the agent hears one", async () => {
    const world_ = await world({ prompts: [[ask(9, "echo hi"), { waitReply: 9 }, { sleep: 200 }, ok]] });
    const threadId = await thread(world_);
    const runId = await send(world_, threadId);
    const [request] = await pending(world_, threadId);
    const accept = { kind: "decision", decision: "accept" } as const;
    await world_.rt.respond({ requestId: request!.requestId, response: accept });
    const again = await world_.rt.respond({ requestId: request!.requestId, response: accept }).catch((e) => e);
    expect(isTillerError(again)).toBe(true);
    expect((await settled(world_, runId)).status).toBe("completed");
    expect(world_.repliesTo(9).map(selected)).toEqual(["allow"]);
  });

  it("still open when the turn ends: expired, an answer refused typed, and the agent's request answered", async () => {
    const world_ = await world({ prompts: [[ask(10, "echo late"), { sleep: 300 }, ok, { sleep: 60_000 }]] });
    const threadId = await thread(world_);
    const runId = await send(world_, threadId);
    const [request] = await pending(world_, threadId);
    expect((await settled(world_, runId)).status).toBe("completed");
    expect(world_.rt.views.requests.get(request!.requestId)?.status).not.toBe("pending");
    const late = await world_.rt
      .respond({ requestId: request!.requestId, response: { kind: "decision", decision: "accept" } })
      .catch((e) => e);
    expect(isTillerError(late)).toBe(true);
    // JSON-RPC: every request gets a response; the turn it belonged to is over, so it is not allowed.
    await until("the agent's request answered", () => world_.repliesTo(10).length > 0, 5_000).catch(() => undefined);
    expect(world_.repliesTo(10).map(selected)).toEqual([null]);
  });

  it("the runtime closing with a request pending: it is answered cancelled before the agent is stopped", async () => {
    // What the client wrote, in order (the agent may be stopped before it reads its last lines: JSON-RPC asks the
    // client to answer, not the agent to listen).
    const written: Array<Record<string, any>> = [];
    const tap = (direction: "in" | "out", line: string) => {
      if (direction === "out") written.push(JSON.parse(line) as Record<string, any>);
    };
    const world_ = await world({ prompts: [[ask(14, "echo hi"), { waitReply: 14 }, cancelled]] }, { tap });
    const threadId = await thread(world_);
    await send(world_, threadId);
    await pending(world_, threadId);
    const pid = world_.agentPid();
    await world_.rt.close();
    const replies = written.filter((m) => !("method" in m) && m.id === 14);
    expect(replies).toHaveLength(1);
    expect(replies[0]).toHaveProperty("result.outcome.outcome", "cancelled");
    expect(pid !== null && alive(pid)).toBe(false);
  });

  it("withdrawn ($/cancel_request) before any answer: resolved, a late answer refused, one reply", async () => {
    const world_ = await world({
      prompts: [[ask(11, "echo hi"), { sleep: 300 }, { withdraw: 11 }, { waitReply: 11 }, { text: "gone" }, ok]],
    });
    const threadId = await thread(world_);
    const runId = await send(world_, threadId);
    const [request] = await pending(world_, threadId);
    await until("the request withdrawn", () => world_.rt.views.pendingRequests(threadId).length === 0, 10_000);
    const late = await world_.rt
      .respond({ requestId: request!.requestId, response: { kind: "decision", decision: "accept" } })
      .catch((e) => e);
    expect(isTillerError(late)).toBe(true);
    expect((await settled(world_, runId)).status).toBe("completed");
    await until("the agent hears the request is over", () => world_.repliesTo(11).length > 0, 5_000);
    expect(world_.repliesTo(11).map(selected)).toEqual([null]);
    quiet();
  });

  it("withdrawn after it was answered: the agent hears one answer, the user's", async () => {
    const world_ = await world({
      prompts: [[ask(12, "echo hi"), { waitReply: 12 }, { withdraw: 12 }, { sleep: 200 }, { text: "after" }, ok]],
    });
    const threadId = await thread(world_);
    const runId = await send(world_, threadId);
    const [request] = await pending(world_, threadId);
    await world_.rt.respond({ requestId: request!.requestId, response: { kind: "decision", decision: "accept" } });
    const run = await settled(world_, runId);
    expect([run.status, textOf(run)]).toEqual(["completed", "after"]);
    expect(world_.repliesTo(12).map(selected)).toEqual(["allow"]);
    quiet();
  });
});

describe("acp: the agent's answers to the client", () => {
  it("session/prompt answered with an error: the run fails as the provider's error; the thread goes on", async () => {
    const world_ = await world({
      prompts: [
        [{ text: "so far" }, { replyError: { code: -32603, message: "the model exploded" } }],
        [{ text: "ok" }, ok],
      ],
    });
    const threadId = await thread(world_);
    const run = await settled(world_, await send(world_, threadId));
    expect([run.status, run.failure?.failureClass]).toEqual(["failed", "provider_error"]);
    expect(run.failure?.message).toContain("the model exploded");
    const next = await settled(world_, await send(world_, threadId));
    expect([next.status, textOf(next)]).toEqual(["completed", "ok"]);
    quiet();
  });

  it.each([
    ["null", null],
    ["an object without stopReason", {}],
  ])("session/prompt answered with %s: the run fails at once as protocol_error, nothing thrown", async (_, result) => {
    const world_ = await world({
      prompts: [
        [{ text: "so far" }, { reply: result }],
        [{ text: "ok" }, ok],
      ],
    });
    const threadId = await thread(world_);
    const run = await settled(world_, await send(world_, threadId), 10_000).catch((e: Error) => e);
    // api.md: a turn's end of the wrong shape fails its run at once as protocol_error, never a raw TypeError (here
    // thrown out of the adapter: an unhandled rejection, which kills a Node process that embeds the runtime).
    expect({
      outcome: run instanceof Error ? run.message : [run.status, run.failure?.failureClass],
      unhandled: rejections.map(String),
    }).toEqual({ outcome: ["failed", "protocol_error"], unhandled: [] });
    const next = await settled(world_, await send(world_, threadId));
    expect([next.status, textOf(next)]).toEqual(["completed", "ok"]);
  });

  it("session/new answered without a sessionId: the run fails as protocol_error naming session/new", async () => {
    const world_ = await world({ newSession: [{ reply: { notASessionId: true } }] });
    const run = await settled(world_, await send(world_, await thread(world_)));
    expect(run.status).toBe("failed");
    expect(run.failure?.failureClass).toBe("protocol_error");
    expect(run.failure?.message).toContain("session/new");
    expect(rejections).toEqual([]);
  });
});

describe("acp: the handshake", () => {
  /** Opens the runtime, which negotiates the agent's record at open: the error it fails with, and how long it took. */
  async function opening(script: FakeScript, adapter: Parameters<typeof fakeWorld>[1] = {}) {
    w = await fakeWorld(script, adapter);
    const t0 = performance.now();
    const error = await w.open().then(
      () => null,
      (e: unknown) => e,
    );
    return { error: error as { code?: string; message?: string } | null, ms: performance.now() - t0 };
  }

  it("initialize answered with another protocol version: open fails typed, naming it; agent stopped", async () => {
    // ACP: a client that does not speak the agent's version closes the connection and tells the user.
    const { error } = await opening({ initialize: [{ reply: { protocolVersion: 2, agentCapabilities: {} } }] });
    expect(isTillerError(error)).toBe(true);
    expect(error?.message).toMatch(/version 2\b/);
    const pid = w!.agentPid();
    await until("the agent stopped", () => pid !== null && !alive(pid), 10_000);
  });

  it("initialize answered with null: open fails typed, a protocol error naming the call, not a TypeError", async () => {
    const { error } = await opening({ initialize: [{ reply: null }] });
    // api.md: a reply of the wrong shape is a protocol error naming the call, never a raw TypeError. The host's
    // supervisor reports a host that never completed its handshake as unavailable, with that error as its reason.
    expect(isTillerError(error)).toBe(true);
    expect(error?.message).toMatch(/ProtocolError: the agent answered initialize with null/);
    expect(error?.message).not.toMatch(/Cannot read|TypeError/);
  });

  it("initialize answered with an error: open fails typed, with the agent's message", async () => {
    const { error } = await opening({ initialize: [{ replyError: { code: -32000, message: "log in first" } }] });
    expect(isTillerError(error)).toBe(true);
    expect(error?.message).toContain("log in first");
  });

  it("initialize never answered: open fails host_unavailable within the startup timeout; agent stopped", async () => {
    const { error, ms } = await opening({ initialize: [] }, { policy: { startupTimeoutMs: 1_500 } });
    expect(isTillerError(error)).toBe(true);
    expect(error?.code).toBe("host_unavailable");
    expect(ms).toBeLessThan(15_000);
    const pid = w!.agentPid();
    await until("the agent stopped", () => pid !== null && !alive(pid), 10_000);
  });

  it("an agent that exits at startup: open fails host_unavailable, at once", async () => {
    const { error, ms } = await opening({ startup: [{ raw: "booting..." }, { exit: 3 }] });
    expect(isTillerError(error)).toBe(true);
    expect(error?.code).toBe("host_unavailable");
    expect(ms).toBeLessThan(15_000);
    quiet();
  });

  it("an agent that exits as a session opens: the run fails, typed, and nothing is left running", async () => {
    const world_ = await world({ newSession: [{ exit: 1 }] });
    const run = await settled(world_, await send(world_, await thread(world_)));
    expect(run.status).toBe("failed");
    expect(run.failure?.failureClass).toEqual(expect.any(String));
    const pid = world_.agentPid();
    await until("the agent gone", () => pid !== null && !alive(pid), 10_000);
  });
});

describe("acp: an agent that dies", () => {
  it("SIGKILL mid-turn, a request pending: provider_session_lost, request expired, the thread goes on", async () => {
    const world_ = await world({
      prompts: [
        [{ text: "partial" }, { permission: { id: 1, toolCall: shell("t", "echo x") } }, { sleep: 60_000 }],
        [{ text: "back" }, ok],
      ],
    });
    const threadId = await thread(world_);
    const runId = await send(world_, threadId);
    const [request] = await pending(world_, threadId);
    process.kill(world_.agentPid()!, "SIGKILL");
    const run = await settled(world_, runId);
    expect([run.status, run.failure?.failureClass]).toEqual(["failed", "provider_session_lost"]);
    await expect(
      world_.rt.respond({ requestId: request!.requestId, response: { kind: "decision", decision: "accept" } }),
    ).rejects.toMatchObject({ code: "not_resumable" });
    // The next turn runs in a new agent process (the script plays on: its second prompt).
    const next = await settled(world_, await send(world_, threadId));
    expect([next.status, textOf(next)]).toEqual(["completed", "back"]);
    quiet();
  });

  it("the agent kills itself mid-turn: provider_session_lost, nothing left running", async () => {
    const world_ = await world({
      prompts: [
        [{ text: "partial" }, { sleep: 200 }, { kill: "SIGKILL" }],
        [{ text: "back" }, ok],
      ],
    });
    const threadId = await thread(world_);
    const run = await settled(world_, await send(world_, threadId));
    const pid = world_.agentPid();
    expect([run.status, run.failure?.failureClass]).toEqual(["failed", "provider_session_lost"]);
    expect(world_.rt.views.pendingRequests(threadId)).toEqual([]);
    expect(alive(pid!)).toBe(false);
    const next = await settled(world_, await send(world_, threadId));
    expect([next.status, textOf(next)]).toEqual(["completed", "back"]);
  });

  it("the agent exits cleanly mid-turn (code 0): the run fails as provider_session_lost, not stuck", async () => {
    const world_ = await world({
      prompts: [
        [{ text: "partial" }, { exit: 0 }],
        [{ text: "back" }, ok],
      ],
    });
    const threadId = await thread(world_);
    const run = await settled(world_, await send(world_, threadId));
    expect([run.status, run.failure?.failureClass]).toEqual(["failed", "provider_session_lost"]);
  });
});

describe("acp: concurrency", () => {
  it("two messages at once on one thread: both complete, never two prompts of one session at once", async () => {
    const world_ = await world({ prompts: [[{ text: "turn $n" }, { sleep: 300 }, ok]] });
    const threadId = await thread(world_);
    const [a, b] = await Promise.all([send(world_, threadId, "one"), send(world_, threadId, "two")]);
    const runs = [await settled(world_, a), await settled(world_, b)];
    expect(runs.map((r) => r.status)).toEqual(["completed", "completed"]);
    // In the agent's log: each prompt comes after the previous prompt's response.
    let open: unknown = null;
    for (const entry of world_.log()) {
      const m = JSON.parse(entry.line) as Record<string, any>;
      if (entry.d === "in" && m.method === "session/prompt") {
        expect(open, "a prompt while another of the session runs").toBeNull();
        open = m.id;
      }
      if (entry.d === "out" && open !== null && m.id === open && !("method" in m)) open = null;
    }
    quiet();
  });

  it("an interrupt that races the turn's own end: the run settles once, the next turn is not cancelled", async () => {
    const world_ = await world({
      prompts: [
        [{ text: "quick" }, { sleep: 30 }, ok],
        [{ text: "next" }, ok],
      ],
    });
    const threadId = await thread(world_);
    const runId = await send(world_, threadId);
    await until("streaming", () => world_.rt.views.runs.get(runId)!.items.some((i) => i.kind === "assistant_message"));
    await world_.rt.interrupt({ runId }).catch((e: unknown) => e);
    expect(["completed", "interrupted"]).toContain((await settled(world_, runId)).status);
    const next = await settled(world_, await send(world_, threadId));
    expect([next.status, textOf(next)]).toEqual(["completed", "next"]);
  });

  it("interrupt twice at once: both acknowledged, the run ends interrupted once, the thread goes on", async () => {
    const world_ = await world({ prompts: [untilCancelled, [{ text: "next" }, ok]] });
    const threadId = await thread(world_);
    const runId = await send(world_, threadId);
    await until("streaming", () => world_.rt.views.runs.get(runId)!.items.some((i) => i.kind === "assistant_message"));
    const receipts = await Promise.all([world_.rt.interrupt({ runId }), world_.rt.interrupt({ runId })]);
    expect(receipts.map((r) => r.runId)).toEqual([runId, runId]);
    const run = await settled(world_, runId);
    expect([run.status, run.attempts.length]).toEqual(["interrupted", 1]);
    const next = await settled(world_, await send(world_, threadId));
    expect([next.status, textOf(next)]).toEqual(["completed", "next"]);
    quiet();
  });
});
