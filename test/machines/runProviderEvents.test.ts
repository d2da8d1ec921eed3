import { describe, expect, it } from "vitest";
import type { DomainEvent } from "../../src/domain/events.js";
import { providerEventOnlyRecords, runMachine } from "../../src/machines/run.js";
import { noSteer, open, opened, running } from "./runHarness.js";

/**
 * The runtime commits a provider event of a run's active attempt itself, without a step of the run's machine, where
 * the machine would only record it (`providerEventOnlyRecords`). The machine itself is the judge here, state by
 * state: sent such an event where the predicate says yes, it records exactly that event and changes neither its
 * state nor its context. Where the predicate says no, the event goes through the machine (always right).
 */
type Run = ReturnType<typeof open>;
type RunStateNode = typeof runMachine.root;
const reach: Record<string, () => Run> = {
  queued: () => open(),
  starting: () => {
    const r = open();
    r.actor.send({ type: "START" });
    return r;
  },
  queuedAtProvider: () => {
    const r = open();
    r.actor.send({ type: "START", queued: true });
    r.accept(); // the provider took the turn into its own queue
    return r;
  },
  "active.running": () => running(),
  "active.waiting": () => {
    const r = running();
    r.actor.send({ type: "REQUEST_OPENED", attemptId: r.first.attemptId, requestId: "req_1", event: opened("req_1") });
    return r;
  },
  restarting: () => {
    const r = running(noSteer);
    r.actor.send({ type: "STEER", text: "go left", messageId: "msg_2" });
    return r;
  },
  interruptingRestart: () => {
    const r = running(noSteer);
    r.actor.send({ type: "STEER", text: "go left", messageId: "msg_2" });
    r.actor.send({ type: "INTERRUPT" });
    return r;
  },
};

const itemStarted = (attemptId: string): DomainEvent => ({
  type: "node.started",
  threadId: "thr_1",
  runId: "run_1",
  attemptId,
  nodeId: `nod_item_${attemptId}`,
  parentNodeId: `nod_root_${attemptId}`,
  kind: "assistant_message",
  nativeRef: "item-1",
  providerTarget: "scripted",
  detail: null,
});

const stateName = (value: unknown): string =>
  typeof value === "string"
    ? value
    : Object.entries(value as Record<string, unknown>).map(([k, v]) => `${k}.${stateName(v)}`)[0]!;

/** Every state a run rests in: the final ones and the transient ones (left at once by `always`) excepted. */
function restingStates(node: RunStateNode, prefix = ""): string[] {
  return Object.values(node.states).flatMap((child) => {
    const name = `${prefix}${child.key}`;
    if (child.type === "final" || child.always) return [];
    return child.type === "compound" ? restingStates(child, `${name}.`) : [name];
  });
}

describe("run machine: provider events the runtime commits without a machine step", () => {
  it("is checked in every state a run rests in", () => {
    expect(Object.keys(reach).sort()).toEqual(restingStates(runMachine.root).sort());
  });

  for (const [name, make] of Object.entries(reach)) {
    it(`in ${name}`, () => {
      const r = make();
      const before = r.actor.getSnapshot();
      expect(stateName(before.value)).toBe(name);
      const attemptId = before.context.activeAttemptId;
      // Before the first attempt, and between a superseded attempt and the next, no attempt is active: every provider
      // event goes to the machine (the runtime's bypass needs the event's attempt to own the run).
      if (["queued", "restarting", "interruptingRestart"].includes(name)) return expect(attemptId).toBeNull();
      expect(attemptId).not.toBeNull();
      const event = itemStarted(attemptId!);
      const onlyRecords = providerEventOnlyRecords(before);
      expect(onlyRecords).toBe(name !== "starting" && name !== "queuedAtProvider");
      r.clear();
      r.actor.send({ type: "PROVIDER", attemptId: attemptId!, event });
      const after = r.actor.getSnapshot();
      if (onlyRecords) {
        expect(r.emitted).toEqual([{ type: "record", event }]);
        expect(after.value).toEqual(before.value);
        expect(after.context).toBe(before.context);
      } else if (name === "queuedAtProvider") {
        // Anything the provider says of a turn it held in its queue means it runs now.
        expect(stateName(after.value)).toBe("active.running");
      }
    });
  }
});
