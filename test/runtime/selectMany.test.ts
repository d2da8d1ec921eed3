import { describe, expect, it } from "vitest";
import { createScriptedAdapter, keyedScript, type ReadModelState, type ThreadListEntry } from "../../src/index.js";
import { openTestRuntime } from "../support/runtime.js";

/**
 * `runtime.select` with many threads changing in the same commit group: the read models are built once per publish
 * from the changes of its records. The list keeps the threads' order and every part that did not change.
 */
describe("select, many threads at once", () => {
  it("lists threads created together in order; a change to one keeps every other entry as it was", async () => {
    const scripted = createScriptedAdapter({ script: keyedScript({ "[hi]": [{ type: "text", text: "hi" }] }) });
    const { rt, cleanup } = await openTestRuntime({ scripted });
    try {
      const states: ReadModelState[] = [];
      let wake: (() => void) | undefined;
      const unsubscribe = rt.select(
        (s) => s,
        (state) => {
          states.push(state);
          wake?.();
        },
      );
      const until = async (done: (s: ReadModelState) => boolean) => {
        while (!states.length || !done(states.at(-1)!)) await new Promise<void>((resolve) => (wake = resolve));
        return states.at(-1)!;
      };
      await until(() => true);
      const created = await Promise.all(
        Array.from({ length: 30 }, (_, i) => rt.createThread({ providerTarget: "scripted", title: `t${i}` })),
      );
      const ids = created.map((t) => t.threadId);
      const listed = await until((s) => s.threadList.length === 30);
      // In the order the threads were recorded, the same in the list and the threads by id.
      const order = listed.threadList.map((t: ThreadListEntry) => t.threadId);
      expect([...order].sort()).toEqual([...ids].sort());
      expect(Object.keys(listed.threads)).toEqual(order);
      expect(rt.listThreads().map((t) => t.threadId)).toEqual(order);

      const { runId } = await rt.sendMessage({ threadId: ids[7]!, text: "[hi]" });
      await rt.waitForRun(runId);
      const after = await until((s) => s.threads[ids[7]!]!.runs[0]?.status === "completed");
      expect(after.threadList.map((t) => t.threadId)).toEqual(order);
      for (let i = 0; i < order.length; i++) {
        if (order[i] === ids[7]) continue;
        expect(after.threadList[i]).toBe(listed.threadList[i]);
        expect(after.threads[order[i]!]).toBe(listed.threads[order[i]!]);
      }
      expect(after.threads[ids[7]!]!.runs.map((r) => r.status)).toEqual(["completed"]);
      expect(Object.isFrozen(after.threads)).toBe(true);
      expect(Object.isFrozen(after.threadList)).toBe(true);
      unsubscribe();
    } finally {
      await cleanup();
    }
  });
});
