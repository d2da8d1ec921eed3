import { describe, expect, it } from "vitest";
import { createScriptedAdapter } from "../../src/adapters/scripted/host/provider.js";
import { nextEvent, withInjectedFrames } from "../support/runtime.js";
import { hosted, openFaultRuntime } from "./helpers.js";
import type { DomainEvent } from "../../src/domain/events.js";
import type { Runtime } from "../../src/runtime/runtime.js";

/**
 * Issue 12, item 4: "a malformed event object fails that event, not the whole provider
 * target". Hostile events go through the runtime's event pump (src/runtime/effects.ts) from a
 * real scripted host process (whatever JSON can carry) and from an in-process adapter
 * (whatever JavaScript can build); each must cost a warning at most, and the target must keep
 * serving: the run in flight finishes and the next run completes.
 */

const deep = (depth: number) => `${"[".repeat(depth)}${"]".repeat(depth)}`;

/** Hostile events as JSON texts: what a host process can send. */
const JSON_EVENTS: Array<[string, string]> = [
  ["null", "null"],
  ["an array", "[]"],
  ["a number", "42"],
  ["a string", '"item.delta"'],
  ["an empty object", "{}"],
  ["a type that is a number", '{"type":5}'],
  ["an unknown type", '{"type":"no.such.event","x":1}'],
  ["a known type without its fields", '{"type":"item.delta"}'],
  ["a terminal with a bogus status", '{"type":"turn.terminal","status":"exploded"}'],
  ["a prototype key", '{"__proto__":{"type":"warning","message":"polluted"},"type":"warning"}'],
  ["a million levels of nesting", deep(1_000_000)],
  [
    "nesting past JSON.stringify inside a valid event",
    `{"type":"item.started","itemRef":"deep","kind":"tool_call","detail":{"toolName":"t","input":${deep(200_000)}}}`,
  ],
  ["an 8 MiB string in a valid warning", `{"type":"warning","message":"${"h".repeat(8 << 20)}"}`],
  [
    "an 8 MiB delta for an item nobody started",
    `{"type":"item.delta","itemRef":"nobody","kind":"assistant_message",` +
      `"stream":"text","delta":"${"d".repeat(8 << 20)}"}`,
  ],
];

/**
 * Sends the hostile events and then a sentinel warning; resolves once the pump recorded the
 * sentinel (so it dealt with every event before it), or fails at once if the pump gave up on
 * the target instead (its "provider event stream failed" warning).
 */
async function sentinel(rt: Runtime, send: () => Promise<void> | void): Promise<DomainEvent[]> {
  const records: DomainEvent[] = [];
  const stop = rt.subscribe({ afterSeq: rt.views.head }, (r) => void records.push(r.event));
  const seen = nextEvent(
    rt,
    "warning",
    (e) =>
      e.message.includes("sentinel after the hostile events") || /provider event stream (failed|ended)/.test(e.message),
    rt.views.head,
  );
  try {
    await send();
    expect((await seen).event.message).toContain("sentinel after the hostile events");
  } finally {
    stop();
  }
  return records.slice(
    0,
    records.findIndex((e) => e.type === "warning" && e.message.includes("sentinel after")),
  );
}

/** One warning per hostile event (a protocol error, or a note that it fits no turn): nothing else. */
function expectOneWarningEach(records: DomainEvent[], count: number): void {
  expect(records.map((e) => e.type)).toEqual(Array.from({ length: count }, () => "warning"));
}

describe("hostile events from a real host process", () => {
  it.each(["stdio", "websocket"] as const)(
    "%s: each costs a warning at most; the run in flight completes and the target serves the next run",
    async (transport) => {
      const adapter = hosted({ transport });
      const { rt, cleanup } = await openFaultRuntime({ s: adapter });
      try {
        const { threadId } = await rt.createThread({ providerTarget: "s" });
        const { runId } = await rt.sendMessage({ threadId, text: "[gate] hold on" });
        // The turn's first message is complete: nothing more comes from it until the gate opens.
        await nextEvent(rt, "node.completed", (e) => e.runId === runId);
        const [sessionId] = rt.views.sessions.keys();
        const records = await sentinel(rt, () =>
          adapter.debug("debug.emitRaw", {
            sessionId,
            events: [
              ...JSON_EVENTS.map(([, json]) => json),
              JSON.stringify({ type: "warning", message: "sentinel after the hostile events" }),
            ],
          }),
        );
        expectOneWarningEach(records, JSON_EVENTS.length);
        await adapter.openGate("g");
        expect((await rt.waitForRun(runId)).status).toBe("completed");
        expect((await rt.waitForRun((await rt.sendMessage({ threadId, text: "and again" })).runId)).status).toBe(
          "completed",
        );
      } finally {
        await cleanup();
      }
    },
    60_000,
  );
});

