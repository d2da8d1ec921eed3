import { describe, expect, it } from "vitest";
import { createRuntime, createScriptedAdapter, keyedScript, TillerError } from "../../src/index.js";
import { nextEvent, ofType, openTestRuntime, recordCalls } from "../support/runtime.js";

const script = keyedScript({
  "[ask]": [
    {
      type: "question",
      questions: [{ id: "color", question: "Which color?", options: [{ label: "red" }, { label: "blue" }] }],
    },
  ],
  "[hang]": [{ type: "text", text: "..." }, { type: "hang" }],
});

describe("embedding API: bad input", () => {
  it("returns a typed error naming the field for every call, and leaves the log readable", async () => {
    const { rt, dataDir, cleanup } = await openTestRuntime({ scripted: createScriptedAdapter({ script }) });
    try {
      const { threadId } = await rt.createThread({ providerTarget: "scripted" });
      const head = rt.views.head;
      const bad: Array<[Promise<unknown> | (() => unknown), string, string]> = [
        [rt.createThread({ providerTarget: "nope" }), "invalid_input", "providerTarget"],
        [rt.createThread({ providerTarget: "" }), "invalid_input", "providerTarget"],
        [rt.createThread({ providerTarget: "scripted", extra: 1 } as never), "invalid_input", "extra"],
        [rt.sendMessage({ threadId, text: "" }), "invalid_input", "text"],
        [rt.sendMessage({ threadId, text: "x", mode: "shout" as never }), "invalid_input", "mode"],
        [rt.sendMessage({ threadId: "thr_missing", text: "x" }), "not_found", ""],
        [rt.sendMessage({ threadId: 42 as never, text: "x" }), "invalid_input", "threadId"],
        [rt.interrupt({ runId: "run_missing" }), "not_found", ""],
        [rt.interrupt({} as never), "invalid_input", "runId"],
        [rt.respond({ requestId: "req_missing", response: { kind: "decision", decision: "accept" } }), "not_found", ""],
        [
          rt.respond({ requestId: "req_x", response: { kind: "decision", decision: "maybe" } as never }),
          "invalid_input",
          "response.decision",
        ],
        [rt.forkThread({ threadId: "thr_missing" }), "not_found", ""],
        [rt.readThread("not-an-id"), "invalid_input", ""],
        [() => rt.subscribe({ afterSeq: -1 }, () => {}), "invalid_input", "afterSeq"],
        [() => rt.subscribe({ afterSeq: head + 100 }, () => {}), "invalid_input", "afterSeq"],
        [() => rt.capabilities("nope"), "invalid_input", "providerTarget"],
        [rt.waitForRun("run_missing"), "not_found", ""],
      ];
      for (const [call, code, field] of bad) {
        const error = await (async () => (typeof call === "function" ? call() : call))().then(
          () => null,
          (e: unknown) => e,
        );
        expect(error, `${code} ${field}`).toBeInstanceOf(TillerError);
        expect((error as TillerError).code).toBe(code);
        if (field) expect((error as TillerError).details.field).toBe(field);
      }
      expect(rt.views.head).toBe(head); // nothing was written
      await rt.close();
      const reopened = await createRuntime({ dataDir, providers: { scripted: createScriptedAdapter() } });
      expect(reopened.listThreads()).toHaveLength(1);
      await reopened.close();
    } finally {
      await cleanup();
    }
  });

  it("rejects a second runtime on the same data directory with a clear error", async () => {
    const { dataDir, cleanup } = await openTestRuntime({ scripted: createScriptedAdapter() });
    try {
      await expect(createRuntime({ dataDir, providers: { scripted: createScriptedAdapter() } })).rejects.toMatchObject({
        code: "data_dir_locked",
      });
    } finally {
      await cleanup();
    }
  });

  it("rejects bad runtime options", async () => {
    await expect(createRuntime({ providers: {} })).rejects.toMatchObject({ code: "invalid_input", field: "providers" });
    await expect(createRuntime({ providers: { scripted: {} as never } })).rejects.toMatchObject({
      code: "invalid_input",
      field: "providers.scripted.getCapabilities",
    });
  });
});

