import { mkdtemp, readFile, rm, writeFile, appendFile, open } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterEach, beforeEach, describe, expect, it, vi } from "vitest";
import { ClosedError, StoreCorruptError } from "../../src/domain/errors.js";
import { EventLog, MAX_JOINED_PIECES } from "../../src/runtime/store/eventLog.js";
import { INDEX_STRIDE } from "../../src/runtime/store/jsonl.js";
import type { LogRecord } from "../../src/runtime/store/eventLog.js";

type Ev = { type: string; n?: number };

let dir: string;
let file: string;
const opened: EventLog<Ev>[] = [];

beforeEach(async () => {
  dir = await mkdtemp(join(tmpdir(), "tiller-eventlog-"));
  file = join(dir, "nested", "events.jsonl");
});

afterEach(async () => {
  await Promise.allSettled(opened.splice(0).map((log) => log.close()));
  await rm(dir, { recursive: true, force: true });
});

async function openLog(options: Parameters<typeof EventLog.open<Ev>>[1] = {}): Promise<EventLog<Ev>> {
  const log = await EventLog.open<Ev>(file, options);
  opened.push(log);
  return log;
}

/** A group window no test lives to see end: only an urgent append or close() commits. */
const WINDOW_BEYOND_TEST_TIMEOUT = 120_000;

/** Waits for a condition by yielding to the event loop; no wall-clock assumptions. */
async function until(condition: () => boolean): Promise<void> {
  while (!condition()) await new Promise((resolve) => setImmediate(resolve));
}

async function collect(log: EventLog<Ev>, afterSeq = 0): Promise<LogRecord<Ev>[]> {
  const out: LogRecord<Ev>[] = [];
  for await (const record of log.readAll(afterSeq)) out.push(record);
  return out;
}

function line(seq: number): string {
  return JSON.stringify({ seq, at: new Date(0).toISOString(), event: { type: "x" } }) + "\n";
}

