import { describe, expect, it } from "vitest";
import type { ProviderEvent } from "../../src/adapters/contract.js";
import { createScriptedAdapter } from "../../src/index.js";
import { HELD_EVENTS_MAX, Normalizer, type Routed } from "../../src/runtime/ingest/normalizer.js";

/**
 * Events that wait for a turn's reply (a weak turn ref named a finished turn before it) are bounded: a provider that
 * streams on and never replies has the doubt decided without the reply, with a warning, and nothing is dropped.
 */

const caps = createScriptedAdapter({ capabilities: { identity: { nativeTurnIds: "weak" } } }).getCapabilities();

function turn(normalizer: Normalizer, n: number) {
  return normalizer.beginTurn({
    threadId: "thr_1",
    runId: `run_${n}`,
    attemptId: `att_${n}`,
    rootNodeId: `nod_root_${n}`,
    providerThreadId: "pth_1",
    sessionId: "ses_1",
    threadRef: "thread-a",
  });
}

const event = (n: number): ProviderEvent => ({
  type: "item.delta",
  threadRef: "thread-a",
  turnRef: "t",
  itemRef: "i",
  kind: "assistant_message",
  stream: "text",
  delta: `d${n}`,
});

describe("events held for a turn's reply", () => {
  it(`wait up to ${HELD_EVENTS_MAX}; one more decides them without the reply, each one kept`, () => {
    const normalizer = new Normalizer("scripted", () => ({ capabilities: caps, hostGeneration: 1 }));
    turn(normalizer, 1);
    normalizer.acceptTurn("att_1", "t");
    normalizer.takeOpenNodes("att_1");
    normalizer.release("att_1");
    turn(normalizer, 2);
    for (let n = 0; n < HELD_EVENTS_MAX; n += 1) expect(normalizer.ingest("ses_1", event(n))).toEqual([]);
    const decided: Routed[] = normalizer.ingest("ses_1", event(HELD_EVENTS_MAX));
    const [warning, ...rest] = decided;
    expect(warning).toMatchObject({ to: "log", event: { type: "warning", runId: "run_2" } });
    expect(rest).toHaveLength(HELD_EVENTS_MAX + 1);
    expect(rest.every((r) => r.to === "fenced" && r.runId === "run_1")).toBe(true);
    // The doubt is decided for that turn: the next event is not held again.
    expect(normalizer.ingest("ses_1", event(0))).toMatchObject([{ to: "fenced", runId: "run_1" }]);
    // Its reply, when it comes, has nothing left waiting.
    expect(normalizer.acceptTurn("att_2", "t")).toBeNull();
  });
});
