import { describe, expect, it } from "vitest";
import { createScriptedAdapter, keyedScript } from "../../src/index.js";
import { FEED_LIMITS, fitRecord, LogBatcher, type FeedCut } from "../../inspector/server/feedLimits.js";
import type { LogEntry, PageMessage } from "../../inspector/server/protocol.js";
import { openTestRuntime } from "../support/runtime.js";
import { pageClient, pageSocketUrl } from "./helpers.js";

/**
 * Issue 12, item 9: one record larger than the server's feed limit (64 MiB) made the server
 * drop the feed, which reconnected, resent the log from seq 1 and was dropped again, without
 * end. Reconnects are counted by events: the server tells its pages each time a runtime's feed
 * connects (`hello`, connected) and goes (`hello`, not connected).
 */

type Hello = Extract<PageMessage, { kind: "hello" }>;
type Log = Extract<PageMessage, { kind: "log" }>;
const isLog = (m: PageMessage): m is Log => m.kind === "log";
const isHello = (m: PageMessage): m is Hello => m.kind === "hello";

const OUTPUT_CHARS = 70 * 1024 * 1024; // one record of more than 64 MiB

/** Feed drops and (re)connections the page has been told of since it connected. */
const feedChanges = (messages: PageMessage[]) => {
  const hellos = messages.filter(isHello).slice(1); // the first greets the page itself
  return { drops: hellos.filter((h) => !h.connected).length, connects: hellos.filter((h) => h.connected).length };
};
const pageRecords = (messages: PageMessage[]): LogEntry[] => messages.filter(isLog).flatMap((m) => m.records);

async function openInspected(dataDir?: string) {
  let url = "";
  const script = keyedScript({
    "[big]": [{ type: "command", command: "cat huge.log", output: "o".repeat(OUTPUT_CHARS) }],
  });
  // Output not streamed: the whole of it is in one node.completed record.
  const adapter = createScriptedAdapter({ script, capabilities: { streaming: { streamsToolOutput: false } } });
  const opened = await openTestRuntime(
    { s: adapter },
    { inspect: { showText: true, onListening: (u) => (url = u) }, ...(dataDir ? { dataDir } : {}) },
  );
  // `events` holds every durable record of this life (the test's own subscription).
  return { ...opened, url };
}

describe("inspector feed: records over the server's limit", () => {
  it(
    "a 70 MiB record reaches the page cut, " + "with a marker of what was cut and how big; the feed is never dropped",
    async () => {
      const { rt, url, events, cleanup } = await openInspected();
      const page = await pageClient(pageSocketUrl(url));
      try {
        const { threadId } = await rt.createThread({ providerTarget: "s" });
        const run = await rt.waitForRun((await rt.sendMessage({ threadId, text: "[big] show me" })).runId);
        expect(run.status).toBe("completed");
        const bigSeq =
          events.find((r) => r.event.type === "node.completed" && r.event.output?.length === OUTPUT_CHARS)?.seq ?? 0;
        expect(bigSeq).toBeGreaterThan(0);
        // Either the record arrives, or the feed was dropped twice (the old loop): whichever comes first.
        await page.until(
          (m): m is PageMessage =>
            pageRecords([m]).some((r) => r.seq === bigSeq) || feedChanges(page.messages).drops >= 2,
        );
        const seen = feedChanges(page.messages);
        expect(seen.drops).toBe(0);
        const record = pageRecords(page.messages).find((r) => r.seq === bigSeq)!;
        const event = record.event as LogEntry["event"] & { output: string; feedCut: FeedCut };
        expect(event.feedCut).toEqual({
          recordBytes: expect.any(Number),
          limitBytes: FEED_LIMITS.recordBytes,
          fields: { output: { chars: OUTPUT_CHARS } },
        });
        expect(event.feedCut.recordBytes).toBeGreaterThan(FEED_LIMITS.messageBytes);
        expect(event.output).toBe(
          `${"o".repeat(FEED_LIMITS.keptChars)}… [cut by the inspector feed: ${OUTPUT_CHARS} chars in all]`,
        );
        expect(event).toMatchObject({ type: "node.completed", threadId, runId: run.runId, status: "completed" });

        // The feed stays up: the next run streams to the page on the same connection.
        const next = await rt.waitForRun((await rt.sendMessage({ threadId, text: "small talk" })).runId);
        await page.until(
          (m): m is Log =>
            isLog(m) && m.records.some((r) => r.event.type === "run.terminal" && r.event.runId === next.runId),
        );
        expect(feedChanges(page.messages)).toEqual(seen);
      } finally {
        page.close();
        await cleanup();
      }
    },
    120_000,
  );

  it(
    "reopening a directory that holds such a record: " + "the resend from seq 1 goes through once, the record cut",
    async () => {
      const first = await openInspected();
      const { threadId } = await first.rt.createThread({ providerTarget: "s" });
      await first.rt.waitForRun((await first.rt.sendMessage({ threadId, text: "[big] once" })).runId);
      const bigSeq = first.events.find(
        (r) => r.event.type === "node.completed" && r.event.output?.length === OUTPUT_CHARS,
      )!.seq;
      const head = first.rt.views.head;
      await first.rt.close();
      const { rt, url, cleanup } = await openInspected(first.dataDir);
      const page = await pageClient(pageSocketUrl(url));
      try {
        const last = rt.views.head; // what the reopen itself recorded is in the resend too
        expect(last).toBeGreaterThanOrEqual(head);
        await page.until(
          (_m): _m is PageMessage =>
            pageRecords(page.messages).some((r) => r.seq === last) || feedChanges(page.messages).drops >= 2,
        );
        expect(feedChanges(page.messages).drops).toBe(0);
        const seqs = pageRecords(page.messages).map((r) => r.seq);
        // each record once, in order: no second resend
        expect(seqs).toEqual(Array.from({ length: last }, (_, i) => i + 1));
        const big = pageRecords(page.messages).find((r) => r.seq === bigSeq)!.event as LogEntry["event"] & {
          feedCut: FeedCut;
        };
        expect(big.feedCut.fields).toEqual({ output: { chars: OUTPUT_CHARS } });
      } finally {
        page.close();
        await cleanup();
      }
    },
    120_000,
  );
});

