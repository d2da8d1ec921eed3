import { open } from "node:fs/promises";
import { afterEach, describe, expect, it, vi } from "vitest";
import { createScriptedAdapter, keyedScript } from "../../src/index.js";
import { openTestRuntime } from "../support/runtime.js";
import { tallyChaos } from "./tally.js";

/**
 * A command's work and its receipt reach the disk in one write + fdatasync: a crash between two
 * group commits can never keep the work (a cancelled run, a new thread) without the receipt, or a
 * retry with the same command id would run again or answer `conflict`. Observed at the file
 * boundary: every batch the log writes, by seq.
 */
let restore: (() => void) | undefined;
afterEach(() => restore?.());

async function recordBatches(): Promise<number[][]> {
  const probe = await open(import.meta.filename, "r");
  const proto = Object.getPrototypeOf(probe) as { write: (...args: unknown[]) => Promise<unknown> };
  await probe.close();
  const batches: number[][] = [];
  const write = proto.write;
  const spy = vi.spyOn(proto, "write").mockImplementation(function (this: unknown, ...args: unknown[]) {
    const data = args[0];
    // The event log's batches only: its lines open with their seq (the projection snapshot's body names seqs too).
    if (Buffer.isBuffer(data) && data.subarray(0, 7).toString("latin1") === '{"seq":') {
      batches.push(
        data
          .toString("utf8")
          .trim()
          .split("\n")
          .map((line) => (JSON.parse(line) as { seq: number }).seq),
      );
    }
    return write.apply(this, args);
  });
  restore = () => spy.mockRestore();
  return batches;
}

describe("chaos: a command's receipt shares its work's group commit", () => {
  it(
    "for every command whose work is one step: " +
      "createThread, forkThread, sendMessage (queue), interrupt (queued), respond",
    async () => {
      const batches = await recordBatches();
      const script = keyedScript({
        "[hang]": [{ type: "hang" }],
        "[ask]": [{ type: "command", command: "ls", output: "", approval: true }],
      });
      // Nothing else fails meanwhile (the recording must not break a write it does not look at).
      const failures: unknown[] = [];
      const { rt, cleanup } = await openTestRuntime(
        { s: createScriptedAdapter({ script }) },
        { onFailure: (failure) => failures.push(failure) },
      );
      try {
        const checked: string[] = [];
        const sameBatch = async (name: string, command: () => Promise<{ commandId: string }>) => {
          const before = rt.views.head;
          const receipt = await command();
          const receiptSeq = rt.views.head; // the receipt is the command's last event
          const batch = batches.find((b) => b.includes(receiptSeq));
          const work = Array.from({ length: receiptSeq - before - 1 }, (_, i) => before + 1 + i);
          expect(batch, name).toBeDefined();
          expect(
            work.filter((seq) => !batch!.includes(seq)),
            `${name}: work committed apart from its receipt ${receipt.commandId}`,
          ).toEqual([]);
          checked.push(name);
        };
        let threadId = "";
        await sameBatch("createThread", async () => {
          const r = await rt.createThread({ providerTarget: "s", commandId: "c1" });
          threadId = r.threadId;
          return r;
        });
        const { runId: hung } = await rt.sendMessage({ threadId, text: "[hang] first" });
        let queued = "";
        await sameBatch("sendMessage queue", async () => {
          const r = await rt.sendMessage({ threadId, text: "second", mode: "queue", commandId: "c2" });
          queued = r.runId;
          return r;
        });
        await sameBatch("interrupt of a queued run", () => rt.interrupt({ runId: queued, commandId: "c3" }));
        await rt.interrupt({ runId: hung });
        await rt.waitForRun(hung);
        await sameBatch("forkThread", () => rt.forkThread({ threadId, commandId: "c4" }));
        const { runId: asking } = await rt.sendMessage({ threadId, text: "[ask]" });
        const request = await new Promise<string>((done) => {
          const stop = rt.subscribe(
            { afterSeq: 0 },
            (r) => r.event.type === "request.opened" && (stop(), done(r.event.requestId)),
          );
        });
        await sameBatch("respond", () =>
          rt.respond({ requestId: request, response: { kind: "decision", decision: "decline" }, commandId: "c5" }),
        );
        await rt.waitForRun(asking);
        tallyChaos("receipt batches", { properties: 1, runs: checked.length });
      } finally {
        await cleanup();
      }
      expect(failures).toEqual([]); // close() writes the projection snapshot too
    },
  );
});
