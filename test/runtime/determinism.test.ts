import { describe, expect, it } from "vitest";
import {
  createScriptedAdapter,
  keyedScript,
  type ProviderAdapter,
  type ProviderAdapterEvent,
  type ScriptStep,
} from "../../src/index.js";
import type { Strength } from "../../src/capabilities/schema.js";
import { Normalizer, type Routed } from "../../src/runtime/ingest/normalizer.js";
import { nextEvent, ofType, openTestRuntime } from "../support/runtime.js";

/**
 * Replay determinism: the provider transcript of a live run, replayed through a fresh
 * normalizer from the same initial state, yields exactly the ids the live run committed.
 */

type Entry = { sendRun: number } | { event: ProviderAdapterEvent };

function recordTranscript(adapter: ProviderAdapter): { adapter: ProviderAdapter; transcript: Entry[] } {
  const transcript: Entry[] = [];
  let turns = 0;
  const wrapped = Object.create(adapter) as ProviderAdapter;
  wrapped.sendRun = (input) => {
    transcript.push({ sendRun: turns++ });
    return adapter.sendRun(input);
  };
  wrapped.streamEvents = () => ({
    async *[Symbol.asyncIterator]() {
      for await (const event of adapter.streamEvents()) {
        transcript.push({ event: structuredClone(event) });
        yield event;
      }
    },
  });
  return { adapter: wrapped, transcript };
}

const script: ScriptStep[] = [
  { type: "reasoning", text: "let me look" },
  {
    type: "todo",
    items: [
      { text: "read", status: "in_progress" },
      { text: "fix", status: "pending" },
    ],
  },
  { type: "tool", name: "read_file", input: { path: "a.ts" }, output: "export {}" },
  { type: "command", command: "npm test", output: "ok", approval: true },
  { type: "subagent", agent: "reviewer", prompt: "review", steps: [{ type: "text", text: "lgtm" }] },
  { type: "text", text: "All done, tests pass." },
];

async function liveRun(strength: Strength) {
  const identity = {
    nativeThreadIds: strength,
    nativeTurnIds: strength,
    nativeItemIds: strength,
    nativeRequestIds: strength,
  };
  const recorded = recordTranscript(
    createScriptedAdapter({ capabilities: { identity }, script: keyedScript({ "[work]": script }) }),
  );
  const { rt, events, cleanup } = await openTestRuntime({ scripted: recorded.adapter });
  try {
    const { threadId } = await rt.createThread({ providerTarget: "scripted" });
    for (const text of ["[work] first", "[work] second"]) {
      const { runId } = await rt.sendMessage({ threadId, text });
      const opened = await nextEvent(rt, "request.opened", (e) => e.runId === runId);
      await rt.respond({ requestId: opened.event.requestId, response: { kind: "decision", decision: "accept" } });
      await rt.waitForRun(runId);
    }
    return {
      events: events.map((r) => r.event),
      transcript: recorded.transcript,
      capabilities: recorded.adapter.getCapabilities(),
    };
  } finally {
    await cleanup();
  }
}

function replay(live: Awaited<ReturnType<typeof liveRun>>): string[] {
  const attempts = ofType(
    live.events.map((event, i) => ({ seq: i + 1, at: "", event })),
    "attempt.started",
  );
  const bound = live.events.find((e) => e.type === "provider_thread.bound")!;
  if (bound.type !== "provider_thread.bound") throw new Error("unreachable");
  const session = live.events.find((e) => e.type === "session.started")!;
  if (session.type !== "session.started") throw new Error("unreachable");
  const normalizer = new Normalizer("scripted", () => ({
    capabilities: live.capabilities,
    hostGeneration: session.hostGeneration,
  }));
  const ids: string[] = [];
  const collect = (routed: Routed[]) => {
    for (const r of routed) {
      if (r.to !== "run") continue;
      const e = r.event;
      if (e.type === "PROVIDER" && e.event.type === "node.started") ids.push(e.event.nodeId);
      if (e.type === "REQUEST_OPENED") ids.push(e.requestId);
    }
  };
  for (const entry of live.transcript) {
    if ("sendRun" in entry) {
      const a = attempts[entry.sendRun]!;
      const { rootStarted } = normalizer.beginTurn({
        threadId: a.threadId,
        runId: a.runId,
        attemptId: a.attemptId,
        rootNodeId: a.rootNodeId,
        providerThreadId: bound.providerThreadId,
        sessionId: session.sessionId,
        threadRef: bound.nativeThreadRef,
      });
      if (rootStarted.type === "node.started") ids.push(rootStarted.nodeId);
    } else {
      collect(normalizer.ingest(entry.event.sessionId, entry.event.event));
    }
  }
  return ids;
}

describe("replay determinism", () => {
  for (const strength of ["strong", "weak", "none"] as const) {
    it(`yields identical ids when a transcript is replayed (identity ${strength})`, async () => {
      const live = await liveRun(strength);
      const liveIds = live.events.flatMap((e) =>
        e.type === "node.started" ? [e.nodeId] : e.type === "request.opened" ? [e.requestId] : [],
      );
      expect(liveIds.length).toBeGreaterThan(10);
      expect(new Set(liveIds).size).toBe(liveIds.length);
      const first = replay(live);
      const second = replay(live);
      expect(first).toEqual(second);
      expect(first).toEqual(liveIds);
    });
  }
});