describe("EventLog", () => {
  it("assigns gap-free seqs that continue across reopen", async () => {
    const log = await openLog({ now: () => new Date("2024-01-01T00:00:00Z") });
    expect(log.head).toBe(0);
    const first = log.append({ type: "a" });
    expect(first).toEqual({ seq: 1, at: "2024-01-01T00:00:00.000Z", event: { type: "a" } });
    for (let i = 2; i <= 5; i++) expect(log.append({ type: "a", n: i }).seq).toBe(i);
    await log.close();

    const again = await openLog();
    expect(again.recovery).toEqual({ records: 5, truncatedBytes: 0, cut: null });
    expect(again.head).toBe(5);
    expect(again.durableHead).toBe(5);
    expect(again.append({ type: "b" }).seq).toBe(6);
    await again.whenDurable();
    expect((await collect(again)).map((r) => r.seq)).toEqual([1, 2, 3, 4, 5, 6]);
    const lines = (await readFile(file, "utf8")).split("\n");
    expect(lines.at(-1)).toBe("");
    expect(JSON.parse(lines[5]!)).toMatchObject({ seq: 6, event: { type: "b" } });
  });

  it("groups synchronous appends into few write+fsync batches", async () => {
    const log = await openLog();
    const batches: number[][] = [];
    log.onCommit((records) => batches.push(records.map((r) => r.seq)));
    for (let i = 0; i < 200; i++) log.append({ type: "a" });
    await log.whenDurable();
    expect(batches.length).toBeGreaterThan(0);
    expect(batches.length).toBeLessThan(200);
    expect(batches.flat()).toEqual(Array.from({ length: 200 }, (_, i) => i + 1));
  });

  describe("coalescing", () => {
    type Piece = Ev & { stream?: string; text?: string };
    const coalesce = {
      joins: (last: Piece, next: Piece) =>
        last.type === "piece" && next.type === "piece" && last.stream === next.stream,
      merge: (pieces: readonly Piece[]): Piece => ({ ...pieces[0]!, text: pieces.map((p) => p.text).join("") }),
    };
    const read = async () =>
      (await readFile(file, "utf8"))
        .trim()
        .split("\n")
        .map((l) => JSON.parse(l));

    it("joins consecutive pieces of one stream queued in one group into one record, in order", async () => {
      const log = (await openLog({ groupWindowMs: WINDOW_BEYOND_TEST_TIMEOUT, coalesce })) as EventLog<Piece>;
      const seen: LogRecord<Piece>[] = [];
      log.subscribe(0, (r) => seen.push(r));
      const seqs = [
        log.append({ type: "piece", stream: "a", text: "he" }),
        log.append({ type: "piece", stream: "a", text: "ll" }),
        log.append({ type: "piece", stream: "a", text: "o" }),
        log.append({ type: "piece", stream: "b", text: "x" }), // another stream: a record of its own
        log.append({ type: "other" }),
        log.append({ type: "piece", stream: "b", text: "y" }), // something came between: apart again
        log.append({ type: "piece", stream: "b", text: "z" }),
      ].map((r) => r.seq);
      expect(seqs).toEqual([1, 1, 1, 2, 3, 4, 4]);
      await log.close();
      const written = [
        { seq: 1, event: { type: "piece", stream: "a", text: "hello" } },
        { seq: 2, event: { type: "piece", stream: "b", text: "x" } },
        { seq: 3, event: { type: "other" } },
        { seq: 4, event: { type: "piece", stream: "b", text: "yz" } },
      ];
      expect((await read()).map(({ seq, event }) => ({ seq, event }))).toEqual(written);
      expect(seen.map(({ seq, event }) => ({ seq, event }))).toEqual(written);
    });

    it("never joins a record already being written: pieces after it start the next one", async () => {
      const log = (await openLog({ coalesce, isUrgent: (e) => e.type === "flush" })) as EventLog<Piece>;
      log.append({ type: "piece", stream: "a", text: "1" });
      log.append({ type: "flush" }); // the batch is taken at the next turn of the event loop
      await log.whenDurable(2);
      const next = log.append({ type: "piece", stream: "a", text: "2" });
      expect(next.seq).toBe(3);
      await log.close();
      expect((await read()).map((r) => r.event.text ?? null)).toEqual(["1", null, "2"]);
    });

    it("bounds the pieces of one record", async () => {
      const log = (await openLog({ groupWindowMs: WINDOW_BEYOND_TEST_TIMEOUT, coalesce })) as EventLog<Piece>;
      for (let i = 0; i < MAX_JOINED_PIECES + 1; i++) log.append({ type: "piece", stream: "a", text: "." });
      await log.close();
      expect((await read()).map((r) => r.event.text.length)).toEqual([MAX_JOINED_PIECES, 1]);
    });

    it("hands every reader the same deeply frozen record, never a copy parsed back", async () => {
      const log = await openLog({ isUrgent: () => true });
      const got: LogRecord<Ev>[][] = [[], []];
      log.subscribe(0, (r) => got[0]!.push(r));
      log.subscribe(0, (r) => got[1]!.push(r));
      log.append({ type: "nested", n: 1, deep: { list: [1, 2] } } as Ev);
      await until(() => got[1]!.length === 1);
      const [record] = got[0]!;
      expect(got[1]![0]).toBe(record);
      expect(Object.isFrozen(record) && Object.isFrozen(record!.event)).toBe(true);
      expect(() => ((record!.event as unknown as { deep: { list: number[] } }).deep.list[0] = 9)).toThrow(TypeError);
    });
  });

  it("catches a late subscriber up from the index when lines hold multi-byte text, ASCII batches between", async () => {
    const log = await openLog();
    const texts = ["plain", "café", "🚀 launch", "日本語", "ascii again"];
    const total = INDEX_STRIDE * 3 + 17;
    for (let i = 0; i < total; i++) {
      log.append({ type: "a", n: i, ...(i % 700 < 350 ? {} : { text: texts[i % texts.length] }) } as Ev);
      if (i % 500 === 0) await log.whenDurable(); // batches of their own: some all ASCII, some not
    }
    await log.whenDurable();
    const from = INDEX_STRIDE * 2 + 5;
    const caught = await collect(log, from);
    expect(caught.map((r) => r.seq)).toEqual(Array.from({ length: total - from }, (_, i) => from + 1 + i));
    expect(caught.every((r) => r.event.n === r.seq - 1)).toBe(true);
  });

  it("commits an urgent event without waiting for the group window", async () => {
    const log = await openLog({ groupWindowMs: WINDOW_BEYOND_TEST_TIMEOUT, isUrgent: (e) => e.type === "terminal" });
    log.append({ type: "a" });
    const terminal = log.append({ type: "terminal" });
    await log.whenDurable(terminal.seq); // the test would time out if it waited for the window
    expect(log.durableHead).toBe(2);

    // close() commits whatever is still waiting for the window.
    log.append({ type: "b" });
    expect(log.durableHead).toBe(2);
    await log.close();
    const again = await openLog();
    expect(again.recovery.records).toBe(3);
  });

  it("counts the group window from the last commit: a record after a longer quiet spell commits at once", async () => {
    // The clock the window reads and its timer are fake; the disk and the loop's turns are real.
    vi.useFakeTimers({ toFake: ["setTimeout", "clearTimeout", "performance"] });
    try {
      const log = await openLog({ groupWindowMs: 50 });
      const first = log.append({ type: "a" });
      expect(vi.getTimerCount()).toBe(1); // the log just opened: the window runs from there
      vi.advanceTimersByTime(50);
      await log.whenDurable(first.seq);

      vi.advanceTimersByTime(20);
      const second = log.append({ type: "b" }); // 20 ms after the last commit: waits out the other 30
      expect(vi.getTimerCount()).toBe(1);
      vi.advanceTimersByTime(29);
      expect(vi.getTimerCount()).toBe(1);
      vi.advanceTimersByTime(1);
      await log.whenDurable(second.seq);

      vi.advanceTimersByTime(51);
      const third = log.append({ type: "c" }); // quiet for longer than the window: no timer
      expect(vi.getTimerCount()).toBe(0);
      await log.whenDurable(third.seq); // with the fake clock standing still, only a commit started now ends this
      expect(log.durableHead).toBe(3);
    } finally {
      vi.useRealTimers();
    }
  });

  it("delivers only durable records to subscribers and onCommit listeners", async () => {
    const log = await openLog({ groupWindowMs: WINDOW_BEYOND_TEST_TIMEOUT, isUrgent: (e) => e.type === "terminal" });
    const seen: number[] = [];
    const violations: number[] = [];
    log.subscribe(0, (record) => {
      if (record.seq > log.durableHead) violations.push(record.seq);
      seen.push(record.seq);
    });
    log.onCommit((records) => {
      for (const r of records) if (r.seq > log.durableHead) violations.push(r.seq);
    });
    log.append({ type: "a" });
    log.append({ type: "a" });
    // The window outlasts the test: nothing can be durable yet, however long this takes.
    for (let i = 0; i < 20; i++) await new Promise((resolve) => setImmediate(resolve));
    expect(seen).toEqual([]); // queued, not durable: nothing visible yet
    log.append({ type: "terminal" });
    await until(() => seen.length === 3);
    expect(seen).toEqual([1, 2, 3]);
    expect(violations).toEqual([]);
  });

  it("subscribe(afterSeq) catches up from the file and switches to live with no gap or duplicate", async () => {
    const log = await openLog();
    for (let i = 0; i < 3000; i++) log.append({ type: "seed", n: i }); // spans several index slots
    await log.whenDurable();

    const streams = new Map<number, number[]>();
    const unsubscribes: (() => void)[] = [];
    const subscribeAt = (afterSeq: number) => {
      const seqs: number[] = [];
      streams.set(afterSeq, seqs);
      unsubscribes.push(log.subscribe(afterSeq, (r) => seqs.push(r.seq)));
    };

    subscribeAt(0);
    for (let round = 0; round < 30; round++) {
      for (let i = 0; i < 25; i++) log.append({ type: "live" });
      if (round === 3) subscribeAt(100);
      if (round === 7) subscribeAt(1500);
      if (round === 8) subscribeAt(1024); // exactly on an index slot boundary
      if (round === 12) subscribeAt(log.durableHead);
      if (round === 20) subscribeAt(log.head); // not yet durable when subscribing
      await new Promise((resolve) => setImmediate(resolve));
    }
    await log.whenDurable();
    const head = log.head;
    expect(head).toBe(3750);
    await until(() => [...streams.values()].every((seqs) => seqs.at(-1) === head));
    for (const [afterSeq, seqs] of streams) {
      expect(seqs).toEqual(Array.from({ length: head - afterSeq }, (_, i) => afterSeq + 1 + i));
    }
    unsubscribes.forEach((unsubscribe) => unsubscribe());
  });

  it("applies a subscriber filter and survives throwing listeners", async () => {
    const errors: unknown[] = [];
    const log = await openLog({ onListenerError: (error) => errors.push(error) });
    const kept: number[] = [];
    log.subscribe(
      0,
      (r) => kept.push(r.seq),
      (r) => r.event.type === "keep",
    );
    log.subscribe(0, () => {
      throw new Error("subscriber boom");
    });
    log.onCommit(() => {
      throw new Error("commit boom");
    });
    log.append({ type: "keep" });
    log.append({ type: "skip" });
    log.append({ type: "keep" });
    await log.whenDurable();
    await until(() => errors.length >= 4);
    log.append({ type: "keep" });
    await log.whenDurable();
    await until(() => kept.length === 3);
    expect(kept).toEqual([1, 3, 4]);
    expect(errors.some((e) => (e as Error).message === "commit boom")).toBe(true);
  });

  it("reads all durable records in order after reopen, streaming", async () => {
    const log = await openLog();
    for (let i = 0; i < 2100; i++) log.append({ type: "a", n: i });
    await log.close();
    const again = await openLog();
    const all = await collect(again);
    expect(all).toHaveLength(2100);
    expect(all.every((r, i) => r.seq === i + 1 && r.event.n === i)).toBe(true);
    expect((await collect(again, 2050)).map((r) => r.seq)[0]).toBe(2051);
    expect((await collect(again, 2048)).map((r) => r.seq)).toEqual([
      2049,
      2050,
      ...Array.from({ length: 50 }, (_, i) => 2051 + i),
    ]);
    expect(await collect(again, 2100)).toEqual([]);
  });

  it("truncates a torn tail on open and continues at the right seq", async () => {
    const log = await openLog();
    for (let i = 0; i < 3; i++) log.append({ type: "a" });
    await log.close();
    const torn = '{"seq":4,"at":"2024-01-01T00:00:00.000Z","event":{"ty';
    await appendFile(file, torn);

    const again = await openLog();
    expect(again.recovery).toMatchObject({
      records: 3,
      truncatedBytes: Buffer.byteLength(torn),
      cut: { line: 4, complete: false },
    });
    expect(again.append({ type: "b" }).seq).toBe(4);
    await again.close();

    const third = await openLog();
    expect(third.recovery).toEqual({ records: 4, truncatedBytes: 0, cut: null });
    expect((await collect(third)).map((r) => r.event.type)).toEqual(["a", "a", "a", "b"]);
  });

  it("truncates a newline-terminated but invalid last line, and a complete record missing its newline", async () => {
    file = join(dir, "events.jsonl");
    await writeFile(file, line(1) + line(2) + '{"seq":3}\n');
    const log = await openLog();
    expect(log.recovery).toEqual({
      records: 2,
      truncatedBytes: '{"seq":3}\n'.length,
      cut: {
        line: 3,
        bytes: '{"seq":3}\n'.length,
        complete: true,
        reason: expect.stringMatching(/^invalid record at/),
      },
    });
    await log.close();

    await appendFile(file, line(3).trimEnd());
    const again = await openLog();
    expect(again.recovery.records).toBe(2);
    expect(again.recovery.truncatedBytes).toBe(line(3).length - 1);
    expect(again.recovery.cut).toEqual({
      line: 3,
      bytes: line(3).length - 1,
      complete: false,
      reason: "no trailing newline",
    });
  });

  it("refuses a corrupt line that is not at the tail", async () => {
    file = join(dir, "events.jsonl");
    await writeFile(file, line(1) + "not json\n" + line(3));
    const error = await EventLog.open<Ev>(file).catch((e: unknown) => e);
    expect(error).toBeInstanceOf(StoreCorruptError);
    expect(error).toMatchObject({ code: "store_corrupt", details: { line: 2 } });
    expect((error as Error).message).toContain("line 2");
    // Nothing was cut.
    expect(await readFile(file, "utf8")).toBe(line(1) + "not json\n" + line(3));
  });

  it("refuses a seq gap or a non-monotonic seq", async () => {
    file = join(dir, "events.jsonl");
    await writeFile(file, line(1) + line(2) + line(4) + line(5));
    await expect(EventLog.open<Ev>(file)).rejects.toMatchObject({ code: "store_corrupt", details: { line: 3 } });
    await writeFile(file, line(1) + line(2) + line(2));
    await expect(EventLog.open<Ev>(file)).rejects.toBeInstanceOf(StoreCorruptError);
    await writeFile(file, line(2));
    await expect(EventLog.open<Ev>(file)).rejects.toMatchObject({ details: { line: 1 } });
  });

  it("throws ClosedError on append after close", async () => {
    const log = await openLog();
    log.append({ type: "a" });
    await log.close();
    await log.close(); // idempotent
    expect(() => log.append({ type: "a" })).toThrow(ClosedError);
    expect(() => log.append({ type: "a" })).toThrow(expect.objectContaining({ code: "closed" }));
  });

  it("rejects events that cannot be written as a valid record, without consuming a seq", async () => {
    const log = await openLog();
    const cyclic: Record<string, unknown> = { type: "a" };
    cyclic.self = cyclic;
    expect(() => log.append(cyclic as Ev)).toThrow(expect.objectContaining({ code: "invalid_input" }));
    expect(() => log.append({ type: 7 } as unknown as Ev)).toThrow(expect.objectContaining({ code: "invalid_input" }));
    expect(log.append({ type: "ok" }).seq).toBe(1);
  });

  it("handles 100k events without replaying the whole file for a late subscriber", async () => {
    const log = await openLog();
    for (let i = 0; i < 100_000; i++) log.append({ type: "bulk", n: i });
    await log.close();
    const again = await openLog();
    expect(again.recovery.records).toBe(100_000);
    const seqs: number[] = [];
    again.subscribe(99_990, (r) => seqs.push(r.seq));
    again.append({ type: "live" });
    await until(() => seqs.length === 11);
    expect(seqs).toEqual(Array.from({ length: 11 }, (_, i) => 99_991 + i));
  }, 60_000);

  it("enters a failed state when fsync fails", async () => {
    const log = await openLog();
    log.append({ type: "a" });
    await log.whenDurable();
    const probe = await open(join(dir, "probe"), "w");
    const proto = Object.getPrototypeOf(probe) as { datasync: () => Promise<void> };
    await probe.close();
    const spy = vi.spyOn(proto, "datasync").mockRejectedValueOnce(new Error("EIO: simulated"));
    try {
      log.append({ type: "b" });
      await expect(log.whenDurable()).rejects.toThrow("EIO: simulated");
      expect(log.durableHead).toBe(1);
      expect(() => log.append({ type: "c" })).toThrow(expect.objectContaining({ code: "store_failed" }));
      await expect(log.whenDurable(1)).resolves.toBeUndefined(); // already durable stays durable
      await expect(log.close()).rejects.toThrow("EIO: simulated");
    } finally {
      spy.mockRestore();
    }
  });
});

