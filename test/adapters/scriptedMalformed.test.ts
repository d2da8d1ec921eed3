import { afterEach, describe, expect, it } from "vitest";
import { checkReply } from "../../src/adapters/scripted/transport.js";
import { Projections } from "../../src/runtime/projections.js";
import type { DomainEvent } from "../../src/domain/events.js";
import type { Runtime } from "../../src/runtime/runtime.js";
import { hosted, openFaultRuntime } from "../faults/helpers.js";
import { nextEvent } from "../support/runtime.js";

/**
 * Every reply and event of the scripted host (a real host process on stdio) is checked at the adapter's boundary. A
 * turn's end of the wrong shape that names its thread fails its run at once as `protocol_error`: the turn here waits on
 * a gate nobody opens, so only that terminal can end the run before the turn watchdog. A reply of the wrong shape
 * (made so by the host's `debug.replyOnce`) is a `protocol_error` naming the call, never a value handed on as it is.
 */

let cleanups: Array<() => Promise<void>> = [];
afterEach(async () => {
  for (const cleanup of cleanups.reverse()) await cleanup();
  cleanups = [];
});

async function opened() {
  const adapter = hosted();
  const { rt, cleanup } = await openFaultRuntime({ s: adapter });
  cleanups.push(cleanup);
  return { adapter, rt };
}

/** A run whose turn holds at a gate, with its session and the native thread ref its events name. */
async function heldRun(rt: Runtime) {
  const { threadId } = await rt.createThread({ providerTarget: "s" });
  const { runId } = await rt.sendMessage({ threadId, text: "[gate] hold on" });
  await nextEvent(rt, "node.completed", (e) => e.runId === runId);
  const bound = rt.views.providerThreads.get(Projections.providerThreadKey(threadId, "s"))!;
  expect(bound.nativeThreadRef).toEqual(expect.any(String));
  return { runId, sessionId: bound.sessionId, threadRef: bound.nativeThreadRef! };
}

describe("scripted host: turn ends of the wrong shape", () => {
  it("a turn.terminal of the wrong shape that names its thread fails the run at once as protocol_error", async () => {
    const { adapter, rt } = await opened();
    const { runId, sessionId, threadRef } = await heldRun(rt);
    const terminal = { type: "turn.terminal", threadRef, status: "exploded", threadDisposition: "reusable" };
    await adapter.debug("debug.emitRaw", { sessionId, events: [JSON.stringify(terminal)] });
    const run = await rt.waitForRun(runId);
    expect([run.status, run.failure?.failureClass]).toEqual(["failed", "protocol_error"]);
    expect(run.failure?.message).toMatch(/turn\.terminal that does not match its schema: status/);
  }, 30_000);

  it("a turn.terminal in an event frame of the wrong shape fails the run at once as protocol_error", async () => {
    const { adapter, rt } = await opened();
    const { runId, sessionId, threadRef } = await heldRun(rt);
    // A well-formed terminal in an envelope that is not (a seq that is no number): the frame cannot be trusted.
    const terminal = { type: "turn.terminal", threadRef, status: "completed", threadDisposition: "reusable" };
    await adapter.debug("debug.emitRawParams", {
      params: [JSON.stringify({ seq: "next", sessionId, event: terminal })],
    });
    const run = await rt.waitForRun(runId);
    expect([run.status, run.failure?.failureClass]).toEqual(["failed", "protocol_error"]);
    expect(run.failure?.message).toMatch(
      /^the scripted host sent a turn\.terminal that does not match its schema: seq/,
    );
  }, 30_000);
});

describe("scripted host: replies of the wrong shape", () => {
  /** A first run completes (so a host is live to take the hook), then `method`'s next reply is `result`. */
  async function withReply(method: string, result: unknown) {
    const { adapter, rt } = await opened();
    const { threadId } = await rt.createThread({ providerTarget: "s" });
    expect((await rt.waitForRun((await rt.sendMessage({ threadId, text: "hello" })).runId)).status).toBe("completed");
    await adapter.debug("debug.replyOnce", { method, result });
    return { rt, threadId };
  }

  it("a sendRun reply of the wrong shape fails the start: its turn ref never taken, the turn stopped", async () => {
    const { rt, threadId } = await withReply("sendRun", { turnRef: 5 });
    const records: DomainEvent[] = [];
    rt.subscribe({ afterSeq: rt.views.head }, (r) => void records.push(r.event));
    // The turn holds at a gate nobody opens: only the failed reply ends the run (the runtime then stops the turn the
    // host began, so its own interrupted end may come first).
    const run = await rt.waitForRun((await rt.sendMessage({ threadId, text: "[gate] again" })).runId);
    expect(["failed", "interrupted"]).toContain(run.status);
    if (run.status === "failed") {
      expect(run.failure?.failureClass).toBe("protocol_error");
      expect(run.failure?.message).toMatch(/^scripted host: sendRun answered a reply that does not match its schema/);
    }
    expect(JSON.stringify(records)).not.toContain('"nativeTurnRef":5');
  }, 30_000);

  it("an ensureProviderThread reply of the wrong shape fails the run as protocol_error, not a TypeError", async () => {
    const { rt } = await withReply("ensureProviderThread", { threadRef: null });
    const { threadId } = await rt.createThread({ providerTarget: "s" });
    const run = await rt.waitForRun((await rt.sendMessage({ threadId, text: "on a new thread" })).runId);
    expect([run.status, run.failure?.failureClass]).toEqual(["failed", "protocol_error"]);
    expect(run.failure?.message).toMatch(/ensureProviderThread answered a reply that does not match.*resumeCursor/);
  }, 30_000);

  it.each([
    ["resume", { replayed: 0, sessions: [{ sessionId: 7 }] }],
    ["attach", { seq: -1 }],
    ["reattach", { turns: "none" }],
  ] as const)("a %s reply of the wrong shape is a ProtocolError naming the call, not a ZodError", (method, reply) => {
    expect(() => checkReply(method, reply)).toThrow(
      expect.objectContaining({
        code: "protocol_error",
        details: { method },
        message: expect.stringMatching(new RegExp(`^scripted host: ${method} answered a reply that does not match`)),
      }),
    );
  });
});
