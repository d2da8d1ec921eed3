import { describe, expect, it } from "vitest";
import { InspectorModel } from "../../inspector/server/model.js";
import type { LogEntry } from "../../inspector/server/protocol.js";

let seq = 0;
const at = "2026-01-01T00:00:00.000Z";
const rec = (event: LogEntry["event"]): LogEntry => ({ seq: ++seq, at, event });

describe("inspector model", () => {
  const log = [
    rec({
      type: "thread.created",
      threadId: "thr_1",
      title: "T",
      cwd: "/",
      providerTarget: "s",
      model: null,
      lineage: null,
    }),
    rec({
      type: "session.started",
      sessionId: "ses_1",
      providerTarget: "s",
      provider: "scripted",
      hostGeneration: 0,
      capabilities: { version: 1 },
    }),
    rec({
      type: "provider_thread.bound",
      threadId: "thr_1",
      providerThreadId: "pth_1",
      providerTarget: "s",
      sessionId: "ses_1",
    }),
    rec({
      type: "run.created",
      threadId: "thr_1",
      runId: "run_1",
      ordinal: 1,
      providerTarget: "s",
      userMessageId: "m",
      text: "x",
      mode: "auto",
    }),
    rec({
      type: "attempt.started",
      threadId: "thr_1",
      runId: "run_1",
      attemptId: "att_1",
      ordinal: 1,
      reason: "initial",
      rootNodeId: "n",
      text: "x",
    }),
    rec({ type: "run.state", threadId: "thr_1", runId: "run_1", status: "running" }),
    rec({
      type: "request.opened",
      threadId: "thr_1",
      runId: "run_1",
      requestId: "req_1",
      nodeId: "n2",
      payload: { kind: "command", command: "ls" },
    }),
    rec({
      type: "request.opened",
      threadId: "thr_1",
      runId: "run_1",
      requestId: "req_2",
      nodeId: "n3",
      payload: { kind: "command", command: "pwd" },
    }),
  ];

  it(
    "builds the tree from the log: " +
      "targets with sessions and provider threads, threads with runs, attempts and requests",
    () => {
      const model = new InspectorModel(null);
      expect(model.append(log)).toHaveLength(log.length);
      expect(model.append(log.slice(0, 3))).toEqual([]); // duplicates by seq are ignored
      const [target, thread] = model.tree();
      expect(target).toMatchObject({
        kind: "target",
        id: "target:s",
        children: [
          {
            kind: "session",
            id: "ses_1",
            state: "starting",
            children: [{ kind: "providerThread", id: "pth_1", state: "active" }],
          },
        ],
      });
      expect(thread).toMatchObject({
        kind: "thread",
        id: "thr_1",
        state: "busy",
        children: [{ kind: "run", id: "run_1", state: "active.running" }],
      });
      expect(thread!.children[0]!.children.map((c) => [c.kind, c.id, c.status])).toEqual([
        ["attempt", "att_1", "running"],
        ["request", "req_1", "pending"],
        ["request", "req_2", "pending"],
      ]);
      // A live actor's reported state wins over the one derived from the log.
      model.actors.set("run_1", {
        id: "run_1",
        machine: "run",
        state: "active.waiting",
        status: "active",
        context: {},
      });
      expect(model.tree()[1]!.children[0]).toMatchObject({ machine: "run", state: "active.waiting" });
    },
  );

  it(
    "marks pending requests respondable or expired as the affordances say, " +
      "and lets the log win once a request is settled",
    () => {
      const model = new InspectorModel(null);
      model.append(log);
      expect(model.requests().map((r) => r.state)).toEqual(["pending", "pending"]);
      model.affordances.set("thr_1", {
        requests: [
          { requestId: "req_1", state: "respondable" },
          { requestId: "req_2", state: "expired" },
        ],
      });
      expect(model.requests().map((r) => r.state)).toEqual(["respondable", "expired"]);
      model.append([
        rec({
          type: "request.resolved",
          threadId: "thr_1",
          runId: "run_1",
          requestId: "req_1",
          by: "user",
          response: null,
        }),
      ]);
      expect(model.requests().map((r) => r.state)).toEqual(["resolved", "expired"]);
    },
  );
});
