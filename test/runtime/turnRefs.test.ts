import { describe, expect, it } from "vitest";
import {
  createScriptedAdapter,
  ScriptedBackend,
  type DomainEvent,
  type LogRecord,
  type ProviderAdapter,
  type ScriptSource,
  type Strength,
  type TillerRuntime,
} from "../../src/index.js";
import {
  firstEvent,
  injectOnThread,
  gateEvents,
  nextEvent,
  ofType,
  openTestRuntime,
  override,
  said,
  withInjectedFrames,
} from "../support/runtime.js";
import { rewriteEvents } from "./hostileProvider.js";

/**
 * `identity.nativeTurnIds` decides what a provider's turn ref is worth. A strong ref names one turn for ever: an event
 * naming a finished turn is fenced on that ref alone. A weak one is evidence, weighed with the bindings' order: a
 * finished turn's ref does not fence an event of the current turn named alike (weak ids repeat); the ref is recorded
 * as overruled (`turn_refs_as_evidence`). Either way, a ref naming no turn never passes for the current one.
 */

const evidencePolicies = (events: LogRecord<DomainEvent>[]) =>
  ofType(events, "policy.applied").filter((p) => p.policy === "turn_refs_as_evidence");

/**
 * A provider whose turn ids restart: every turn it runs is "turn-1", in its reply and in its events. Once `hold()` is
 * called, its frames wait for `release()`: the test lets the runtime take the reply to the next turn first.
 */
function restartingTurnIds(adapter: ProviderAdapter) {
  let holding = false;
  const gated = gateEvents(adapter, (frame) => holding && frame.event.type !== "session.state");
  const renamed = namedTurnOne(gated.adapter);
  return {
    adapter: override(renamed, {
      sendRun: async (input) => {
        await adapter.sendRun(input);
        return { turnRef: "turn-1" };
      },
    }),
    hold: () => void (holding = true),
    release: gated.release,
  };
}

/**
 * The second run has its events: it ends before any event is fenced, with its own text; the ref named the finished
 * turn too, so the current turn, named alike, took them over it (recorded once for the attempt).
 */
async function expectSecondRunWhole(rt: TillerRuntime, events: LogRecord<DomainEvent>[], runId: string) {
  const outcome = await firstEvent(
    rt,
    (e) => e.type === "event.fenced" || (e.type === "run.terminal" && e.runId === runId),
  );
  expect(outcome.type).toBe("run.terminal");
  const second = await rt.waitForRun(runId);
  expect([second.status, said(second.items)]).toEqual(["completed", "re: two"]);
  expect(ofType(events, "event.fenced")).toEqual([]);
  expect(evidencePolicies(events).map((p) => [p.runId, p.capability])).toEqual([[runId, "identity.nativeTurnIds"]]);
}

/** Every turn ref the provider sends is "turn-1". */
function namedTurnOne(adapter: ProviderAdapter): ProviderAdapter {
  return rewriteEvents(adapter, (frame) =>
    frame.event.type !== "session.state" && frame.event.turnRef
      ? [{ ...frame, event: { ...frame.event, turnRef: "turn-1" } }]
      : [frame],
  );
}

/** Sends the second message while the provider's frames are held, and lets them go once its reply named the turn. */
async function secondRun(rt: TillerRuntime, threadId: string, provider: ReturnType<typeof restartingTurnIds>) {
  provider.hold();
  const { runId } = await rt.sendMessage({ threadId, text: "two" });
  await nextEvent(rt, "attempt.turn_bound", (e) => e.runId === runId);
  provider.release();
  return runId;
}

const echo: ScriptSource = ({ text }) => [{ type: "text", text: `re: ${text}` }];

