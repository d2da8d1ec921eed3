import { afterEach, describe, expect, it } from "vitest";
import { ProviderEventSchema } from "../../src/adapters/contract.js";
import type {
  ProviderAdapter,
  ProviderAdapterEvent,
  ProviderEvent,
  ProviderThreadAddress,
  ProviderThreadHandle,
} from "../../src/adapters/contract.js";
import type { RequestResponse } from "../../src/domain/items.js";
import { createScriptedAdapter } from "../../src/adapters/scripted/host/provider.js";
import type { ScriptedAdapterOptions } from "../../src/adapters/scripted/host/provider.js";
import { ScriptedBackend } from "../../src/adapters/scripted/host/backend.js";
import type { ScriptStep } from "../../src/adapters/scripted/host/script.js";
import type { CapabilityOverrides, ProviderCapabilities } from "../../src/capabilities/index.js";
import { CapabilityUnsupportedError, ResumeFailedError } from "../../src/domain/errors.js";

/* ------------------------------------------------------------------------------------------
 * Harness: one background pump per adapter validates and records every event; tests wait
 * on events (never on wall-clock time).
 * ---------------------------------------------------------------------------------------- */

type Ev = ProviderEvent;
type EvOf<T extends Ev["type"]> = Extract<Ev, { type: T }>;
type LogEntry = { kind: "event"; sessionId: string; event: Ev } | { kind: "mark"; label: string };

const REF_FIELDS = ["threadRef", "turnRef", "itemRef", "requestRef", "parentItemRef", "childThreadRef"] as const;

/** Reads any field of a union member without narrowing. */
function field(event: Ev, name: string): unknown {
  return (event as unknown as Record<string, unknown>)[name];
}

function ofType<T extends Ev["type"]>(events: readonly Ev[], type: T): EvOf<T>[] {
  return events.filter((e): e is EvOf<T> => e.type === type);
}

class EventPump {
  readonly received: ProviderAdapterEvent[] = [];
  readonly log: LogEntry[] = [];
  readonly invalid: string[] = [];
  #cursor = 0;
  #closed = false;
  #wakers: Array<() => void> = [];

  constructor(adapter: ProviderAdapter) {
    void this.#pump(adapter.streamEvents());
  }

