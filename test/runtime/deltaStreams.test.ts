import { describe, expect, it } from "vitest";
import type { DomainEventOf } from "../../src/index.js";
import { ControlledProvider } from "../chaos/controlledProvider.js";
import { capabilitiesOf, STRONG_CHOICE } from "../chaos/generators.js";
import { tempDir } from "../support/files.js";
import { openRuntime } from "../support/internals.js";
import { nextEvent } from "../support/runtime.js";

/**
 * The log joins the deltas of one node that share a commit group only when they are of one stream: a node's text and
 * its output, streamed back to back, stay two records with their own stream, and its item keeps them apart.
 */

describe("deltas of one node on two streams", () => {
  it("stay two records, each with its stream; the item's text and output stay apart", async () => {
    const { dir, cleanup } = await tempDir("tiller-delta-streams-");
    const caps = capabilitiesOf(STRONG_CHOICE);
    const provider = new ControlledProvider(caps, { threadRef: "pthread-1", turnRef: (n) => `turn-${n}` }, true);
    // A group window longer than the test: the deltas are queued in one commit group, whatever the machine's pace.
    const rt = await openRuntime({
      dataDir: dir,
      providers: { c: provider },
      groupCommitMs: 1_000,
      sessionIdleMs: null,
      turnSilenceMs: null,
    });
    try {
      const { threadId } = await rt.createThread({ providerTarget: "c" });
      const { runId } = await rt.sendMessage({ threadId, text: "run it" });
      await nextEvent(rt, "run.state", (e) => e.runId === runId && e.status === "running");
      const sessionId = provider.sessions[0]!;
      const frame = (event: Record<string, unknown>) => ({
        sessionId,
        event: { threadRef: "pthread-1", turnRef: "turn-1", ...event },
      });
      const item = { itemRef: "item-1", kind: "command_execution" };
      // Delivered together: the runtime takes them one after the other, with nothing between.
      await Promise.all([
        provider.deliver(frame({ type: "turn.started" })),
        provider.deliver(frame({ type: "item.started", ...item })),
        provider.deliver(frame({ type: "item.delta", ...item, stream: "text", delta: "said " })),
        provider.deliver(frame({ type: "item.delta", ...item, stream: "output", delta: "ran" })),
        provider.deliver(frame({ type: "item.delta", ...item, stream: "output", delta: " twice" })),
      ]);
      const deltas: Array<DomainEventOf<"node.delta">> = [];
      await new Promise<void>((resolve) => {
        const stop = rt.subscribe({ afterSeq: 0 }, ({ event }) => {
          if (event.type === "node.delta" && event.runId === runId) deltas.push(event);
          if (deltas.map((d) => d.delta).join("").length === "said ran twice".length) {
            stop();
            resolve();
          }
        });
      });
      expect(deltas.map(({ stream, delta }) => ({ stream, delta }))).toEqual([
        { stream: "text", delta: "said " },
        { stream: "output", delta: "ran twice" }, // the same stream joins
      ]);
      const items = (await rt.readThread(threadId)).runs.at(-1)!.items.filter((i) => i.kind === "command");
      expect(items.map(({ status, text, output }) => ({ status, text, output }))).toEqual([
        { status: "streaming", text: "said ", output: "ran twice" },
      ]);
    } finally {
      await rt.close();
      await cleanup();
    }
  });
});