describe("a provider that names a new turn as it named a finished one", () => {
  it("with weak ids: the next run has its events, never fenced as the old run's (regression)", async () => {
    const provider = restartingTurnIds(
      createScriptedAdapter({ capabilities: { identity: { nativeTurnIds: "weak" } }, script: echo }),
    );
    const { rt, events, cleanup } = await openTestRuntime({ p: provider.adapter });
    try {
      const { threadId } = await rt.createThread({ providerTarget: "p" });
      const first = await rt.waitForRun((await rt.sendMessage({ threadId, text: "one" })).runId);
      expect([first.status, said(first.items)]).toEqual(["completed", "re: one"]);
      await expectSecondRunWhole(rt, events, await secondRun(rt, threadId, provider));
    } finally {
      await cleanup();
    }
  });

  it("with strong ids: the ref is trusted, the new run's events fenced as the old turn's", async () => {
    const provider = restartingTurnIds(createScriptedAdapter({ script: echo }));
    const { rt, events, cleanup } = await openTestRuntime({ p: provider.adapter });
    try {
      const { threadId } = await rt.createThread({ providerTarget: "p" });
      const first = await rt.waitForRun((await rt.sendMessage({ threadId, text: "one" })).runId);
      const runId = await secondRun(rt, threadId, provider);
      const fenced = await nextEvent(rt, "event.fenced");
      expect(fenced.event.runId).toBe(first.runId);
      expect(rt.views.runs.get(runId)?.status).not.toBe("completed");
      expect(evidencePolicies(events)).toEqual([]);
    } finally {
      await cleanup();
    }
  });
});

/**
 * A provider whose turn ids restart ("turn-1" for every turn) and whose reply to the second turn comes only once the
 * runtime took in every frame of that turn, its terminal included: all its events arrive before its reply.
 */
function replyingLast(adapter: ProviderAdapter, reply: string | null | (() => never)) {
  let terminals = 0;
  const consumed: Array<() => void> = [];
  const afterTerminal = (n: number) => new Promise<void>((resolve) => (consumed[n] = resolve));
  const renamed = namedTurnOne(adapter);
  const counted = override(renamed, {
    streamEvents: () => ({
      async *[Symbol.asyncIterator]() {
        for await (const frame of renamed.streamEvents()) {
          yield frame;
          // The runtime asks for the next frame only once it applied this one.
          if (frame.event.type === "turn.terminal") consumed[++terminals]?.();
        }
      },
    }),
  });
  let turns = 0;
  return override(counted, {
    sendRun: async (input) => {
      turns += 1;
      const applied = turns === 2 ? afterTerminal(2) : Promise.resolve();
      await adapter.sendRun(input);
      if (turns === 1) return { turnRef: "turn-1" };
      await applied;
      if (typeof reply === "function") return reply();
      return { turnRef: reply };
    },
  });
}

describe("a weak turn ref naming a finished turn before the current turn's reply", () => {
  const weak = { identity: { nativeTurnIds: "weak" as const } };

  it("waits for the reply: named alike, the events are the current run's, none lost (regression)", async () => {
    const { rt, events, cleanup } = await openTestRuntime({
      p: replyingLast(createScriptedAdapter({ capabilities: weak, script: echo }), "turn-1"),
    });
    try {
      const { threadId } = await rt.createThread({ providerTarget: "p" });
      const first = await rt.waitForRun((await rt.sendMessage({ threadId, text: "one" })).runId);
      expect(said(first.items)).toBe("re: one");
      await expectSecondRunWhole(rt, events, (await rt.sendMessage({ threadId, text: "two" })).runId);
    } finally {
      await cleanup();
    }
  });

  it("named otherwise by the reply, they were the finished turn's: fenced as its late events", async () => {
    const { rt, events, cleanup } = await openTestRuntime({
      p: replyingLast(createScriptedAdapter({ capabilities: weak, script: echo }), "turn-2"),
    });
    try {
      const { threadId } = await rt.createThread({ providerTarget: "p" });
      const first = await rt.waitForRun((await rt.sendMessage({ threadId, text: "one" })).runId);
      const { runId } = await rt.sendMessage({ threadId, text: "two" });
      await nextEvent(rt, "attempt.turn_bound", (e) => e.runId === runId);
      const fenced = ofType(events, "event.fenced");
      expect(fenced.length).toBeGreaterThan(0);
      expect(new Set(fenced.map((f) => f.runId))).toEqual(new Set([first.runId]));
      expect(said((await rt.readThread(threadId)).runs[0]!.items)).toBe("re: one");
      expect(rt.views.runs.get(runId)?.status).toBe("running");
      await rt.interrupt({ runId });
    } finally {
      await cleanup();
    }
  });

  it("a turn that ends without its reply has them recorded as fenced, never dropped", async () => {
    const refused = () => {
      throw new Error("the provider refused the turn after streaming it");
    };
    const { rt, events, cleanup } = await openTestRuntime({
      p: replyingLast(createScriptedAdapter({ capabilities: weak, script: echo }), refused),
    });
    try {
      const { threadId } = await rt.createThread({ providerTarget: "p" });
      const first = await rt.waitForRun((await rt.sendMessage({ threadId, text: "one" })).runId);
      const second = await rt.waitForRun((await rt.sendMessage({ threadId, text: "two" })).runId);
      expect(second.status).toBe("failed");
      const fenced = ofType(events, "event.fenced");
      // The text's start, its delta, its completion and the terminal: each one recorded, for the turn the ref named.
      expect(fenced.map((f) => f.providerEventType)).toContain("turn.terminal");
      expect(new Set(fenced.map((f) => f.runId))).toEqual(new Set([first.runId]));
    } finally {
      await cleanup();
    }
  });
});

