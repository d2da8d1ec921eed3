import { existsSync } from "node:fs";
import { appendFile, open, readdir } from "node:fs/promises";
import { join } from "node:path";
import { afterEach, beforeEach, describe, expect, it, vi } from "vitest";
import type { DomainEvent } from "../../src/domain/events.js";
import { FOLD_VERSION } from "../../src/runtime/projections.js";
import { decodeGraph, encodeGraph, SnapshotShapeError } from "../../src/runtime/snapshots/codec.js";
import { readSnapshot, SNAPSHOT_FILE } from "../../src/runtime/snapshots/file.js";
import { TextSink, unreadTexts, writeTexts } from "../../src/runtime/snapshots/texts.js";
import { TextStore } from "../../src/runtime/snapshots/textStore.js";
import { EventLog } from "../../src/runtime/store/eventLog.js";
import { createScriptedAdapter, type RuntimeFailure } from "../../src/index.js";
import { tempDir } from "../support/files.js";
import { foldedLog, TEST_DIRECTORY } from "../support/snapshotLog.js";
import { openRuntime } from "../support/internals.js";
import { until } from "../support/runtime.js";

/**
 * The projection snapshot's parts: the graph codec (sharing kept, untrusted input refused), long texts read on first
 * access, the writer (never ahead of the durable log, a failed write harmless, background snapshots), and the log's
 * open from a verified start.
 */

let dir: string;
let removeDir: () => Promise<void>;
beforeEach(async () => ({ dir, cleanup: removeDir } = await tempDir("tiller-snapshots-")));
afterEach(() => removeDir());

describe("the graph codec", () => {
  it("gives back the graph with its sharing, maps, sets, undefined and a __proto__ field", () => {
    const item = { id: "a", text: "hi", detail: undefined };
    const run = { items: [item], seen: new Set(["r1"]) };
    const root = { runs: new Map([["r", run]]), items: new Map([["a", item]]), same: [run, run] };
    Object.defineProperty(item, "__proto__", { value: 1, enumerable: true, writable: true, configurable: true });
    const back = decodeGraph(JSON.parse(JSON.stringify(encodeGraph(root)))) as typeof root;
    expect(back).toEqual(root);
    expect(back.items.get("a")).toBe(back.runs.get("r")!.items[0]);
    expect(back.same[0]).toBe(back.same[1]);
    expect(Object.getPrototypeOf(back.items.get("a"))).toBe(Object.prototype);
    expect(Object.keys(back.items.get("a")!)).toEqual(["id", "text", "detail", "__proto__"]);
  });

  it("refuses what it could not give back, and input that is not its own", () => {
    expect(() => encodeGraph({ at: new Date() })).toThrow(SnapshotShapeError);
    expect(() => encodeGraph({ n: Number.NaN })).toThrow(SnapshotShapeError);
    for (const bad of [{ a: 1 }, ["x", 1], ["r", 0], ["m", [1]], ["o", { t: ["t", 0, 5] }], ["a", [["r", 7]]]]) {
      expect(() => decodeGraph(bad)).toThrow(SnapshotShapeError);
    }
  });
});

describe("long texts", () => {
  it("are read from the text file on first access, and referred to again while unread", async () => {
    const long = "é, a long text ".repeat(40);
    const sink = new TextSink(null, 0);
    const encoded = JSON.parse(JSON.stringify(encodeGraph({ a: { text: long, short: "s" }, b: { text: long } }, sink)));
    const written = await writeTexts(dir, sink);
    const store = TextStore.open(written.store.path, written.gen, written.cover);
    try {
      const back = decodeGraph(encoded, { store, bytes: written.cover.bytes }) as {
        a: Record<string, string>;
        b: object;
      };
      expect([...unreadTexts(back.a)!.keys()]).toEqual(["text"]);
      // A snapshot of it writes no text again.
      const again = new TextSink(store, written.cover.bytes);
      encodeGraph(back, again);
      expect(again.end).toBe(written.cover.bytes);
      expect(back.a.text).toBe(long);
      expect(unreadTexts(back.a)!.size).toBe(0);
      back.a.text = "replaced";
      expect(back.a).toEqual({ text: "replaced", short: "s" });
      expect(JSON.stringify(back.b)).toBe(JSON.stringify({ text: long }));
      // A text past the file's length is refused.
      expect(() => decodeGraph(encoded, { store, bytes: 10 })).toThrow(SnapshotShapeError);
    } finally {
      store.close();
      written.store.close();
    }
  });
});

const expected = { fold: FOLD_VERSION, directory: TEST_DIRECTORY };

/** A folded log (test/support/snapshotLog.ts) whose `commit` appends the next receipt. */
async function folded(options: { everyRecords?: number } = {}) {
  const parts = await foldedLog(dir, options);
  let n = 0;
  const commit = () => {
    n++;
    parts.append({ type: "command.receipt", commandId: `cmd_${n}`, command: "x", receipt: { n } });
  };
  return { ...parts, commit };
}

const snapshotSeq = async (logFile: string) => {
  const found = await readSnapshot(dir, logFile, expected);
  found.snapshot?.texts.store.close();
  return found.snapshot?.start.seq ?? null;
};

