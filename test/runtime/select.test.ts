import { describe, expect, it } from "vitest";
import {
  createScriptedAdapter,
  keyedScript,
  shallowEqual,
  type ReadModelState,
  type RuntimeFailure,
  type ScriptStep,
  type TillerRuntime,
} from "../../src/index.js";
import { nextEvent, ofType, openTestRuntime } from "../support/runtime.js";

/**
 * `runtime.select`: a UI subscribes to parts of the read models (thread list, a thread's run
 * statuses, pending requests) through the real runtime and the scripted provider. It is told
 * the value once, then once per change, never on a text delta.
 */

const TEXT = "streamed in many small deltas ".repeat(10);
const work: ScriptStep[] = [
  { type: "text", text: TEXT, chunkSize: 3 },
  { type: "command", command: "npm test", output: "ok", approval: true },
  { type: "text", text: TEXT, chunkSize: 3 },
];
const scripted = () => createScriptedAdapter({ script: keyedScript({ "[work]": work }) });

/** Every value a selection's listener receives, and a way to wait until they satisfy a condition. */
function watch<T>(rt: TillerRuntime, selector: (state: ReadModelState) => T, equal?: (a: T, b: T) => boolean) {
  const values: T[] = [];
  let waiting: Array<{ done: (values: T[]) => boolean; resolve: () => void }> = [];
  const unsubscribe = rt.select(
    selector,
    (value) => {
      values.push(value);
      waiting = waiting.filter((w) => !(w.done(values) && (w.resolve(), true)));
    },
    equal,
  );
  const until = (done: (values: T[]) => boolean) =>
    new Promise<void>((resolve) => (done(values) ? resolve() : waiting.push({ done, resolve })));
  return { values, unsubscribe, until };
}

