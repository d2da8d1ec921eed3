import { describe, expect, it } from "vitest";
import { newBinding, type TurnBinding } from "../../src/runtime/ingest/correlation.js";
import { TurnBindings } from "../../src/runtime/ingest/turnBindings.js";

/**
 * The turn bindings keep each session's current turns apart (what a session asks for reads its own turns, not every
 * session's): these pin what the session's open turns are through the moves a binding makes.
 */

function binding(attemptId: string, sessionId: string, threadRef: string | null, makingThread = false): TurnBinding {
  return newBinding(
    {
      threadId: `thr_${attemptId}`,
      runId: `run_${attemptId}`,
      attemptId,
      rootNodeId: `nod_${attemptId}`,
      providerThreadId: `pth_${attemptId}`,
      providerTurnId: `ptu_${attemptId}`,
      sessionId,
      threadRef,
      makingThread,
    },
    [],
  );
}

const attempts = (bindings: TurnBinding[]) => bindings.map((b) => b.attemptId);

describe("TurnBindings: a session's open turns", () => {
  it("are its own provider threads' current turns, in the order their threads became current", () => {
    const turns = new TurnBindings();
    turns.add(binding("a1", "ses_1", "t1"));
    turns.add(binding("b1", "ses_2", "t1"));
    turns.add(binding("a2", "ses_1", "t2"));
    expect(attempts(turns.openIn("ses_1"))).toEqual(["a1", "a2"]);
    expect(attempts(turns.openIn("ses_2"))).toEqual(["b1"]);
    expect(turns.openIn("ses_3")).toEqual([]);
  });

  it("a later turn on the same thread takes its place; a closed or released turn is not open", () => {
    const turns = new TurnBindings();
    turns.add(binding("a1", "ses_1", "t1"));
    turns.add(binding("a2", "ses_1", "t2"));
    const next = binding("a3", "ses_1", "t1");
    turns.add(next);
    expect(attempts(turns.openIn("ses_1"))).toEqual(["a3", "a2"]);
    next.closed = true;
    expect(attempts(turns.openIn("ses_1"))).toEqual(["a2"]);
    turns.release("a2");
    turns.release("a3");
    expect(turns.openIn("ses_1")).toEqual([]);
    // Released: a new turn of the session is its only open one.
    turns.add(binding("a4", "ses_1", "t2"));
    expect(attempts(turns.openIn("ses_1"))).toEqual(["a4"]);
  });

  it("a turn that makes its thread moves to the thread the provider names, and stays the session's open turn", () => {
    const turns = new TurnBindings();
    const making = binding("a1", "ses_1", null, true);
    turns.add(making);
    turns.add(binding("b1", "ses_2", null, true));
    // A thread the session never named, ahead of the reply: the making turn's thread.
    const event = { type: "item.delta", threadRef: "new-thread", itemRef: "i1", kind: "assistant_message" } as const;
    const located = turns.locate("ses_1", { ...event, stream: "text", delta: "x" });
    expect(located?.attemptId).toBe("a1");
    expect(making.threadRef).toBe("new-thread");
    expect(attempts(turns.openIn("ses_1"))).toEqual(["a1"]);
    expect(attempts(turns.openIn("ses_2"))).toEqual(["b1"]);
    turns.release("a1");
    expect(turns.openIn("ses_1")).toEqual([]);
    expect(attempts(turns.openIn("ses_2"))).toEqual(["b1"]);
  });

  it("finds every turn by its ref among thousands of others (each session's keys kept apart)", () => {
    const turns = new TurnBindings();
    const all = Array.from({ length: 20_000 }, (_, i) => binding(`a${i}`, `ses_${i % 7}`, `t${i}`));
    for (const b of all) turns.add(b);
    for (const b of all)
      expect(
        turns.locate(b.sessionId, { type: "turn.started", threadRef: b.threadRef!, turnRef: `r${b.attemptId}` }),
      ).toBe(b);
    for (const b of all)
      expect(
        turns.locate(b.sessionId, { type: "turn.started", threadRef: b.threadRef!, turnRef: `r${b.attemptId}` }),
      ).toBe(b);
    for (const b of all.slice(0, 100)) turns.release(b.attemptId);
    expect(turns.namesFinishedTurn("ses_0", "ra0")).toEqual({ threadId: "thr_a0", runId: "run_a0", attemptId: "a0" });
    expect(turns.namesFinishedTurn("ses_1", "ra0")).toBeUndefined();
  });
});