const hostile = (what: string): never => {
  throw new Error(`hostile getter: ${what}`);
};

/** Frames only JavaScript can build (plus the same kinds as over the wire). */
function objectFrames(sessionId: string): Array<[string, unknown]> {
  const cyclic: Record<string, unknown> = { toolName: "t" };
  cyclic.input = cyclic;
  let nested: unknown[] = [];
  for (let i = 0; i < 200_000; i++) nested = [nested];
  return [
    ["a null frame", null],
    ["a number frame", 42],
    ["an array frame", []],
    ["a null event", { sessionId, event: null }],
    ["an array event", { sessionId, event: [] }],
    ["a session id that is a number", { sessionId: 5, event: { type: "warning", message: "wrong session id" } }],
    [
      "a message whose toString throws",
      { sessionId, event: { type: "warning", message: { toString: () => hostile("toString") } } },
    ],
    [
      "a cyclic tool input",
      { sessionId, event: { type: "item.started", itemRef: "cyclic", kind: "tool_call", detail: cyclic } },
    ],
    [
      "200,000 levels of nesting in a tool input",
      {
        sessionId,
        event: { type: "item.started", itemRef: "nested", kind: "tool_call", detail: { toolName: "t", input: nested } },
      },
    ],
    ["a 32 MiB warning", { sessionId, event: { type: "warning", message: "h".repeat(32 << 20) } }],
  ];
}

/** Frames whose very reading throws. */
function throwingFrames(sessionId: string): Array<[string, unknown]> {
  const traps = ["get", "has", "ownKeys", "getOwnPropertyDescriptor", "getPrototypeOf"] as const;
  return [
    [
      "a frame whose event getter throws",
      Object.defineProperty({ sessionId }, "event", { enumerable: true, get: () => hostile("event") }),
    ],
    [
      "a frame whose sessionId getter throws",
      Object.defineProperty({ event: { type: "warning", message: "x" } }, "sessionId", {
        enumerable: true,
        get: () => hostile("sessionId"),
      }),
    ],
    [
      "an event whose type getter throws",
      {
        sessionId,
        event: Object.defineProperty({ message: "x" }, "type", { enumerable: true, get: () => hostile("type") }),
      },
    ],
    [
      "an event that is a proxy throwing on every trap",
      { sessionId, event: new Proxy({}, Object.fromEntries(traps.map((t) => [t, () => hostile(`proxy ${t}`)]))) },
    ],
  ];
}

async function inProcess(frames: (sessionId: string) => Array<[string, unknown]>): Promise<void> {
  const { adapter, inject } = withInjectedFrames(createScriptedAdapter({}));
  const { rt, cleanup } = await openFaultRuntime({ s: adapter });
  try {
    const { threadId } = await rt.createThread({ providerTarget: "s" });
    expect((await rt.waitForRun((await rt.sendMessage({ threadId, text: "first" })).runId)).status).toBe("completed");
    const [sessionId] = rt.views.sessions.keys();
    const injected = frames(sessionId!);
    const records = await sentinel(rt, () => {
      for (const [, frame] of injected) inject(frame);
      inject({ sessionId, event: { type: "warning", message: "sentinel after the hostile events" } });
    });
    expectOneWarningEach(records, injected.length);
    expect((await rt.waitForRun((await rt.sendMessage({ threadId, text: "and again" })).runId)).status).toBe(
      "completed",
    );
  } finally {
    await cleanup();
  }
}

describe("hostile events from an in-process adapter", () => {
  it(
    "null, arrays, wrong types, throwing toString, cycles, " +
      "deep nesting and huge strings: the target keeps serving",
    async () => {
      await inProcess(objectFrames);
    },
    60_000,
  );

  /* zod's safeParse rethrows what a getter or proxy trap throws: the pump reads each frame inside a try, so such a
     frame is one invalid event. */
  it("frames and events whose reading throws (getters, proxies): the target keeps serving", async () => {
    await inProcess(throwingFrames);
  }, 60_000);
});