describe("select", () => {
  it("tells a UI the thread list and the pending requests once per change, never on a text delta", async () => {
    const { rt, events, cleanup } = await openTestRuntime({ scripted: scripted() });
    try {
      const threads = watch(rt, (s) => s.threadList);
      const pending = watch(rt, (s) => s.pendingRequests);
      await threads.until((v) => v.length === 1);
      const { threadId } = await rt.createThread({ providerTarget: "scripted", title: "ui" });
      const runs = watch(rt, (s) => s.threads[threadId]?.runs.map((r) => r.status), shallowEqual);

      const { runId } = await rt.sendMessage({ threadId, text: "[work] go" });
      const opened = await nextEvent(rt, "request.opened", (e) => e.runId === runId);
      await pending.until((v) => v.length === 2);
      await rt.respond({ requestId: opened.event.requestId, response: { kind: "decision", decision: "accept" } });
      await rt.waitForRun(runId);
      await threads.until((v) => v.at(-1)?.[0]?.status === "idle" && v.at(-1)?.[0]?.runs === 1);
      await pending.until((v) => v.length === 3);
      await runs.until((v) => v.at(-1)?.[0] === "completed");

      // Text streamed all along (its deltas coalesced per commit group), and none of it told the UI anything.
      const deltas = ofType(events, "node.delta");
      expect(deltas.length).toBeGreaterThan(0);
      expect(deltas.reduce((n, e) => n + e.delta.length, 0)).toBeGreaterThan(100);
      const entry = { threadId, title: "ui", providerTarget: "scripted" };
      expect(threads.values).toEqual([
        [],
        [{ ...entry, runs: 0, status: "idle" }],
        [{ ...entry, runs: 1, status: "active" }],
        [{ ...entry, runs: 1, status: "idle" }],
      ]);
      expect(pending.values.map((v) => v.map((r) => [r.requestId, r.kind, r.status]))).toEqual([
        [],
        [[opened.event.requestId, "command", "pending"]],
        [],
      ]);
      // Run statuses: once per change (a durable batch may hold several), never a repeat, ending completed.
      const statusRecords =
        ofType(events, "run.state").length +
        ofType(events, "run.created").length +
        ofType(events, "run.terminal").length;
      expect(runs.values.length).toBeLessThanOrEqual(statusRecords + 1);
      runs.values.slice(1).forEach((value, i) => expect(value).not.toEqual(runs.values[i]));
      expect(runs.values.at(-1)).toEqual(["completed"]);
    } finally {
      await cleanup();
    }
  });

  it("stops telling a listener once it unsubscribes, even before its first value", async () => {
    const { rt, cleanup } = await openTestRuntime({ scripted: scripted() });
    try {
      const before = watch(rt, (s) => s.threadList);
      before.unsubscribe();
      const after = watch(rt, (s) => s.threadList);
      await after.until((v) => v.length === 1);
      after.unsubscribe();
      const still = watch(rt, (s) => s.threadList);
      const { threadId } = await rt.createThread({ providerTarget: "scripted" });
      await rt.waitForRun((await rt.sendMessage({ threadId, text: "hello" })).runId);
      await still.until((v) => v.at(-1)?.[0]?.status === "idle" && v.at(-1)?.[0]?.runs === 1);
      expect(before.values).toEqual([]);
      expect(after.values).toEqual([[]]);
    } finally {
      await cleanup();
    }
  });

  it("gives frozen copies: a caller cannot change the runtime's read models through them", async () => {
    const { rt, cleanup } = await openTestRuntime({ scripted: scripted() });
    try {
      const { threadId } = await rt.createThread({ providerTarget: "scripted", title: "mine" });
      const { runId } = await rt.sendMessage({ threadId, text: "[work] go" });
      await nextEvent(rt, "request.opened", (e) => e.runId === runId);
      const state = watch(rt, (s) => s);
      await state.until((v) => v.at(-1)?.pendingRequests.length === 1);
      const seen = state.values.at(-1)!;
      const request = seen.pendingRequests[0]!;
      expect(() => ((seen.threadList[0] as { title: string }).title = "changed")).toThrow(TypeError);
      expect(() => (seen.threadList as unknown[]).push({})).toThrow(TypeError);
      expect(() => ((seen.threads[threadId]!.runs[0] as { status: string }).status = "failed")).toThrow(TypeError);
      expect(() => ((request.payload as { command: string }).command = "rm -rf /")).toThrow(TypeError);
      expect(rt.listThreads()[0]?.title).toBe("mine");
      const snapshot = await rt.readThread(threadId);
      expect(snapshot.pendingRequests[0]?.payload).toEqual(request.payload);
      expect(Object.isFrozen(snapshot.pendingRequests[0]?.payload)).toBe(false);
      await rt.respond({ requestId: request.requestId, response: { kind: "decision", decision: "accept" } });
      await rt.waitForRun(runId);
    } finally {
      await cleanup();
    }
  });

  it("starts from the log after a reopen, and reports a listener that throws without stopping the others", async () => {
    const failures: RuntimeFailure[] = [];
    const first = await openTestRuntime({ scripted: scripted() });
    const { threadId } = await first.rt.createThread({ providerTarget: "scripted", title: "kept" });
    await first.rt.waitForRun((await first.rt.sendMessage({ threadId, text: "hello" })).runId);
    await first.rt.close();
    const { rt, cleanup } = await openTestRuntime(
      { scripted: scripted() },
      { dataDir: first.dataDir, onFailure: (f) => failures.push(f) },
    );
    try {
      rt.select(
        (s) => s.threadList,
        () => {
          throw new Error("a broken UI");
        },
      );
      const threads = watch(rt, (s) => s.threadList);
      await threads.until((v) => v.length === 1);
      expect(threads.values[0]).toEqual([
        { threadId, title: "kept", providerTarget: "scripted", runs: 1, status: "idle" },
      ]);
      await rt.waitForRun((await rt.sendMessage({ threadId, text: "again" })).runId);
      await threads.until((v) => v.at(-1)?.[0]?.runs === 2 && v.at(-1)?.[0]?.status === "idle");
      expect(failures.filter((f) => f.kind === "subscriber_threw").length).toBeGreaterThanOrEqual(1);
      expect(failures.every((f) => f.kind === "subscriber_threw" && (f.error as Error).message === "a broken UI")).toBe(
        true,
      );
    } finally {
      await cleanup();
    }
  });

  it("refuses what is not a function", async () => {
    const { rt, cleanup } = await openTestRuntime({ scripted: scripted() });
    try {
      expect(() => rt.select("threadList" as never, () => undefined)).toThrow(
        expect.objectContaining({ code: "invalid_input", field: "selector" }),
      );
      expect(() => rt.select((s) => s, null as never)).toThrow(
        expect.objectContaining({ code: "invalid_input", field: "listener" }),
      );
      expect(() =>
        rt.select(
          (s) => s,
          () => undefined,
          1 as never,
        ),
      ).toThrow(expect.objectContaining({ code: "invalid_input", field: "equal" }));
    } finally {
      await cleanup();
    }
  });
});
