import { describe, expect, it } from "vitest";
import { createScriptedAdapter } from "../../src/index.js";
import type { ProviderAdapter, ProviderAdapterEvent, ProviderEvent, ScriptStep } from "../../src/index.js";
import { deferred, gateEvents, nextEvent, ofType, openTestRuntime, override, said } from "../support/runtime.js";

/**
 * Found by the model-based suite: a superseded attempt's item completion is fenced (recorded,
 * not applied), so the completion barrier must still close that item; otherwise it streams
 * forever in the read model of a finished run.
 */
describe("a completion fenced after an interrupt-restart steer", () => {
  it("still leaves no item of the finished run streaming", async () => {
    const scripted = createScriptedAdapter({
      capabilities: { turns: { supportsActiveSteering: false } },
      script: ({ text }) =>
        text === "first" ? [{ type: "text", text: "working" }, { type: "hang" }] : [{ type: "text", text: "steered" }],
    });
    // Hold the first message's completion (and everything after it) until the steer was taken.
    const gated = gateEvents(scripted, (e) => e.event.type === "item.completed");
    const { rt, events, cleanup } = await openTestRuntime({ scripted: gated.adapter });
    try {
      const { threadId } = await rt.createThread({ providerTarget: "scripted" });
      const { runId } = await rt.sendMessage({ threadId, text: "first" });
      await nextEvent(rt, "node.started", (e) => e.runId === runId && e.kind === "assistant_message");
      const steer = await rt.sendMessage({ threadId, text: "second", mode: "steer" });
      expect(steer).toMatchObject({ disposition: "steered", via: "interrupt_restart" });
      gated.release();
      const run = await rt.waitForRun(runId);
      expect(run.status).toBe("completed");
      expect(run.attempts.map((a) => a.status)).toEqual(["superseded", "completed"]);
      expect(ofType(events, "event.fenced").map((e) => e.providerEventType)).toContain("node.completed");
      expect(run.items.filter((i) => i.status === "streaming")).toEqual([]);
    } finally {
      await cleanup();
    }
  });
});

/** Every item of a run as `kind:text`. */
const itemsOf = (items: Array<{ kind: string; text?: string | null }>) => items.map((i) => `${i.kind}:${i.text ?? ""}`);

/**
 * A host that sends one more assistant delta for the first turn after that turn's terminal,
 * with the same native thread and turn refs: it arrives right after the next turn's first
 * `after` frame (its turn.started, or its first text delta), i.e. while another turn is open
 * in the same session.
 */
function trailingDelta(adapter: ProviderAdapter, text: string, after: "turn.started" | "item.delta") {
  let armed = true;
  let late: { frame: ProviderAdapterEvent; turnRef: string | undefined } | null = null;
  const consumed = deferred();
  const wrapped = override(adapter, {
    streamEvents: () => ({
      async *[Symbol.asyncIterator]() {
        for await (const e of adapter.streamEvents()) {
          yield e;
          const event = e.event;
          if (armed && event.type === "turn.terminal") {
            armed = false;
            const trailing: ProviderEvent = {
              type: "item.delta",
              kind: "assistant_message",
              stream: "text",
              delta: text,
            };
            if (event.threadRef) trailing.threadRef = event.threadRef;
            if (event.turnRef) trailing.turnRef = event.turnRef;
            late = { frame: { sessionId: e.sessionId, event: trailing }, turnRef: event.turnRef };
          } else if (late && event.type === after && event.turnRef !== late.turnRef) {
            const { frame } = late;
            late = null;
            yield frame;
            consumed.resolve(); // the pump asks for the next frame only after it processed this one
          }
        }
      },
    }),
  });
  return { adapter: wrapped, consumed: consumed.promise };
}

describe("a provider event that trails its turn's terminal", () => {
  const script = ({ text }: { text: string }): ScriptStep[] =>
    text === "B" ? [{ type: "text", text: "b-working" }, { type: "hang" }] : [{ type: "text", text: "A reply" }];
  const late = " [late text of A]";

  for (const [sameThread, after] of [
    [false, "turn.started"],
    [false, "item.delta"],
    [true, "turn.started"],
    [true, "item.delta"],
  ] as const) {
    it(
      `is fenced for its own run and never lands in the next run (${sameThread ? "same" : "another"} app thread, ` +
        `same session; arrives after the next turn's ${after}) (review s7)`,
      async () => {
        const trailing = trailingDelta(createScriptedAdapter({ script }), late, after);
        const { rt, events, cleanup } = await openTestRuntime({ p: trailing.adapter });
        try {
          const a = await rt.createThread({ providerTarget: "p" });
          const b = sameThread ? a : await rt.createThread({ providerTarget: "p" });
          const ra = await rt.sendMessage({ threadId: a.threadId, text: "A" });
          const runA = await rt.waitForRun(ra.runId);
          expect([runA.status, said(runA.items)]).toEqual(["completed", "A reply"]);

          const rb = await rt.sendMessage({ threadId: b.threadId, text: "B" });
          expect(rb.disposition).toBe("started");
          await trailing.consumed;
          await nextEvent(rt, "node.delta", (e) => e.runId === rb.runId);
          const snapshot = await rt.readThread(b.threadId);
          const runB = snapshot.runs.find((r) => r.runId === rb.runId)!;
          expect(runB.status).toBe("running");
          expect(itemsOf(runB.items)).toEqual(["user_message:B", "assistant_message:b-working"]);
          // Recorded as fenced for its own run, applied nowhere (nor to its own run after its end).
          expect(ofType(events, "event.fenced")).toEqual([
            {
              type: "event.fenced",
              threadId: a.threadId,
              runId: ra.runId,
              attemptId: runA.attempts[0]!.attemptId,
              providerEventType: "item.delta",
            },
          ]);
          expect(ofType(events, "node.delta").filter((d) => d.delta.includes("late text"))).toEqual([]);
          expect(said((await rt.readThread(a.threadId)).runs.find((r) => r.runId === ra.runId)!.items)).toBe("A reply");
          expect(ofType(events, "session.started")).toHaveLength(1);
          expect(ofType(events, "warning")).toEqual([]);

          await rt.interrupt({ runId: rb.runId });
          const endedB = await rt.waitForRun(rb.runId);
          expect(endedB.status).toBe("interrupted");
          expect(said(endedB.items)).toBe("b-working");
        } finally {
          await cleanup();
        }
      },
    );
  }
});
