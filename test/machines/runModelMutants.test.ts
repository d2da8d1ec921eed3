import { describe, expect, it } from "vitest";
import type { DomainEvent } from "../../src/domain/events.js";
import type { NodeKind } from "../../src/domain/items.js";
import { open } from "./runHarness.js";

/**
 * The run machine's reading of a queued turn's early events (runModel.ts, `isProviderActivity`; issue 14). A turn
 * handed to a provider that queues follow-ups itself waits, still `queued`, until the provider takes it up (the domain
 * model's Run lifecycle: queued → starting → running; the capability seed's `turns.supportsQueuedMessages`). Anything
 * the provider says of the turn before its reply to the start is the sign it runs already; the root node's start is
 * not, since the runtime records it itself as it sends the turn (events.md: the root node holds the turn's items).
 */

/** A run handed to the provider's own queue, whose provider has not replied to the start yet. */
function handedToProviderQueue() {
  const r = open();
  r.actor.send({ type: "START", queued: true });
  return r;
}

function nodeStarted(attemptId: string, kind: NodeKind, nodeId: string): DomainEvent {
  return {
    type: "node.started",
    threadId: "thr_1",
    runId: "run_1",
    attemptId,
    nodeId,
    parentNodeId: kind === "root_turn" ? null : `nod_${attemptId}_root`,
    kind,
    nativeRef: null,
    providerTarget: "alpha",
    detail: null,
  };
}

const runStates = (r: ReturnType<typeof open>) =>
  r.records().flatMap((e) => (e.type === "run.state" ? [e.status] : []));

describe("run machine: a queued turn the provider speaks of before replying to its start", () => {
  it("an item of the turn began: the turn runs already, so the provider's reply finds the run running", () => {
    const r = handedToProviderQueue();
    const { attemptId } = r.attempt();
    const item = nodeStarted(attemptId, "assistant_message", "nod_msg_1");
    r.actor.send({ type: "PROVIDER", attemptId, event: item });
    expect(r.records()).toContainEqual(item);
    r.accept();
    expect(r.state()).toEqual({ active: "running" });
    expect(runStates(r)).toEqual(["running"]);
  });

  it("every kind of item but the root is a sign the turn runs", () => {
    const kinds: NodeKind[] = ["reasoning", "tool_call", "command_execution", "file_change", "subagent"];
    for (const kind of kinds) {
      const r = handedToProviderQueue();
      const { attemptId } = r.attempt();
      r.actor.send({ type: "PROVIDER", attemptId, event: nodeStarted(attemptId, kind, `nod_${kind}`) });
      r.accept();
      expect(r.state(), kind).toEqual({ active: "running" });
    }
  });

  it("the root node starting is the runtime's own record: the reply leaves the run queued at the provider", () => {
    const r = handedToProviderQueue();
    const { attemptId, rootNodeId } = r.attempt();
    const root = nodeStarted(attemptId, "root_turn", rootNodeId);
    r.actor.send({ type: "PROVIDER", attemptId, event: root });
    expect(r.records()).toContainEqual(root);
    r.accept();
    expect(r.state()).toBe("queuedAtProvider");
    expect(runStates(r)).toEqual([]);
  });

  it("another attempt's item is fenced and is no sign this turn runs", () => {
    const r = handedToProviderQueue();
    r.actor.send({ type: "PROVIDER", attemptId: "att_other", event: nodeStarted("att_other", "reasoning", "nod_x") });
    expect(r.records().at(-1)).toMatchObject({ type: "event.fenced", attemptId: "att_other" });
    r.accept();
    expect(r.state()).toBe("queuedAtProvider");
  });
});
