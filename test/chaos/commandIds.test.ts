import { describe, expect, it } from "vitest";
import { createRuntime, createScriptedAdapter, keyedScript, type TillerRuntime } from "../../src/index.js";
import { ofType, openTestRuntime, recordCalls, until } from "../support/runtime.js";
import { tallyChaos } from "./tally.js";

/**
 * Exactly once: two callers with one command id at the same time (inside one `Promise.all`)
 * get one receipt, the provider is asked once, the log holds one receipt, and after a reopen
 * the id still answers that receipt.
 */
const script = keyedScript({
  "[ask]": [
    { type: "command", command: "ls", output: "ok", approval: true },
    { type: "text", text: "done" },
  ],
  "[hang]": [{ type: "text", text: "working" }, { type: "hang" }],
  "[gate]": [
    { type: "text", text: "step" },
    { type: "gate", name: "g" },
    { type: "text", text: "after" },
  ],
});

type Kind = "createThread" | "sendMessage" | "interrupt" | "respond" | "forkThread" | "rollback";

async function twice<T>(call: () => Promise<T>): Promise<[T, T]> {
  return Promise.all([call(), call()]);
}

function receiptsFor(events: Array<{ event: { type: string; commandId?: string } }>, commandId: string) {
  return events.filter((r) => r.event.type === "command.receipt" && r.event.commandId === commandId);
}