describe("embedding API: idempotent commands", () => {
  it("returns the original receipt for a repeated command id without repeating the provider call", async () => {
    const recorded = recordCalls(createScriptedAdapter({ script }));
    const { rt, events, cleanup } = await openTestRuntime({ scripted: recorded.adapter });
    try {
      const created = await rt.createThread({ providerTarget: "scripted", commandId: "c1" });
      expect(await rt.createThread({ providerTarget: "scripted", commandId: "c1" })).toEqual(created);
      const sent = await rt.sendMessage({ threadId: created.threadId, text: "hello", commandId: "c2" });
      await rt.waitForRun(sent.runId);
      expect(await rt.sendMessage({ threadId: created.threadId, text: "hello", commandId: "c2" })).toEqual(sent);
      expect(recorded.calls.filter((c) => c.method === "sendRun")).toHaveLength(1);
      expect(ofType(events, "run.created")).toHaveLength(1);
      await expect(rt.interrupt({ runId: sent.runId, commandId: "c1" })).rejects.toMatchObject({ code: "conflict" });
    } finally {
      await cleanup();
    }
  });
});

describe("embedding API: requests, queue and snapshots", () => {
  it("answers a structured question, refuses a second answer, and shows the answer in the projection", async () => {
    const { rt, events, cleanup } = await openTestRuntime({ scripted: createScriptedAdapter({ script }) });
    try {
      const { threadId } = await rt.createThread({ providerTarget: "scripted" });
      const { runId } = await rt.sendMessage({ threadId, text: "[ask]" });
      const opened = await nextEvent(rt, "request.opened");
      const snapshot = await rt.readThread(threadId);
      expect(snapshot.runs[0]!.status).toBe("waiting");
      expect(snapshot.pendingRequests).toEqual([
        expect.objectContaining({ requestId: opened.event.requestId, kind: "user_input", respondable: true }),
      ]);
      await expect(
        rt.respond({ requestId: opened.event.requestId, response: { kind: "decision", decision: "accept" } }),
      ).rejects.toMatchObject({ code: "conflict" });
      await rt.respond({
        requestId: opened.event.requestId,
        response: { kind: "answers", answers: { color: "blue" } },
      });
      const run = await rt.waitForRun(runId);
      // Answered: the run went back to running (it was not left "waiting") before its terminal.
      const resolvedAt = events.find((r) => r.event.type === "request.resolved")!.seq;
      expect(
        ofType(
          events.filter((r) => r.seq > resolvedAt),
          "run.state",
        ).map((e) => e.status),
      ).toEqual(["running"]);
      expect(run.items.map((i) => i.kind)).toEqual(["user_message", "question", "assistant_message"]);
      expect(run.items.at(-1)!.text).toContain("blue");
      await expect(
        rt.respond({ requestId: opened.event.requestId, response: { kind: "answers", answers: { color: "red" } } }),
      ).rejects.toMatchObject({ code: "conflict" });
    } finally {
      await cleanup();
    }
  });

  it("queues a follow-up until the turn boundary; a snapshot plus the events after its seq miss nothing", async () => {
    const { rt, cleanup } = await openTestRuntime({
      scripted: createScriptedAdapter({ script, capabilities: { turns: { supportsActiveSteering: false } } }),
    });
    try {
      const { threadId } = await rt.createThread({ providerTarget: "scripted" });
      const first = await rt.sendMessage({ threadId, text: "[hang]" });
      const second = await rt.sendMessage({ threadId, text: "next" });
      expect(second).toMatchObject({ disposition: "queued", queuePosition: 1 });
      const snapshot = await rt.readThread(threadId);
      expect(["starting", "running"]).toContain(snapshot.runs[0]!.status);
      expect(snapshot.runs[1]!.status).toBe("queued");
      const after: number[] = [];
      const all: Array<{ seq: number; threadId: string | null }> = [];
      rt.subscribe({ threadId, afterSeq: snapshot.seq }, (r) => after.push(r.seq));
      rt.subscribe({ afterSeq: snapshot.seq }, (r) =>
        all.push({ seq: r.seq, threadId: "threadId" in r.event ? r.event.threadId : null }),
      );
      await rt.interrupt({ runId: first.runId });
      expect((await rt.waitForRun(first.runId)).status).toBe("interrupted");
      expect((await rt.waitForRun(second.runId)).status).toBe("completed");
      expect(after[0]).toBe(all.find((e) => e.threadId === threadId)!.seq);
      expect(after).toEqual(
        all
          .filter((e) => e.threadId === threadId)
          .map((e) => e.seq)
          .slice(0, after.length),
      );
      const runCreatedSecond = (await rt.readThread(threadId)).runs[1]!;
      expect(runCreatedSecond.attempts).toHaveLength(1);
    } finally {
      await cleanup();
    }
  });
});
