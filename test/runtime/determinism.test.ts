import { describe, expect, it } from "vitest";
import {
  createScriptedAdapter,
  keyedScript,
  type ProviderAdapter,
  type ProviderAdapterEvent,
  type ScriptStep,
} from "../../src/index.js";
import type { Strength } from "../../src/capabilities/schema.js";
import { trackLiveTurns } from "../../src/runtime/ingest/liveTurns.js";
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

/**
 * A turn taken up again after a restart (its host outlived the runtime) continues as if nothing happened: a fresh
 * normalizer, given only what the log says of the turn, derives from the provider's next events exactly the ids the
 * uninterrupted run committed.
 */
function resumeFromLog(live: Awaited<ReturnType<typeof liveRun>>) {
  const opened = live.events.filter((e) => e.type === "request.opened");
  const cut = live.events.indexOf(opened.at(-1)!); // the second turn waits on its approval here
  const turns = trackLiveTurns();
  live.events.slice(0, cut + 1).forEach((e) => turns.fold(e));
  const attempt = live.events.filter((e) => e.type === "attempt.started").at(-1)!;
  const turnBound = live.events.filter((e) => e.type === "attempt.turn_bound").at(-1)!;
  const bound = live.events.find((e) => e.type === "provider_thread.bound")!;
  const session = live.events.find((e) => e.type === "session.started")!;
  if (attempt.type !== "attempt.started" || turnBound.type !== "attempt.turn_bound") throw new Error("unreachable");
  if (bound.type !== "provider_thread.bound" || session.type !== "session.started") throw new Error("unreachable");
  const normalizer = new Normalizer("scripted", () => ({
    capabilities: live.capabilities,
    hostGeneration: session.hostGeneration,
  }));
  normalizer.restoreTurn({
    threadId: attempt.threadId,
    runId: attempt.runId,
    attemptId: attempt.attemptId,
    rootNodeId: attempt.rootNodeId,
    providerThreadId: bound.providerThreadId,
    sessionId: session.sessionId,
    threadRef: bound.nativeThreadRef,
    nativeTurnRef: turnBound.nativeTurnRef,
    trail: turns.trail(attempt.attemptId)!,
  });
  // The provider's events after the one that asked for the approval the log ends on.
  const provider = live.transcript.flatMap((t) => ("event" in t ? [t.event] : []));
  const asked = provider.findLastIndex((e) => e.event.type === "request.opened");
  const restored: string[] = [];
  for (const { sessionId, event } of provider.slice(asked + 1))
    for (const r of normalizer.ingest(sessionId, event)) {
      if (r.to !== "run") continue;
      if (r.event.type === "PROVIDER" && r.event.event.type === "node.started") restored.push(r.event.event.nodeId);
      if (r.event.type === "PROVIDER" && r.event.event.type === "node.completed") restored.push(r.event.event.nodeId);
    }
  // What stayed open when the turn ended is what the runtime closed at its terminal.
  const closedAtTerminal = normalizer.takeOpenNodes(attempt.attemptId).map((n) => n.nodeId);
  const after = live.events.slice(cut + 1).filter((e) => "runId" in e && e.runId === attempt.runId);
  const expected = after.flatMap((e) =>
    e.type === "node.started" || (e.type === "node.completed" && e.settledBy !== "runtime") ? [e.nodeId] : [],
  );
  const expectedClosedAtTerminal = after.flatMap((e) =>
    e.type === "node.completed" && e.settledBy === "runtime" ? [e.nodeId] : [],
  );
  return { restored, expected, closedAtTerminal, expectedClosedAtTerminal };
}

describe("a turn taken up again from the log", () => {
  for (const strength of ["strong", "weak", "none"] as const) {
    it(`derives the ids the uninterrupted run committed (identity ${strength})`, async () => {
      const live = await liveRun(strength);
      const resumed = resumeFromLog(live);
      // The approved command completes, a subagent runs, the text streams: all after the cut.
      expect(resumed.expected.length).toBeGreaterThan(5);
      expect(resumed.restored).toEqual(resumed.expected);
      expect(resumed.closedAtTerminal).toEqual(resumed.expectedClosedAtTerminal);
    });
  }
});