  async #pump(stream: AsyncIterable<ProviderAdapterEvent>): Promise<void> {
    for await (const item of stream) {
      const parsed = ProviderEventSchema.safeParse(item.event);
      if (!parsed.success)
        this.invalid.push(`${item.event.type}: ${parsed.error.message} in ${JSON.stringify(item.event)}`);
      this.received.push(item);
      this.log.push({ kind: "event", sessionId: item.sessionId, event: item.event });
      this.#wake();
    }
    this.#closed = true;
    this.#wake();
  }

  #wake(): void {
    for (const wake of this.#wakers.splice(0)) wake();
  }

  mark(label: string): void {
    this.log.push({ kind: "mark", label });
  }

  /** Events from the cursor up to and including the first match; advances the cursor past it. */
  async until(predicate: (event: Ev, sessionId: string) => boolean, what = "event"): Promise<Ev[]> {
    const batch: Ev[] = [];
    for (;;) {
      while (this.#cursor < this.received.length) {
        const item = this.received[this.#cursor++]!;
        batch.push(item.event);
        if (predicate(item.event, item.sessionId)) {
          expect(this.invalid).toEqual([]);
          return batch;
        }
      }
      if (this.#closed) throw new Error(`stream closed before ${what}; saw ${JSON.stringify(batch)}`);
      await new Promise<void>((resolve) => this.#wakers.push(resolve));
    }
  }

  all(sessionId?: string): Ev[] {
    return this.received.filter((r) => sessionId === undefined || r.sessionId === sessionId).map((r) => r.event);
  }
}

const pumps: EventPump[] = [];
const adapters: ProviderAdapter[] = [];

afterEach(async () => {
  await Promise.allSettled(adapters.splice(0).map((a) => a.close()));
  for (const pump of pumps.splice(0)) expect(pump.invalid).toEqual([]);
});

interface RigOptions extends Omit<ScriptedAdapterOptions, "script"> {
  steps?: ScriptStep[];
  script?: ScriptedAdapterOptions["script"];
  sessionId?: string;
}

interface Rig {
  adapter: ProviderAdapter;
  caps: ProviderCapabilities;
  pump: EventPump;
  sessionId: string;
  thread: ProviderThreadAddress;
  send(text?: string, thread?: ProviderThreadAddress): Promise<{ turnRef: string | null }>;
  /** Events until the root turn of `thread` ends (terminal, or idle without terminals). */
  untilEnd(thread?: ProviderThreadHandle): Promise<Ev[]>;
  /** Sends a turn and collects it to its end. */
  turn(text?: string, thread?: ProviderThreadAddress): Promise<Ev[]>;
  until(predicate: (event: Ev) => boolean, what?: string): Promise<Ev[]>;
  respond(
    opened: EvOf<"request.opened">,
    response: RequestResponse,
    ordinal?: number,
    thread?: ProviderThreadAddress,
  ): Promise<void>;
}

/** A thread as the runtime names it in every call: the adapter's handle with the thread's cwd. */
const at = (handle: ProviderThreadHandle, cwd = "/tmp"): ProviderThreadAddress => ({ ...handle, cwd });

const accept: RequestResponse = { kind: "decision", decision: "accept" };
const decline: RequestResponse = { kind: "decision", decision: "decline" };

function isRootEnd(caps: ProviderCapabilities, thread: ProviderThreadHandle) {
  const rootRef = thread.threadRef ?? undefined;
  return (event: Ev): boolean =>
    caps.turns.emitsTurnCompleted
      ? event.type === "turn.terminal" && event.threadRef === rootRef
      : event.type === "session.state" && event.state === "idle";
}

async function rig(options: RigOptions = {}): Promise<Rig> {
  const { steps, script, sessionId = "s1", ...rest } = options;
  const adapter = createScriptedAdapter({
    ...rest,
    script: script ?? (steps ? () => steps : undefined),
  });
  adapters.push(adapter);
  const pump = new EventPump(adapter);
  pumps.push(pump);
  const caps = adapter.getCapabilities();
  const info = await adapter.startSession({ sessionId, cwd: "/tmp/tiller-test", model: null });
  expect(info.capabilities).toEqual(caps);
  await pump.until((e, sid) => sid === sessionId && e.type === "session.state" && e.state === "ready", "ready");
  const thread = at(await adapter.ensureProviderThread({ sessionId, cwd: "/tmp/tiller-test" }), "/tmp/tiller-test");
  const r: Rig = {
    adapter,
    caps,
    pump,
    sessionId,
    thread,
    send: (text = "hello", t = thread) => adapter.sendRun({ sessionId, thread: t, text, context: null, model: null }),
    untilEnd: (t = thread) => pump.until(isRootEnd(caps, t), "root turn end"),
    async turn(text = "hello", t = thread) {
      await r.send(text, t);
      return r.untilEnd(t);
    },
    until: (predicate, what) => pump.until((e) => predicate(e), what),
    respond: (opened, response, ordinal = 1, t = thread) =>
      adapter.respondToRequest({
        sessionId,
        thread: t,
        request: { requestRef: opened.requestRef ?? null, turnRef: opened.turnRef ?? null, ordinal },
        response,
      }),
  };
  return r;
}

function caps(overrides: CapabilityOverrides): CapabilityOverrides {
  return overrides;
}

const isOpened = (e: Ev): e is EvOf<"request.opened"> => e.type === "request.opened";
const textOf = (events: readonly Ev[]) =>
  ofType(events, "item.completed")
    .filter((e) => e.kind === "assistant_message")
    .map((e) => e.text ?? "")
    .join("");
const deltasOf = (events: readonly Ev[], kind: string) =>
  ofType(events, "item.delta")
    .filter((e) => e.kind === kind)
    .map((e) => e.delta)
    .join("");

/** Every kind of step the root turn can take that needs no answer. */
const PLAIN_STEPS: ScriptStep[] = [
  { type: "reasoning", text: "thinking about it" },
  { type: "text", text: "Hello there, this is a streamed answer." },
  { type: "tool", name: "search", input: { q: "x" }, output: "found it" },
  { type: "command", command: "ls", output: "a\nb\n" },
  { type: "file_change", path: "a.txt", diff: "+a" },
  { type: "todo", items: [{ text: "one", status: "pending" }] },
  { type: "plan", steps: [{ step: "first", status: "in_progress" }], explanation: "why" },
  { type: "proposed_plan", text: "the plan" },
];

/* ------------------------------------------------------------------------------------------ */

describe("scripted adapter", { timeout: 30_000 }, () => {
  describe("optional methods follow the capability record", () => {
    it("has no steerRun when turns.supportsActiveSteering is false", async () => {
      const { adapter } = await rig({ capabilities: caps({ turns: { supportsActiveSteering: false } }) });
      expect(adapter.steerRun).toBeUndefined();
      expect("steerRun" in adapter).toBe(false);
    });

    it("has steerRun when supportsActiveSteering is true, and the steer shows up in the turn's output", async () => {
      const r = await rig({
        capabilities: caps({ turns: { supportsActiveSteering: true } }),
        steps: [
          { type: "command", command: "make", output: "ok", approval: true },
          { type: "text", text: "after the command" },
        ],
      });
      expect(typeof r.adapter.steerRun).toBe("function");
      const { turnRef } = await r.send("go");
      const opened = (await r.until(isOpened, "request.opened")).at(-1) as EvOf<"request.opened">;
      await r.adapter.steerRun!({ sessionId: r.sessionId, thread: r.thread, turnRef, text: "go left" });
      await r.respond(opened, accept);
      const events = await r.untilEnd();
      expect(events.at(-1)).toMatchObject({ type: "turn.terminal", status: "completed" });
      const text = textOf(events);
      expect(text).toContain("go left");
      expect(text.indexOf("go left")).toBeLessThan(text.indexOf("after the command"));
    });

    it("a steer sent during the last step is not lost: it shows up before the turn ends", async () => {
      const r = await rig({ steps: [{ type: "command", command: "make", output: "ok", approval: true }] });
      const { turnRef } = await r.send("go");
      const opened = (await r.until(isOpened, "request.opened")).at(-1) as EvOf<"request.opened">;
      await r.adapter.steerRun!({ sessionId: r.sessionId, thread: r.thread, turnRef, text: "go right" });
      await r.respond(opened, accept);
      const events = await r.untilEnd();
      expect(events.at(-1)).toMatchObject({ type: "turn.terminal", status: "completed" });
      expect(textOf(events)).toContain("go right");
    });

    const threadFlags = [true, false].flatMap((read) =>
      [true, false].flatMap((rollback) => [true, false].map((fork) => ({ read, rollback, fork }))),
    );
    it.each(threadFlags)(
      "readThreadSnapshot=$read rollbackThread=$rollback forkThread=$fork exactly as declared",
      async ({ read, rollback, fork }) => {
        const { adapter } = await rig({
          capabilities: caps({
            threads: { canReadThreadSnapshot: read, canRollbackThread: rollback, canForkThread: fork },
          }),
        });
        expect("readThreadSnapshot" in adapter && typeof adapter.readThreadSnapshot === "function").toBe(read);
        expect("rollbackThread" in adapter && typeof adapter.rollbackThread === "function").toBe(rollback);
        expect("forkThread" in adapter && typeof adapter.forkThread === "function").toBe(fork);
      },
    );

    it("snapshot, rollback and fork work on a thread with turns", async () => {
      const r = await rig({ script: ({ text }) => [{ type: "text", text: `re: ${text}` }] });
      const first = await r.send("one");
      await r.untilEnd();
      await r.turn("two");
      const snapshot = await r.adapter.readThreadSnapshot!({ sessionId: r.sessionId, thread: r.thread });
      expect(snapshot.threadRef).toBe(r.thread.threadRef);
      expect(snapshot.turns.map((t) => [t.userText, t.assistantText, t.status])).toEqual([
        ["one", "re: one", "completed"],
        ["two", "re: two", "completed"],
      ]);

      const forked = at(
        await r.adapter.forkThread!({
          sessionId: r.sessionId,
          thread: r.thread,
          cwd: r.thread.cwd,
          afterTurnRef: first.turnRef,
        }),
      );
      expect(forked.resumeCursor).not.toBe(r.thread.resumeCursor);
      const forkSnapshot = await r.adapter.readThreadSnapshot!({ sessionId: r.sessionId, thread: forked });
      expect(forkSnapshot.turns.map((t) => t.userText)).toEqual(["one"]);

      const rolled = await r.adapter.rollbackThread!({ sessionId: r.sessionId, thread: r.thread, turns: 1 });
      expect(rolled?.snapshot?.turns.map((t) => t.userText)).toEqual(["one"]);
    });
  });

  describe("identity", () => {
    const none = caps({
      identity: { nativeThreadIds: "none", nativeTurnIds: "none", nativeItemIds: "none", nativeRequestIds: "none" },
    });

    /** Steps that ask, answered in order by `answerAll`. */
    const ASKING: ScriptStep[] = [
      ...PLAIN_STEPS,
      { type: "command", command: "rm -rf build", output: "done", approval: true },
      { type: "file_change", path: "b.txt", diff: "+b", approval: true },
      { type: "question", questions: [{ id: "q1", question: "Which one?" }] },
    ];

    async function answerAll(r: Rig, count: number): Promise<Ev[]> {
      const events: Ev[] = [];
      for (let ordinal = 1; ordinal <= count; ordinal++) {
        const batch = await r.until(isOpened, `request ${ordinal}`);
        events.push(...batch);
        const opened = batch.at(-1) as EvOf<"request.opened">;
        const response: RequestResponse =
          opened.request.kind === "user_input" ? { kind: "answers", answers: { q1: "that one" } } : accept;
        await r.respond(opened, response, ordinal);
      }
      events.push(...(await r.untilEnd()));
      return events;
    }

    it("none: no native refs on any event, a null threadRef handle and a null turnRef", async () => {
      const r = await rig({ capabilities: none, steps: ASKING });
      expect(r.thread.threadRef).toBeNull();
      const { turnRef } = await r.send();
      expect(turnRef).toBeNull();
      const events = await answerAll(r, 3);
      expect(ofType(events, "request.opened")).toHaveLength(3);
      expect(events.at(-1)).toMatchObject({ type: "turn.terminal", status: "completed" });
      for (const event of events) {
        for (const name of REF_FIELDS) expect(field(event, name), `${event.type}.${name}`).toBeUndefined();
      }
    });

    it("none: a subagent exposes no native thread or turn refs either", async () => {
      const r = await rig({
        capabilities: none,
        steps: [
          { type: "subagent", agent: "helper", prompt: "help", steps: [{ type: "text", text: "child says hi" }] },
          { type: "text", text: "root done" },
        ],
      });
      const events = await r.turn();
      expect(events.at(-1)).toMatchObject({ type: "turn.terminal", status: "completed" });
      expect(textOf(events)).toContain("root done");
      for (const event of events) {
        for (const name of REF_FIELDS) expect(field(event, name), `${event.type}.${name}`).toBeUndefined();
      }
    });

    it("turns.exposesNativeTurnId false: no turnRef anywhere, child turns included", async () => {
      const r = await rig({
        capabilities: caps({ turns: { exposesNativeTurnId: false } }),
        steps: [
          { type: "subagent", agent: "helper", prompt: "help", steps: [{ type: "text", text: "child" }] },
          ...PLAIN_STEPS,
        ],
      });
      const { turnRef } = await r.send();
      expect(turnRef).toBeNull();
      const events = await r.untilEnd();
      expect(events.at(-1)).toMatchObject({ type: "turn.terminal", status: "completed" });
      for (const event of events) expect(field(event, "turnRef"), `${event.type}.turnRef`).toBeUndefined();
    });

    it("planning.planDeltasHaveItemIds false: plan and todo events carry no itemRef", async () => {
      const r = await rig({
        capabilities: caps({ planning: { planDeltasHaveItemIds: false } }),
        steps: [
          { type: "todo", items: [{ text: "a", status: "pending" }] },
          { type: "plan", steps: [{ step: "a", status: "pending" }] },
          { type: "proposed_plan", text: "p" },
          { type: "text", text: "items still have ids" },
        ],
      });
      const events = await r.turn();
      const planning = events.filter(
        (e) => e.type === "todo.updated" || e.type === "plan.updated" || e.type === "plan.proposed",
      );
      expect(planning).toHaveLength(3);
      for (const e of planning) expect(field(e, "itemRef"), `${e.type}.itemRef`).toBeUndefined();
      expect(ofType(events, "item.started")[0]?.itemRef).toEqual(expect.any(String));
    });

    it("strong: refs are present everywhere and unique", async () => {
      const r = await rig({ steps: ASKING });
      expect(r.thread.threadRef).toEqual(expect.any(String));
      const turnRefs: string[] = [];
      const itemRefs: string[] = [];
      const requestRefs: string[] = [];
      for (let turn = 0; turn < 2; turn++) {
        const { turnRef } = await r.send();
        expect(turnRef).toEqual(expect.any(String));
        turnRefs.push(turnRef!);
        const events = await answerAll(r, 3);
        for (const event of events) {
          if (event.type === "session.state") continue;
          expect(field(event, "threadRef"), `${event.type}.threadRef`).toBe(r.thread.threadRef);
          expect(field(event, "turnRef"), `${event.type}.turnRef`).toBe(turnRef);
        }
        for (const e of events) {
          if (e.type === "item.started") itemRefs.push(e.itemRef!);
          if (e.type === "todo.updated" || e.type === "plan.updated" || e.type === "plan.proposed")
            itemRefs.push(e.itemRef!);
        }
        for (const e of ofType(events, "item.started")) expect(e.itemRef).toEqual(expect.any(String));
        for (const e of [...ofType(events, "item.delta"), ...ofType(events, "item.completed")]) {
          expect(e.itemRef).toEqual(expect.any(String));
        }
        for (const e of ofType(events, "request.opened")) {
          expect(e.requestRef).toEqual(expect.any(String));
          requestRefs.push(e.requestRef!);
        }
        for (const e of ofType(events, "request.resolved")) expect(e.requestRef).toEqual(expect.any(String));
        // every delta/completion belongs to an item that was started
        const started = new Set(ofType(events, "item.started").map((e) => e.itemRef));
        for (const e of [...ofType(events, "item.delta"), ...ofType(events, "item.completed")])
          expect(started.has(e.itemRef)).toBe(true);
      }
      expect(new Set(turnRefs).size).toBe(2);
      expect(itemRefs.length).toBeGreaterThan(10);
      expect(new Set(itemRefs).size).toBe(itemRefs.length);
      expect(requestRefs).toHaveLength(6);
      expect(new Set(requestRefs).size).toBe(6);
    });

    it("weak: item ids repeat across turns", async () => {
      const r = await rig({
        capabilities: caps({ identity: { nativeItemIds: "weak" } }),
        steps: [
          { type: "text", text: "first message" },
          { type: "tool", name: "t", output: "o" },
          { type: "text", text: "second message" },
        ],
      });
      const first = ofType(await r.turn(), "item.started").map((e) => e.itemRef);
      const second = ofType(await r.turn(), "item.started").map((e) => e.itemRef);
      expect(first).toHaveLength(3);
      for (const ref of first) expect(ref).toEqual(expect.any(String));
      expect(new Set(first).size).toBe(3); // unique within a turn
      expect(second).toEqual(first); // ...but reused by the next one
    });
  });

  describe("turn lifecycle events", () => {
    it("emitsTurnStarted false: no turn.started, terminal still arrives", async () => {
      const r = await rig({ capabilities: caps({ turns: { emitsTurnStarted: false } }), steps: PLAIN_STEPS });
      const events = await r.turn();
      expect(ofType(events, "turn.started")).toEqual([]);
      expect(events.at(-1)).toMatchObject({ type: "turn.terminal", status: "completed" });
    });

    it("emitsTurnStarted true: turn.started comes first", async () => {
      const r = await rig({ steps: PLAIN_STEPS });
      const events = await r.turn();
      expect(events[0]).toMatchObject({ type: "turn.started", threadRef: r.thread.threadRef });
      expect(ofType(events, "turn.started")).toHaveLength(1);
    });

    it("emitsTurnCompleted false: no turn.terminal, a session.state idle instead", async () => {
      const r = await rig({ capabilities: caps({ turns: { emitsTurnCompleted: false } }), steps: PLAIN_STEPS });
      const events = await r.turn();
      expect(events.at(-1)).toEqual({ type: "session.state", state: "idle" });
      expect(ofType(events, "turn.terminal")).toEqual([]);
      expect(textOf(events)).toContain("Hello there");
      // a second turn works the same way
      const again = await r.turn();
      expect(ofType(again, "turn.terminal")).toEqual([]);
      expect(again.at(-1)).toEqual({ type: "session.state", state: "idle" });
    });
  });

  describe("streaming", () => {
    const text = "A message long enough to be streamed in several chunks, for sure.";

    it("streamsAssistantText false: no message deltas, one item.completed with the full text", async () => {
      const r = await rig({
        capabilities: caps({ streaming: { streamsAssistantText: false } }),
        steps: [{ type: "text", text }],
      });
      const events = await r.turn();
      expect(ofType(events, "item.delta").filter((e) => e.kind === "assistant_message")).toEqual([]);
      const completed = ofType(events, "item.completed").filter((e) => e.kind === "assistant_message");
      expect(completed).toHaveLength(1);
      expect(completed[0]).toMatchObject({ status: "completed", text });
    });

    it("streamsAssistantText false wins over emitsMessageCompleted false: the text still arrives once", async () => {
      const r = await rig({
        capabilities: caps({ streaming: { streamsAssistantText: false, emitsMessageCompleted: false } }),
        steps: [{ type: "text", text }],
      });
      const events = await r.turn();
      expect(ofType(events, "item.delta")).toEqual([]);
      expect(
        ofType(events, "item.completed")
          .filter((e) => e.kind === "assistant_message")
          .map((e) => e.text),
      ).toEqual([text]);
    });

    it("streamsAssistantText true: deltas add up to the text, completed carries it too", async () => {
      const r = await rig({ steps: [{ type: "text", text, chunkSize: 5 }] });
      const events = await r.turn();
      const deltas = ofType(events, "item.delta").filter((e) => e.kind === "assistant_message");
      expect(deltas.length).toBeGreaterThan(1);
      expect(deltas.every((d) => d.stream === "text")).toBe(true);
      expect(deltasOf(events, "assistant_message")).toBe(text);
      expect(
        ofType(events, "item.completed")
          .filter((e) => e.kind === "assistant_message")
          .map((e) => e.text),
      ).toEqual([text]);
    });

    it("emitsMessageCompleted false: streamed messages get no item.completed", async () => {
      const r = await rig({
        capabilities: caps({ streaming: { emitsMessageCompleted: false } }),
        steps: [
          { type: "text", text },
          { type: "text", text: "and another one" },
        ],
      });
      const events = await r.turn();
      expect(deltasOf(events, "assistant_message")).toBe(text + "and another one");
      expect(ofType(events, "item.completed").filter((e) => e.kind === "assistant_message")).toEqual([]);
      expect(events.at(-1)).toMatchObject({ type: "turn.terminal", status: "completed" });
    });

    it("streamsReasoning false: the reasoning arrives whole with its completion, never as deltas", async () => {
      const r = await rig({
        capabilities: caps({ streaming: { streamsReasoning: false } }),
        steps: [
          { type: "reasoning", text: "hmm" },
          { type: "text", text: "answer" },
        ],
      });
      const events = await r.turn();
      expect(deltasOf(events, "reasoning")).toBe("");
      expect(
        ofType(events, "item.completed")
          .filter((e) => e.kind === "reasoning")
          .map((e) => e.text),
      ).toEqual(["hmm"]);
      expect(textOf(events)).toBe("answer");
    });

    it("streamsReasoning true: a reasoning item streams and completes", async () => {
      const r = await rig({ steps: [{ type: "reasoning", text: "hmm, let me think" }] });
      const events = await r.turn();
      expect(ofType(events, "item.started").map((e) => e.kind)).toEqual(["reasoning"]);
      expect(deltasOf(events, "reasoning")).toBe("hmm, let me think");
    });
  });

  describe("approvals and questions", () => {
    const approvalStep: ScriptStep = {
      type: "command",
      command: "npm test",
      output: "all green",
      exitCode: 0,
      approval: true,
    };

    it("supportsCommandApproval false: an approval command runs without any request", async () => {
      const r = await rig({
        capabilities: caps({ approvals: { supportsCommandApproval: false } }),
        steps: [approvalStep],
      });
      const events = await r.turn();
      expect(ofType(events, "request.opened")).toEqual([]);
      expect(ofType(events, "request.resolved")).toEqual([]);
      expect(deltasOf(events, "command_execution")).toBe("all green");
      expect(ofType(events, "item.completed")).toEqual([
        expect.objectContaining({ kind: "command_execution", status: "completed", output: "all green", exitCode: 0 }),
      ]);
    });

    it("supportsCommandApproval true + accept: request.opened (command), then output and completed", async () => {
      const r = await rig({ steps: [approvalStep] });
      await r.send();
      const before = await r.until(isOpened, "request.opened");
      const opened = before.at(-1) as EvOf<"request.opened">;
      expect(opened.request).toEqual({ kind: "command", command: "npm test" });
      expect(ofType(before, "item.started")).toEqual([
        expect.objectContaining({ kind: "command_execution", itemRef: opened.itemRef }),
      ]);
      expect(ofType(before, "item.delta")).toEqual([]); // nothing runs before the answer
      await r.respond(opened, accept);
      const after = await r.untilEnd();
      expect(ofType(after, "request.resolved")).toEqual([
        expect.objectContaining({ requestRef: opened.requestRef, outcome: "accept" }),
      ]);
      expect(deltasOf(after, "command_execution")).toBe("all green");
      expect(ofType(after, "item.completed")).toEqual([
        expect.objectContaining({
          kind: "command_execution",
          itemRef: opened.itemRef,
          status: "completed",
          output: "all green",
          exitCode: 0,
        }),
      ]);
      expect(after.at(-1)).toMatchObject({ type: "turn.terminal", status: "completed" });
    });

    it("supportsCommandApproval true + decline: item.completed status declined, no output", async () => {
      const r = await rig({ steps: [approvalStep, { type: "text", text: "ok, skipped" }] });
      await r.send();
      const opened = (await r.until(isOpened)).at(-1) as EvOf<"request.opened">;
      await r.respond(opened, decline);
      const after = await r.untilEnd();
      expect(ofType(after, "request.resolved")).toEqual([expect.objectContaining({ outcome: "decline" })]);
      expect(ofType(after, "item.delta").filter((e) => e.kind === "command_execution")).toEqual([]);
      const completed = ofType(after, "item.completed").filter((e) => e.kind === "command_execution");
      expect(completed).toHaveLength(1);
      expect(completed[0]).toMatchObject({ status: "declined", itemRef: opened.itemRef });
      expect(completed[0]!.output).toBeUndefined();
      expect(textOf(after)).toBe("ok, skipped");
      expect(after.at(-1)).toMatchObject({ type: "turn.terminal", status: "completed" });
    });

    it("requests can be addressed by ordinal when they have no native id", async () => {
      const r = await rig({
        capabilities: caps({ approvals: { approvalsHaveNativeRequestIds: false } }),
        steps: [approvalStep, { ...approvalStep, command: "npm run lint" }],
      });
      await r.send();
      const first = (await r.until(isOpened)).at(-1) as EvOf<"request.opened">;
      expect(first.requestRef).toBeUndefined();
      await r.respond(first, accept, 1);
      const second = (await r.until(isOpened)).at(-1) as EvOf<"request.opened">;
      expect(second.request).toMatchObject({ command: "npm run lint" });
      await r.respond(second, decline, 2);
      const after = await r.untilEnd();
      expect(ofType(after, "item.completed").map((e) => e.status)).toEqual(["declined"]);
    });

    it("file change approval accepted: request.opened (file_change) then completed", async () => {
      const r = await rig({ steps: [{ type: "file_change", path: "src/x.ts", diff: "+x", approval: true }] });
      await r.send();
      const before = await r.until(isOpened);
      const opened = before.at(-1) as EvOf<"request.opened">;
      expect(opened.request).toEqual({ kind: "file_change", path: "src/x.ts", diff: "+x" });
      expect(ofType(before, "item.completed")).toEqual([]);
      await r.respond(opened, { kind: "decision", decision: "accept_for_session" });
      const after = await r.untilEnd();
      expect(ofType(after, "item.completed")).toEqual([
        expect.objectContaining({ kind: "file_change", itemRef: opened.itemRef, status: "completed" }),
      ]);
    });

    it("supportsFileChangeApproval false: the change applies without a request", async () => {
      const r = await rig({
        capabilities: caps({ approvals: { supportsFileChangeApproval: false } }),
        steps: [{ type: "file_change", path: "src/x.ts", diff: "+x", approval: true }],
      });
      const events = await r.turn();
      expect(ofType(events, "request.opened")).toEqual([]);
      expect(ofType(events, "item.completed")).toEqual([
        expect.objectContaining({ kind: "file_change", status: "completed" }),
      ]);
    });

    const question: ScriptStep = {
      type: "question",
      questions: [{ id: "color", question: "Which color?", options: [{ label: "red" }, { label: "blue" }] }],
    };

    it("structured question answered with answers", async () => {
      const r = await rig({ steps: [question] });
      await r.send();
      const opened = (await r.until(isOpened)).at(-1) as EvOf<"request.opened">;
      expect(opened.request).toEqual({
        kind: "user_input",
        questions: (question as Extract<ScriptStep, { type: "question" }>).questions,
      });
      await r.respond(opened, { kind: "answers", answers: { color: "blue" } });
      const after = await r.untilEnd();
      expect(ofType(after, "request.resolved")).toEqual([
        expect.objectContaining({ requestRef: opened.requestRef, outcome: "answered" }),
      ]);
      expect(textOf(after)).toContain("blue");
      expect(after.at(-1)).toMatchObject({ type: "turn.terminal", status: "completed" });
    });

    it("supportsStructuredQuestions false: the question is plain assistant text, no request", async () => {
      const r = await rig({
        capabilities: caps({ planning: { supportsStructuredQuestions: false } }),
        steps: [question],
      });
      const events = await r.turn();
      expect(ofType(events, "request.opened")).toEqual([]);
      expect(textOf(events)).toBe("Which color?");
    });
  });

  describe("planning artifacts", () => {
    const steps: ScriptStep[] = [
      { type: "todo", items: [{ text: "write tests", status: "in_progress" }] },
      { type: "plan", steps: [{ step: "read", status: "completed" }], explanation: "because" },
      { type: "proposed_plan", text: "1. do it" },
      { type: "text", text: "end" },
    ];

    it("all declared: todo.updated, plan.updated and plan.proposed are emitted", async () => {
      const r = await rig({ steps });
      const events = await r.turn();
      expect(ofType(events, "todo.updated")).toEqual([
        expect.objectContaining({ items: [{ text: "write tests", status: "in_progress" }] }),
      ]);
      expect(ofType(events, "plan.updated")).toEqual([
        expect.objectContaining({ steps: [{ step: "read", status: "completed" }], explanation: "because" }),
      ]);
      expect(ofType(events, "plan.proposed")).toEqual([expect.objectContaining({ text: "1. do it" })]);
    });

    it("none declared: no todo or plan events", async () => {
      const r = await rig({
        capabilities: caps({ planning: { emitsTodoList: false, emitsPlanUpdated: false, emitsProposedPlan: false } }),
        steps,
      });
      const events = await r.turn();
      expect(
        events.filter((e) => e.type === "todo.updated" || e.type === "plan.updated" || e.type === "plan.proposed"),
      ).toEqual([]);
      expect(events.at(-1)).toMatchObject({ type: "turn.terminal", status: "completed" });
    });

    it.each([
      ["emitsTodoList", "todo.updated"],
      ["emitsPlanUpdated", "plan.updated"],
      ["emitsProposedPlan", "plan.proposed"],
    ] as const)("%s false alone suppresses only %s", async (flag, type) => {
      const r = await rig({ capabilities: caps({ planning: { [flag]: false } }), steps });
      const events = await r.turn();
      const planningTypes = ["todo.updated", "plan.updated", "plan.proposed"].filter((t) => t !== type);
      expect(events.filter((e) => e.type === type)).toEqual([]);
      for (const t of planningTypes)
        expect(
          events.filter((e) => e.type === t),
          t,
        ).toHaveLength(1);
    });
  });

  describe("subagents", () => {
    const steps: ScriptStep[] = [
      { type: "text", text: "delegating" },
      {
        type: "subagent",
        agent: "explorer",
        prompt: "look around",
        steps: [
          { type: "text", text: "child output" },
          { type: "tool", name: "grep", output: "hit" },
        ],
      },
      { type: "text", text: "root done" },
    ];

    it(
      "supportsSubagents + exposesSubagentThreadIds: " + "child thread lifecycle nested before the root terminal",
      async () => {
        const r = await rig({ steps });
        const events = await r.turn();
        const started = ofType(events, "subagent.started");
        expect(started).toHaveLength(1);
        const child = started[0]!.childThreadRef;
        expect(child).toEqual(expect.any(String));
        expect(child).not.toBe(r.thread.threadRef);
        expect(started[0]).toMatchObject({ agent: "explorer", prompt: "look around", threadRef: r.thread.threadRef });

        const iStarted = events.indexOf(started[0]!);
        const iChildStart = events.findIndex((e) => e.type === "turn.started" && e.threadRef === child);
        const iChildEnd = events.findIndex((e) => e.type === "turn.terminal" && e.threadRef === child);
        const iCompleted = events.findIndex((e) => e.type === "subagent.completed");
        const iRootEnd = events.length - 1;
        expect(iChildStart).toBeGreaterThan(iStarted);
        expect(iChildEnd).toBeGreaterThan(iChildStart);
        expect(iCompleted).toBeGreaterThan(iChildEnd);
        expect(iRootEnd).toBeGreaterThan(iCompleted);
        expect(events[iChildEnd]).toMatchObject({ status: "completed" });
        expect(events[iCompleted]).toMatchObject({
          type: "subagent.completed",
          childThreadRef: child,
          status: "completed",
          itemRef: started[0]!.itemRef,
        });
        expect(events[iRootEnd]).toMatchObject({
          type: "turn.terminal",
          threadRef: r.thread.threadRef,
          status: "completed",
        });

        // the child's items live on the child thread, between its turn start and end
        const childItems = events.filter((e) => e.type.startsWith("item.") && field(e, "threadRef") === child);
        expect(childItems.length).toBeGreaterThan(0);
        for (const e of childItems) {
          const i = events.indexOf(e);
          expect(i).toBeGreaterThan(iChildStart);
          expect(i).toBeLessThan(iChildEnd);
        }
        expect(ofType(childItems, "item.completed").map((e) => e.kind)).toEqual(["assistant_message", "tool_call"]);
        // only the root turn's terminal carries the root thread ref
        expect(ofType(events, "turn.terminal").filter((e) => e.threadRef === r.thread.threadRef)).toHaveLength(1);
      },
    );

    it("supportsSubagents false: steps run inline, no subagent or child turn events", async () => {
      const r = await rig({ capabilities: caps({ subagents: { supportsSubagents: false } }), steps });
      const events = await r.turn();
      expect(events.filter((e) => e.type.startsWith("subagent."))).toEqual([]);
      expect(ofType(events, "turn.started")).toHaveLength(1);
      expect(ofType(events, "turn.terminal")).toHaveLength(1);
      for (const e of events) {
        if (e.type !== "session.state") expect(field(e, "threadRef")).toBe(r.thread.threadRef);
      }
      expect(textOf(events)).toBe("delegatingchild outputroot done");
      expect(ofType(events, "item.completed").map((e) => e.kind)).toEqual([
        "assistant_message",
        "assistant_message",
        "tool_call",
        "assistant_message",
      ]);
    });

    it("a subagent that fails reports failed, not completed, and the root turn fails after it", async () => {
      const r = await rig({
        steps: [
          {
            type: "subagent",
            agent: "explorer",
            prompt: "look",
            steps: [{ type: "fail", message: "child broke", failureClass: "tool_error" }],
          },
          { type: "text", text: "never" },
        ],
      });
      const events = await r.turn();
      const child = ofType(events, "subagent.started")[0]!.childThreadRef;
      const childEnd = ofType(events, "turn.terminal").find((e) => e.threadRef === child);
      expect(childEnd?.status).toBe("failed");
      expect(ofType(events, "subagent.completed")[0]?.status).toBe("failed");
      expect(events.at(-1)).toMatchObject({
        type: "turn.terminal",
        threadRef: r.thread.threadRef,
        status: "failed",
        message: "child broke",
      });
      expect(textOf(events)).not.toContain("never");
    });
  });

  describe("failure, hang and interrupt", () => {
    it("a fail step ends the turn failed with failureClass, message and retryable", async () => {
      const r = await rig({
        steps: [
          { type: "text", text: "trying" },
          { type: "fail", message: "rate limited", failureClass: "rate_limit", retryable: true },
          { type: "text", text: "unreachable" },
        ],
      });
      const events = await r.turn();
      expect(events.at(-1)).toEqual({
        type: "turn.terminal",
        threadRef: r.thread.threadRef,
        turnRef: expect.any(String),
        status: "failed",
        threadDisposition: "reusable",
        failureClass: "rate_limit",
        message: "rate limited",
        retryable: true,
      });
      expect(textOf(events)).toBe("trying");
    });

    it("a broken fail step marks the thread broken; defaults are provider_error and not retryable", async () => {
      const r = await rig({ steps: [{ type: "fail", message: "dead", broken: true }] });
      const events = await r.turn();
      expect(events.at(-1)).toMatchObject({
        type: "turn.terminal",
        status: "failed",
        threadDisposition: "broken",
        failureClass: "provider_error",
        message: "dead",
        retryable: false,
      });
    });

    it("hang: no terminal until interrupt(), which is acknowledged before the interrupted terminal", async () => {
      const r = await rig({
        script: ({ text }) =>
          text === "hang" ? [{ type: "text", text: "working" }, { type: "hang" }] : [{ type: "text", text: "quick" }],
      });
      const other = at(await r.adapter.ensureProviderThread({ sessionId: r.sessionId, cwd: "/tmp" }));
      const { turnRef } = await r.send("hang");
      await r.until((e) => e.type === "item.completed" && e.threadRef === r.thread.threadRef, "hanging turn's text");

      // A whole other turn runs to its end meanwhile; the hanging one must still be open.
      await r.send("quick", other);
      await r.pump.until(isRootEnd(r.caps, other), "other thread's end");
      const hangingTerminal = () =>
        r.pump.all().filter((e) => e.type === "turn.terminal" && e.threadRef === r.thread.threadRef);
      expect(hangingTerminal()).toEqual([]);

      const ack = r.adapter.interrupt({ sessionId: r.sessionId, thread: r.thread, turnRef }).then(() => {
        r.pump.mark("interrupt acknowledged");
        return hangingTerminal().length;
      });
      const terminalsAtAck = await ack;
      expect(terminalsAtAck).toBe(0);
      const events = await r.untilEnd();
      expect(events.at(-1)).toMatchObject({
        type: "turn.terminal",
        turnRef,
        status: "interrupted",
        threadDisposition: "reusable",
      });

      const iAck = r.pump.log.findIndex((l) => l.kind === "mark");
      const iTerminal = r.pump.log.findIndex(
        (l) => l.kind === "event" && l.event.type === "turn.terminal" && l.event.threadRef === r.thread.threadRef,
      );
      expect(iAck).toBeGreaterThanOrEqual(0);
      expect(iTerminal).toBeGreaterThan(iAck);
      // Its only terminal is the interrupt's (a hang that ended by itself, at any moment, would show a second or an
      // earlier one).
      expect(hangingTerminal().map((e) => e.type === "turn.terminal" && e.status)).toEqual(["interrupted"]);

      // the thread is reusable afterwards
      const next = await r.turn("again");
      expect(next.at(-1)).toMatchObject({ type: "turn.terminal", status: "completed" });
    });

    it("interrupt while a request is pending ends the turn interrupted", async () => {
      const r = await rig({ steps: [{ type: "command", command: "x", output: "y", approval: true }] });
      const { turnRef } = await r.send();
      await r.until(isOpened);
      await r.adapter.interrupt({ sessionId: r.sessionId, thread: r.thread, turnRef });
      const events = await r.untilEnd();
      expect(events.at(-1)).toMatchObject({ type: "turn.terminal", status: "interrupted" });
    });

    it("interrupt throws CapabilityUnsupportedError when supportsInterrupt is false", async () => {
      const r = await rig({ capabilities: caps({ turns: { supportsInterrupt: false } }), steps: [{ type: "hang" }] });
      const { turnRef } = await r.send();
      await r.until((e) => e.type === "turn.started");
      const error = await r.adapter.interrupt({ sessionId: r.sessionId, thread: r.thread, turnRef }).then(
        () => null,
        (e: unknown) => e,
      );
      expect(error).toBeInstanceOf(CapabilityUnsupportedError);
      expect(error).toMatchObject({ code: "capability_unsupported", capability: "turns.supportsInterrupt" });
      await r.adapter.stopSession({ sessionId: r.sessionId });
      await r.until((e) => e.type === "session.state" && e.state === "stopped");
    });
  });

  describe("resume", () => {
    it("a second adapter on the same backend resumes a thread from its cursor", async () => {
      const backend = new ScriptedBackend();
      const script = ({ text }: { text: string }): ScriptStep[] => [{ type: "text", text: `echo ${text}` }];
      const a = await rig({ backend, script, sessionId: "first" });
      await a.turn("one");
      const cursor = a.thread.resumeCursor;
      await a.adapter.close();

      const b = await rig({ backend, script, sessionId: "second" });
      const handle = await b.adapter.ensureProviderThread({ sessionId: "second", cwd: "/tmp", resume: { cursor } });
      expect(handle).toEqual({ threadRef: a.thread.threadRef, resumeCursor: cursor });
      const resumed = at(handle);
      const events = await b.turn("two", resumed);
      expect(events.at(-1)).toMatchObject({ type: "turn.terminal", threadRef: resumed.threadRef, status: "completed" });
      expect(textOf(events)).toBe("echo two");
      const snapshot = await b.adapter.readThreadSnapshot!({ sessionId: "second", thread: resumed });
      expect(snapshot.turns.map((t) => t.userText)).toEqual(["one", "two"]);
    });

    it("an unknown cursor throws ResumeFailedError", async () => {
      const r = await rig();
      const error = await r.adapter
        .ensureProviderThread({ sessionId: r.sessionId, cwd: "/tmp", resume: { cursor: "sthread-nope" } })
        .then(
          () => null,
          (e: unknown) => e,
        );
      expect(error).toBeInstanceOf(ResumeFailedError);
      expect(error).toMatchObject({ code: "resume_failed" });
    });

    it("a fresh backend (a provider that forgot everything) does not resume another backend's cursor", async () => {
      // Both adapters have created one thread of their own; the cursor from the first must
      // not silently attach to the second backend's unrelated thread.
      const a = await rig({ sessionId: "first" });
      const b = await rig({ sessionId: "second" });
      expect(b.thread.resumeCursor).not.toBe(a.thread.resumeCursor);
      await expect(
        b.adapter.ensureProviderThread({ sessionId: "second", cwd: "/tmp", resume: { cursor: a.thread.resumeCursor } }),
      ).rejects.toBeInstanceOf(ResumeFailedError);
    });
  });

  describe("stopSession", () => {
    it("during a hanging turn: session.state stopped and no turn terminal", async () => {
      const r = await rig({
        script: ({ text }) => (text === "hang" ? [{ type: "hang" }] : [{ type: "text", text: "fine" }]),
      });
      await r.send("hang");
      await r.until((e) => e.type === "turn.started");
      await r.adapter.stopSession({ sessionId: r.sessionId });
      const events = await r.until((e) => e.type === "session.state" && e.state === "stopped", "stopped");
      expect(events.at(-1)).toEqual({ type: "session.state", state: "stopped", message: "session stopped" });
      // The session says it stopped once its turns are over: the stopped turn's terminal, had it
      // made one, would be in the stream before this point.
      expect(r.pump.all(r.sessionId).filter((e) => e.type === "turn.terminal")).toEqual([]);

      // A full turn in another session of the same adapter runs to its end, and the stopped session stays silent.
      const s2 = "s2";
      await r.adapter.startSession({ sessionId: s2, cwd: "/tmp", model: null });
      const thread2 = at(await r.adapter.ensureProviderThread({ sessionId: s2, cwd: "/tmp" }));
      await r.adapter.sendRun({ sessionId: s2, thread: thread2, text: "after", context: null, model: null });
      await r.pump.until((e, sid) => sid === s2 && isRootEnd(r.caps, thread2)(e), "second session's turn end");
      expect(r.pump.all(r.sessionId).filter((e) => e.type === "turn.terminal")).toEqual([]);
    });

    it("a stopped session refuses new runs", async () => {
      const r = await rig();
      await r.adapter.stopSession({ sessionId: r.sessionId });
      await expect(r.send()).rejects.toMatchObject({ code: "provider_error" });
    });

    it("the stopped turn does not clobber a new turn on the same thread in a new session", async () => {
      const r = await rig({
        script: ({ text }) =>
          text === "hang" ? [{ type: "hang" }] : [{ type: "text", text: "later" }, { type: "hang" }],
      });
      await r.send("hang");
      await r.until((e) => e.type === "turn.started");
      await r.adapter.stopSession({ sessionId: r.sessionId });
      const s2 = "s2";
      await r.adapter.startSession({ sessionId: s2, cwd: "/tmp", model: null });
      const resumed = at(
        await r.adapter.ensureProviderThread({ sessionId: s2, cwd: "/tmp", resume: { cursor: r.thread.resumeCursor } }),
      );
      const { turnRef } = await r.adapter.sendRun({
        sessionId: s2,
        thread: resumed,
        text: "second",
        context: null,
        model: null,
      });
      await r.pump.until((e, sid) => sid === s2 && e.type === "item.completed", "new turn's text");
      await r.adapter.interrupt({ sessionId: s2, thread: resumed, turnRef });
      const end = await r.pump.until((e, sid) => sid === s2 && e.type === "turn.terminal", "new turn's end");
      expect(end.at(-1)).toMatchObject({ type: "turn.terminal", turnRef, status: "interrupted" });
    });
  });

  it("tags every event with its session id", async () => {
    const r = await rig({ steps: PLAIN_STEPS });
    await r.turn();
    expect(r.pump.received.length).toBeGreaterThan(5);
    expect(r.pump.received.every((e) => e.sessionId === r.sessionId)).toBe(true);
  });
});