describe("fitRecord and LogBatcher", () => {
  const entry = (event: LogEntry["event"]): LogEntry => ({ seq: 7, at: "2026-01-01T00:00:00.000Z", event });

  it("leaves a record within the limit as it is", () => {
    const record = entry({ type: "node.delta", threadId: "t", runId: "r", delta: "hello" });
    expect(fitRecord(record, 1024)).toBe(JSON.stringify(record));
  });

  it("cuts long strings, nested ones too, and says which and how long they were", () => {
    const record = entry({
      type: "request.opened",
      threadId: "t",
      runId: "r",
      payload: { questions: [{ text: "q".repeat(5000) }] },
      reason: "é".repeat(3000),
    });
    const fitted = JSON.parse(fitRecord(record, 8192, 100)) as LogEntry;
    expect(fitted.seq).toBe(7);
    expect(fitted.event.feedCut).toEqual({
      recordBytes: Buffer.byteLength(JSON.stringify(record)),
      limitBytes: 8192,
      fields: { "payload.questions.0.text": { chars: 5000 }, reason: { chars: 3000 } },
    });
    expect((fitted.event.payload as { questions: Array<{ text: string }> }).questions[0]!.text).toBe(
      `${"q".repeat(100)}… [cut by the inspector feed: 5000 chars in all]`,
    );
  });

  it("drops whole values, largest first, when cut strings are not enough; type and ids stay", () => {
    const record = entry({
      type: "todo.updated",
      threadId: "t",
      runId: "r",
      items: Array.from({ length: 5000 }, (_, i) => ({ text: `item ${i}` })),
      note: "small",
    });
    const json = fitRecord(record, 4096, 100);
    expect(Buffer.byteLength(json)).toBeLessThanOrEqual(4096);
    const fitted = JSON.parse(json) as LogEntry;
    expect(fitted.event).toMatchObject({
      type: "todo.updated",
      threadId: "t",
      runId: "r",
      note: "small",
      items: expect.stringMatching(/^‹cut by the inspector feed: \d+ bytes›$/),
    });
    expect((fitted.event.feedCut as FeedCut).fields.items).toEqual({
      bytes: Buffer.byteLength(JSON.stringify(record.event.items)),
    });
  });

  it("batches records into log messages within the byte budget and the record count", () => {
    const batcher = new LogBatcher(1000, 3);
    const record = (n: number) => JSON.stringify(entry({ type: "x", text: "a".repeat(n) }));
    const sent: string[] = [];
    for (const n of [300, 300, 300, 300, 10, 10, 10, 10]) {
      const full = batcher.add(record(n));
      if (full) sent.push(full);
    }
    sent.push(batcher.take()!);
    expect(batcher.take()).toBeNull();
    const sizes = sent.map((m) => (JSON.parse(m) as { kind: string; records: LogEntry[] }).records.length);
    expect(sizes).toEqual([2, 3, 3]); // 2: the third 300 would pass 1000 bytes; 3: the count
    for (const m of sent) expect(JSON.parse(m)).toMatchObject({ kind: "log" });
    expect(sizes.reduce((a, b) => a + b)).toBe(8);
  });
});
