import { describe, expect, it } from "vitest";
import { createScriptedAdapter, type ProviderAdapter, type ProviderAdapterEvent } from "../../src/index.js";
import { deferred, ofType, openTestRuntime, override, recordCalls } from "../support/runtime.js";

/**
 * A provider that makes no empty threads (`threads.canCreateEmptyThread` false): the runtime never
 * asks for one; the first turn makes the thread, whose ref the provider names in its reply (or in
 * the turn's own events, when they come first); a turn that fails before the provider named a
 * thread leaves nothing bound, and the next turn makes one.
 */

const noEmptyThreads = { threads: { canCreateEmptyThread: false } };

/** The adapter, answering sendRun only once the turn's first event went out on its stream: the events come first. */
function eventsBeforeReply(adapter: ProviderAdapter): ProviderAdapter {
  let firstEvent = deferred();
  const events = adapter.streamEvents.bind(adapter);
  return override(adapter, {
    sendRun: async (input) => {
      firstEvent = deferred();
      const reply = await adapter.sendRun(input);
      await firstEvent.promise;
      return reply;
    },
    streamEvents: () => ({
      async *[Symbol.asyncIterator]() {
        for await (const frame of events()) {
          yield frame as ProviderAdapterEvent;
          firstEvent.resolve();
        }
      },
    }),
  });
}

describe("threads made with their first turn", () => {
  it("are never asked for empty; the turn's events, even ahead of its reply, are the turn's", async () => {
    const provider = recordCalls(eventsBeforeReply(createScriptedAdapter({ capabilities: noEmptyThreads })));
    const { rt, events, cleanup } = await openTestRuntime({ p: provider.adapter });
    try {
      const { threadId } = await rt.createThread({ providerTarget: "p" });
      const first = await rt.waitForRun((await rt.sendMessage({ threadId, text: "one" })).runId);
      const second = await rt.waitForRun((await rt.sendMessage({ threadId, text: "two" })).runId);
      expect([first.status, second.status]).toEqual(["completed", "completed"]);
      expect(first.items.map((i) => i.text).join("")).toContain("one");
      expect(ofType(events, "event.fenced")).toEqual([]);
      expect(provider.calls.filter((c) => c.method === "ensureProviderThread")).toEqual([]);
      const sends = provider.calls.filter((c) => c.method === "sendRun").map((c) => c.input.newThread ?? false);
      expect(sends).toEqual([true, false]);
      const bound = ofType(events, "provider_thread.bound");
      expect(bound.map((b) => [b.via, !!b.resumeCursor])).toEqual([["created", true]]);
      expect(second.attempts[0]!.providerThreadId).toBe(first.attempts[0]!.providerThreadId);
      // Bound before the turn that made it was accepted: the turn's handoffs and receipts find it.
      const types = events.map((r) => r.event.type);
      expect(types.indexOf("provider_thread.bound")).toBeLessThan(types.indexOf("attempt.turn_bound"));
    } finally {
      await cleanup();
    }
  });

  it("a turn that fails before the provider named its thread binds nothing, and the next turn makes one", async () => {
    const scripted = createScriptedAdapter({ capabilities: noEmptyThreads });
    let fail = true;
    const provider = recordCalls(
      override(scripted, {
        sendRun: async (input) => {
          if (fail) {
            fail = false;
            throw new Error("provider unavailable");
          }
          return scripted.sendRun(input);
        },
      }),
    );
    const { rt, events, cleanup } = await openTestRuntime({ p: provider.adapter });
    try {
      const { threadId } = await rt.createThread({ providerTarget: "p" });
      const failed = await rt.waitForRun((await rt.sendMessage({ threadId, text: "one" })).runId);
      expect(failed.status).toBe("failed");
      expect(ofType(events, "provider_thread.bound")).toEqual([]);
      const next = await rt.waitForRun((await rt.sendMessage({ threadId, text: "two" })).runId);
      expect(next.status).toBe("completed");
      expect(ofType(events, "provider_thread.bound").map((b) => b.via)).toEqual(["created"]);
      expect(provider.calls.filter((c) => c.method === "sendRun").map((c) => c.input.newThread)).toEqual([true, true]);
    } finally {
      await cleanup();
    }
  });
});