describe("an event naming a turn the runtime never started", () => {
  for (const nativeTurnIds of ["weak", "strong"] as const satisfies readonly Strength[]) {
    it(`never passes for the current turn named otherwise (${nativeTurnIds} ids)`, async () => {
      const backend = new ScriptedBackend();
      const provider = withInjectedFrames(
        createScriptedAdapter({
          backend,
          capabilities: { identity: { nativeTurnIds } },
          script: () => [
            { type: "text", text: "working" },
            { type: "gate", name: "g" },
            { type: "text", text: " done" },
          ],
        }),
      );
      const { rt, events, cleanup } = await openTestRuntime({ p: provider.adapter });
      try {
        const { threadId } = await rt.createThread({ providerTarget: "p" });
        const { runId } = await rt.sendMessage({ threadId, text: "go" });
        await nextEvent(rt, "node.completed", (e) => e.runId === runId && e.text === "working");
        // A turn of the provider's own on the same thread (a background task's) ends, failed.
        injectOnThread(provider.inject, events, {
          type: "turn.terminal",
          turnRef: "turn-of-its-own",
          status: "failed",
          threadDisposition: "reusable",
          failureClass: "boom",
        });
        const warned = await nextEvent(rt, "warning");
        expect(warned.event.message).toMatch(/turn\.terminal for no known turn/);
        backend.openGate("g");
        const run = await rt.waitForRun(runId);
        expect([run.status, said(run.items)]).toEqual(["completed", "working done"]);
        expect(evidencePolicies(events)).toEqual([]);
      } finally {
        await cleanup();
      }
    });
  }
});

describe("a weak turn ref naming a finished turn when no turn is current", () => {
  it("is fenced for that turn's run: the order says it came after its turn", async () => {
    const provider = withInjectedFrames(
      createScriptedAdapter({ capabilities: { identity: { nativeTurnIds: "weak" } }, script: echo }),
    );
    const { rt, events, cleanup } = await openTestRuntime({ p: provider.adapter });
    try {
      const { threadId } = await rt.createThread({ providerTarget: "p" });
      const run = await rt.waitForRun((await rt.sendMessage({ threadId, text: "one" })).runId);
      const [session] = ofType(events, "session.started");
      const [bound] = ofType(events, "provider_thread.bound");
      const [turn] = ofType(events, "attempt.turn_bound");
      provider.inject({
        sessionId: session!.sessionId,
        event: {
          type: "item.delta",
          threadRef: bound!.nativeThreadRef,
          turnRef: turn!.nativeTurnRef!,
          kind: "assistant_message",
          stream: "text",
          delta: " late",
        },
      });
      const fenced = await nextEvent(rt, "event.fenced");
      expect([fenced.event.runId, fenced.event.providerEventType]).toEqual([run.runId, "item.delta"]);
      expect(said((await rt.readThread(threadId)).runs[0]!.items)).toBe("re: one");
    } finally {
      await cleanup();
    }
  });
});