describe("chaos: one command id, two callers at once", () => {
  it(
    "runs every command kind once and answers both callers " + "with the first receipt, before and after a reopen",
    async () => {
      const { adapter, calls } = recordCalls(createScriptedAdapter({ script }));
      const { rt, dataDir, cleanup } = await openTestRuntime({ scripted: adapter }, { checkpoints: false });
      let reopened: TillerRuntime | undefined;
      const checked: Kind[] = [];
      try {
        const [a, b] = await twice(() => rt.createThread({ providerTarget: "scripted", commandId: "c-create" }));
        expect(b).toEqual(a);
        expect(rt.listThreads()).toHaveLength(1);
        checked.push("createThread");
        const { threadId } = a;

        // sendMessage in every mode: one run, one provider call, one disposition.
        const [s1, s2] = await twice(() => rt.sendMessage({ threadId, text: "[gate] one", commandId: "c-send" }));
        expect(s2).toEqual(s1);
        expect(s1.disposition).toBe("started");
        await until(
          "the run to stream",
          () => rt.views.runs.get(s1.runId)?.items.some((i) => i.kind === "assistant_message") === true,
        );
        for (const mode of ["queue", "steer", "auto", "restart"] as const) {
          const before = calls.filter((c) => c.method === "sendRun" || c.method === "steerRun").length;
          const [m1, m2] = await twice(() =>
            rt.sendMessage({ threadId, text: `[gate] ${mode}`, mode, commandId: `c-send-${mode}` }),
          );
          expect(m2, mode).toEqual(m1);
          const runs = rt.views.threads.get(threadId)!.runs;
          expect(runs.filter((r) => r.text === `[gate] ${mode}`).length, mode).toBeLessThanOrEqual(1);
          const after = calls.filter((c) => c.method === "sendRun" || c.method === "steerRun").length;
          expect(after - before, `${mode}: provider calls`).toBeLessThanOrEqual(1);
        }
        checked.push("sendMessage");
        const active = rt.views.threads
          .get(threadId)!
          .runs.find((r) => !["completed", "interrupted", "failed", "cancelled", "rolled_back"].includes(r.status))!;
        const [i1, i2] = await twice(() => rt.interrupt({ runId: active.runId, commandId: "c-interrupt" }));
        expect(i2).toEqual(i1);
        expect(calls.filter((c) => c.method === "interrupt")).toHaveLength(1);
        checked.push("interrupt");
        for (const run of rt.views.threads.get(threadId)!.runs) {
          if (!["completed", "interrupted", "failed", "cancelled", "rolled_back"].includes(run.status)) {
            await rt.interrupt({ runId: run.runId }).catch(() => undefined);
          }
        }
        await Promise.all(rt.views.threads.get(threadId)!.runs.map((r) => rt.waitForRun(r.runId)));

        // respond: the provider gets one answer.
        const { runId: askRun } = await rt.sendMessage({ threadId, text: "[ask] go" });
        await until("the approval", () => rt.views.runs.get(askRun)?.status === "waiting");
        const requestId = [...rt.views.requests.values()].find((r) => r.runId === askRun)!.requestId;
        const [r1, r2] = await twice(() =>
          rt.respond({ requestId, response: { kind: "decision", decision: "accept" }, commandId: "c-respond" }),
        );
        expect(r2).toEqual(r1);
        expect(calls.filter((c) => c.method === "respondToRequest")).toHaveLength(1);
        await rt.waitForRun(askRun);
        checked.push("respond");

        const [f1, f2] = await twice(() => rt.forkThread({ threadId, commandId: "c-fork" }));
        expect(f2).toEqual(f1);
        expect(rt.listThreads()).toHaveLength(2);
        checked.push("forkThread");

        const firstRun = rt.views.threads.get(threadId)!.runs[0]!.runId;
        const [b1, b2] = await twice(() => rt.rollback({ threadId, toRunId: firstRun, commandId: "c-rollback" }));
        expect(b2).toEqual(b1);
        checked.push("rollback");

        const log = [] as Array<{ event: { type: string; commandId?: string } }>;
        const stop = rt.subscribe({ afterSeq: 0 }, (r) => log.push(r as never));
        await until("the log", () => log.length >= rt.views.head);
        stop();
        const ids = [
          "c-create",
          "c-send",
          "c-send-queue",
          "c-send-steer",
          "c-send-auto",
          "c-send-restart",
          "c-interrupt",
          "c-respond",
          "c-fork",
          "c-rollback",
        ];
        for (const id of ids) expect(receiptsFor(log, id), id).toHaveLength(1);
        expect(ofType(log as never, "thread.created")).toHaveLength(2);

        const before = { a, s1, i1, r1, f1, b1 };
        await rt.close();
        reopened = await createRuntime({ dataDir, providers: { scripted: createScriptedAdapter({ script }) } });
        // After a reopen, the ids answer the first (and only) receipts; nothing runs again.
        expect(await reopened.createThread({ providerTarget: "scripted", commandId: "c-create" })).toEqual(before.a);
        expect(await reopened.sendMessage({ threadId, text: "[gate] one", commandId: "c-send" })).toEqual(before.s1);
        expect(await reopened.interrupt({ runId: active.runId, commandId: "c-interrupt" })).toEqual(before.i1);
        expect(await reopened.forkThread({ threadId, commandId: "c-fork" })).toEqual(before.f1);
        expect(reopened.listThreads()).toHaveLength(2);
        tallyChaos("command ids", { properties: checked.length, runs: ids.length * 2 });
      } finally {
        await reopened?.close();
        await cleanup();
      }
    },
  );

  it("a second caller of a command that fails gets the same typed error, and the id stays free", async () => {
    const { rt, cleanup } = await openTestRuntime({ scripted: createScriptedAdapter({ script }) });
    try {
      const results = await Promise.allSettled([
        rt.createThread({ providerTarget: "scripted", cwd: "/definitely/not/here", commandId: "c-bad" }),
        rt.createThread({ providerTarget: "scripted", cwd: "/definitely/not/here", commandId: "c-bad" }),
      ]);
      for (const r of results)
        expect(r).toMatchObject({ status: "rejected", reason: { code: "invalid_input", details: { field: "cwd" } } });
      expect(rt.listThreads()).toHaveLength(0);
      const ok = await rt.createThread({ providerTarget: "scripted", commandId: "c-bad" });
      expect(rt.listThreads().map((t) => t.threadId)).toEqual([ok.threadId]);
      tallyChaos("command ids (failure)", { properties: 1, runs: 2 });
    } finally {
      await cleanup();
    }
  });

  it("implementPlan: two callers with one id get one receipt and one run", async () => {
    const planScript = keyedScript({
      "[plan]": [
        { type: "proposed_plan", text: "build, then test" },
        { type: "text", text: "planned" },
      ],
    });
    const { rt, events, cleanup } = await openTestRuntime({ scripted: createScriptedAdapter({ script: planScript }) });
    try {
      const { threadId } = await rt.createThread({ providerTarget: "scripted" });
      const run = await rt.waitForRun((await rt.sendMessage({ threadId, text: "[plan] go" })).runId);
      const nodeId = run.items.find((i) => i.kind === "proposed_plan")!.id;
      const [a, b] = await twice(() => rt.implementPlan({ threadId, nodeId, commandId: "c-implement" }));
      expect(b).toEqual(a);
      expect((await rt.readThread(threadId)).runs).toHaveLength(2);
      expect(receiptsFor(events, "c-implement")).toHaveLength(1);
      await rt.waitForRun(a.runId);
    } finally {
      await cleanup();
    }
  });
});