describe("the snapshot writer", () => {
  it("never installs a snapshot ahead of the durable log (an fdatasync that fails)", async () => {
    const { log, writer, commit, logFile } = await folded();
    commit();
    await log.whenDurable();
    expect(await writer.snapshotNow()).toBe(true);
    expect(await snapshotSeq(logFile)).toBe(1);

    const probe = await open(join(dir, "probe"), "w");
    const proto = Object.getPrototypeOf(probe) as { datasync: () => Promise<void> };
    await probe.close();
    let fail: (error: Error) => void = () => undefined;
    const spy = vi.spyOn(proto, "datasync").mockImplementationOnce(() => new Promise((_, reject) => (fail = reject)));
    try {
      commit();
      // Taken while record 2 is being written (sealed, not durable): installed only once it is durable.
      await until("the batch is taken", () => log.sealed && spy.mock.calls.length === 1);
      const attempt = writer.snapshotNow();
      fail(new Error("EIO: simulated"));
      expect(await attempt).toBe(false);
      expect(log.durableHead).toBe(1);
      expect(await snapshotSeq(logFile)).toBe(1);
    } finally {
      spy.mockRestore();
      await writer.stop();
      await log.close().catch(() => undefined);
    }
  });

  it("a snapshot that cannot be written (a full disk) is told and costs nothing else", async () => {
    const { log, writer, errors, commit, logFile } = await folded();
    const { full, spy } = await diskFullOnNextWriteFile(dir);
    try {
      commit();
      await log.whenDurable();
      expect(await writer.snapshotNow()).toBe(false);
      expect(errors).toEqual([full]);
      expect((await readdir(dir)).filter((name) => name.includes(".tmp"))).toEqual([]);
      commit();
      await log.whenDurable();
      expect(await writer.snapshotNow()).toBe(true);
      expect(await snapshotSeq(logFile)).toBe(2);
    } finally {
      spy.mockRestore();
      await log.close();
      await writer.close();
    }
  });

  it("takes snapshots in the background as the log grows", async () => {
    const { log, writer, commit, logFile } = await folded({ everyRecords: 10 });
    try {
      for (let i = 0; i < 25; i++) {
        commit();
        await log.whenDurable();
      }
      await until("a background snapshot", () => existsSync(join(dir, SNAPSHOT_FILE)));
      await writer.snapshotNow(); // waits for the one in flight
      expect(await snapshotSeq(logFile)).toBeGreaterThanOrEqual(10);
    } finally {
      await log.close();
      await writer.close();
    }
    expect(await snapshotSeq(logFile)).toBe(25);
  });
});

describe("the log opened from a verified start", () => {
  it("validates only what follows it, cuts a torn tail there, and reads from the start as before", async () => {
    const { log, writer, commit, logFile } = await folded();
    for (let i = 0; i < 3000; i++) commit();
    await log.close();
    await writer.close();
    const found = await readSnapshot(dir, logFile, expected);
    found.snapshot!.texts.store.close();
    await appendFile(logFile, '{"seq":3001,"at":"2026-01-01T00:00:00.000Z","event":{"type":"x"}}\n{"seq":30');
    const again = await EventLog.open<DomainEvent>(logFile, { start: found.snapshot!.start });
    try {
      expect(again.scannedFrom).toBe(3000);
      expect(again.recovery).toMatchObject({ records: 3001, cut: { complete: false } });
      const seqs: number[] = [];
      for await (const record of again.readAll(1020)) seqs.push(record.seq);
      expect(seqs).toEqual(Array.from({ length: 3001 - 1020 }, (_, i) => 1021 + i));
    } finally {
      await again.close();
    }
  });
});

describe("a runtime's snapshots", () => {
  it("a snapshot the runtime cannot write is told to onFailure (snapshot_failed); the runtime goes on", async () => {
    const { dir, cleanup } = await tempDir("tiller-snapshot-failure-");
    const failures: RuntimeFailure[] = [];
    const rt = await openRuntime({
      dataDir: dir,
      providers: { scripted: createScriptedAdapter() },
      onFailure: (failure) => failures.push(failure),
    });
    const { full, spy } = await diskFullOnNextWriteFile(dir);
    try {
      const { threadId } = await rt.createThread({ providerTarget: "scripted" });
      expect(await rt.snapshots!.snapshotNow()).toBe(false);
      expect(failures).toEqual([{ kind: "snapshot_failed", error: full }]);
      const { runId } = await rt.sendMessage({ threadId, text: "still here" });
      expect((await rt.waitForRun(runId)).status).toBe("completed");
    } finally {
      spy.mockRestore();
      await rt.close();
      await cleanup();
    }
  });
});

/** The next `FileHandle.writeFile` (how a snapshot is written) fails as on a full disk. */
async function diskFullOnNextWriteFile(dir: string) {
  const probe = await open(join(dir, "probe"), "w");
  const proto = Object.getPrototypeOf(probe) as { writeFile: () => Promise<void> };
  await probe.close();
  const full = Object.assign(new Error("ENOSPC: no space left on device"), { code: "ENOSPC" });
  return { full, spy: vi.spyOn(proto, "writeFile").mockRejectedValueOnce(full) };
}
