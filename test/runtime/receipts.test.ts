import { describe, expect, it } from "vitest";
import { createScriptedAdapter } from "../../src/index.js";
import { hang } from "../support/policies.js";
import { nextEvent, ofType, openTestRuntime } from "../support/runtime.js";

/**
 * Command ids and receipts: a repeated command id returns its first receipt (in this life and
 * the next), and no id the runtime hands out, command or entity, is ever handed out twice, not
 * even by a fresh id source on a reopened data directory.
 */

describe("command ids and receipts", () => {
  it("a generated command id never equals a caller-supplied one already used (review s6)", async () => {
    const { rt, cleanup } = await openTestRuntime({ p: createScriptedAdapter() });
    try {
      const a = await rt.createThread({ providerTarget: "p", commandId: "cmd_1", title: "A" });
      expect(a.commandId).toBe("cmd_1");
      const b = await rt.createThread({ providerTarget: "p", title: "B" });
      expect(b.commandId).not.toBe("cmd_1");
      expect(b.threadId).not.toBe(a.threadId);
      expect(await rt.createThread({ providerTarget: "p", commandId: b.commandId, title: "B" })).toEqual(b);
      expect(await rt.createThread({ providerTarget: "p", commandId: "cmd_1", title: "A" })).toEqual(a);
      expect(rt.listThreads().map((t) => [t.threadId, t.title])).toEqual([
        [a.threadId, "A"],
        [b.threadId, "B"],
      ]);
    } finally {
      await cleanup();
    }
  });

  it(
    "every command returns a receipt whose id, repeated, " +
      "returns the same receipt (in this life and the next) (review s6)",
    async () => {
      const adapter = createScriptedAdapter({
        script: ({ text }) =>
          text === "ask"
            ? [
                { type: "command", command: "make", output: "ok", approval: true },
                { type: "text", text: "done" },
              ]
            : text === "wait"
              ? hang
              : [{ type: "text", text: `re: ${text}` }],
      });
      const first = await openTestRuntime({ p: adapter });
      const receipts: Array<{ repeat: () => Promise<unknown>; receipt: { commandId: string } }> = [];
      let firstLife: string[];
      try {
        const { rt } = first;
        const created = await rt.createThread({ providerTarget: "p" });
        receipts.push({
          receipt: created,
          repeat: () => rt.createThread({ providerTarget: "p", commandId: created.commandId }),
        });
        const { threadId } = created;

        const sent = await rt.sendMessage({ threadId, text: "ask" });
        receipts.push({
          receipt: sent,
          repeat: () => rt.sendMessage({ threadId, text: "ask", commandId: sent.commandId }),
        });
        const opened = await nextEvent(rt, "request.opened", (e) => e.runId === sent.runId);
        const responded = await rt.respond({
          requestId: opened.event.requestId,
          response: { kind: "decision", decision: "accept" },
        });
        expect(responded).toMatchObject({ requestId: opened.event.requestId, status: "accepted" });
        receipts.push({
          receipt: responded,
          repeat: () =>
            rt.respond({
              requestId: opened.event.requestId,
              response: { kind: "decision", decision: "accept" },
              commandId: responded.commandId,
            }),
        });
        expect((await rt.waitForRun(sent.runId)).status).toBe("completed");

        const waiting = await rt.sendMessage({ threadId, text: "wait" });
        receipts.push({
          receipt: waiting,
          repeat: () => rt.sendMessage({ threadId, text: "wait", commandId: waiting.commandId }),
        });
        await nextEvent(rt, "node.delta", (e) => e.runId === waiting.runId);
        const interrupted = await rt.interrupt({ runId: waiting.runId });
        expect(interrupted).toMatchObject({ runId: waiting.runId, via: "native" });
        receipts.push({
          receipt: interrupted,
          repeat: () => rt.interrupt({ runId: waiting.runId, commandId: interrupted.commandId }),
        });
        expect((await rt.waitForRun(waiting.runId)).status).toBe("interrupted");

        const forked = await rt.forkThread({ threadId });
        receipts.push({ receipt: forked, repeat: () => rt.forkThread({ threadId, commandId: forked.commandId }) });

        firstLife = receipts.map((r) => r.receipt.commandId);
        expect(new Set(firstLife).size).toBe(firstLife.length);
        for (const { receipt, repeat } of receipts) expect(await repeat()).toEqual(receipt);
        // Nothing ran twice.
        expect(rt.listThreads().map((t) => t.runs)).toEqual([2, 0]);
        expect(ofType(first.events, "command.receipt").map((e) => e.commandId)).toEqual(firstLife);
      } finally {
        await first.rt.close();
      }

      // Next life, a fresh deterministic id source: old ids still return their receipts, new ones are new.
      const second = await openTestRuntime({ p: createScriptedAdapter() }, { dataDir: first.dataDir });
      try {
        const { rt } = second;
        const [created] = receipts;
        expect(await rt.createThread({ providerTarget: "p", commandId: created!.receipt.commandId })).toEqual(
          created!.receipt,
        );
        const fresh = await rt.createThread({ providerTarget: "p" });
        expect(firstLife).not.toContain(fresh.commandId);
        expect(rt.listThreads()).toHaveLength(3);
      } finally {
        await second.cleanup();
      }
    },
  );
});

describe("ids across lives of a data directory", () => {
  it(
    "a fresh sequentialIds() never reissues " +
      "a thread, run, session or provider-thread id of the previous life (review)",
    async () => {
      const first = await openTestRuntime({ s: createScriptedAdapter() });
      const old = await first.rt.createThread({ providerTarget: "s" });
      const oldRun = await first.rt.sendMessage({ threadId: old.threadId, text: "one" });
      await first.rt.waitForRun(oldRun.runId);
      await first.rt.close();

      const second = await openTestRuntime({ s: createScriptedAdapter() }, { dataDir: first.dataDir });
      try {
        const fresh = await second.rt.createThread({ providerTarget: "s" });
        const freshRun = await second.rt.sendMessage({ threadId: fresh.threadId, text: "two" });
        await second.rt.waitForRun(freshRun.runId);
        expect(fresh.threadId).not.toBe(old.threadId);
        expect(freshRun.runId).not.toBe(oldRun.runId);
        expect(second.rt.listThreads().map((t) => [t.threadId, t.runs])).toEqual([
          [old.threadId, 1],
          [fresh.threadId, 1],
        ]);
        const allocated = (records: typeof first.events) =>
          records.flatMap((r) => {
            const e = r.event;
            if (e.type === "thread.created") return [e.threadId];
            if (e.type === "run.created") return [e.runId, e.userMessageId];
            if (e.type === "session.started") return [e.sessionId];
            if (e.type === "provider_thread.bound") return [e.providerThreadId];
            return [];
          });
        const ids = [...allocated(first.events), ...allocated(second.events)];
        expect(ids.length).toBeGreaterThanOrEqual(10);
        expect(new Set(ids).size).toBe(ids.length);
      } finally {
        await second.cleanup();
      }
    },
  );
});