describe("durability is a real fdatasync", () => {
  it("a record is durable only after an fdatasync of the file that follows its write", async () => {
    // Watched at the disk boundary: the FileHandle every write and fdatasync of the log goes through.
    const probe = await open(join(dir, "probe"), "w");
    const handle = Object.getPrototypeOf(probe) as Record<
      "write" | "datasync",
      (...args: unknown[]) => Promise<unknown>
    >;
    await probe.close();
    const calls: string[] = [];
    const realWrite = handle.write;
    const realDatasync = handle.datasync;
    handle.write = async function (this: unknown, ...args: unknown[]) {
      calls.push("write");
      return realWrite.apply(this, args);
    };
    handle.datasync = async function (this: unknown, ...args: unknown[]) {
      calls.push("datasync");
      return realDatasync.apply(this, args);
    };
    try {
      const log = await openLog();
      const { seq } = log.append({ type: "a" });
      await log.whenDurable(seq).then(() => calls.push("durable"));
      const firstWrite = calls.indexOf("write");
      expect(firstWrite).toBeGreaterThanOrEqual(0);
      expect(calls.indexOf("datasync", firstWrite)).toBeGreaterThan(firstWrite);
      expect(calls.indexOf("durable")).toBeGreaterThan(calls.indexOf("datasync", firstWrite));
    } finally {
      handle.write = realWrite;
      handle.datasync = realDatasync;
    }
  });
});
