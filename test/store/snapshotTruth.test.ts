import { createHash } from "node:crypto";
import { readdir, readFile, stat, writeFile } from "node:fs/promises";
import { join } from "node:path";
import { afterEach, beforeEach, describe, expect, it } from "vitest";
import type { DomainEvent } from "../../src/domain/events.js";
import { keyedScript, sequentialIds, StoreCorruptError, type RuntimeFailure } from "../../src/index.js";
import { FOLD_VERSION } from "../../src/runtime/projections.js";
import { decodeGraph, encodeGraph } from "../../src/runtime/snapshots/codec.js";
import { checkPrefix, readSnapshot, SNAPSHOT_FILE } from "../../src/runtime/snapshots/file.js";
import { COMPACT_SLACK, TextSink, writeTexts } from "../../src/runtime/snapshots/texts.js";
import { CHAIN_BLOCK } from "../../src/runtime/store/chain.js";
import { tempDir } from "../support/files.js";
import { foldedLog, TEST_DIRECTORY } from "../support/snapshotLog.js";
import { openRuntime } from "../support/internals.js";
import { scripted } from "../support/policies.js";
import { rejection, sendAndWait, until } from "../support/runtime.js";

/**
 * A projection snapshot is a cache of the log and nothing more: text comes back exactly (a lone surrogate
 * included), its text file does not grow by being read, a snapshot's header (its index) and its text file are
 * covered by its sums, and what a crash left mid-write is cleared at open.
 */

let dir: string;
let removeDir: () => Promise<void>;
beforeEach(async () => ({ dir, cleanup: removeDir } = await tempDir("tiller-snapshot-truth-")));
afterEach(() => removeDir());

/** Long enough that the log is more than one chain block (its whole blocks are checked after open). */
const streamed = Array.from({ length: 40_000 }, (_, i) => `word ${i}`).join(" ");

const script = keyedScript({
  "[big]": [{ type: "text", text: streamed, chunkSize: 16_384 }],
  "[long]": [
    { type: "command", command: "cat notes", output: "a line of notes\n".repeat(60) },
    { type: "text", text: `the answer: ${"at length, ".repeat(60)}`, chunkSize: 50 },
  ],
});
const open = (failures: RuntimeFailure[] = []) =>
  openRuntime({
    dataDir: dir,
    ids: sequentialIds(),
    providers: { a: scripted({}, script) },
    onFailure: (failure) => void failures.push(failure),
  });

const textFiles = async () => (await readdir(dir)).filter((name) => name.startsWith("projections.text."));
const textBytes = async () => {
  let total = 0;
  for (const name of await textFiles()) total += (await stat(join(dir, name))).size;
  return total;
};

/** The snapshot's three parts: seal, header (parsed), body. */
async function snapshotParts() {
  const data = await readFile(join(dir, SNAPSHOT_FILE), "utf8");
  const [seal, header, body] = [
    data.slice(0, 64),
    data.slice(65, data.indexOf("\n", 65)),
    data.slice(data.indexOf("\n", 65) + 1),
  ];
  return { seal, header: JSON.parse(header) as Record<string, unknown>, body };
}
async function writeSealed(header: Record<string, unknown>, body: string) {
  const sealed = `${JSON.stringify(header)}\n${body}`;
  await writeFile(join(dir, SNAPSHOT_FILE), `${createHash("sha256").update(sealed).digest("hex")}\n${sealed}`);
}

describe("text through a snapshot", () => {
  it("a long text with lone surrogates comes back exactly, not as replacement characters", async () => {
    const lone = `L\ud800${"x".repeat(300)}\udfff and \ud83d\ude00 paired`;
    const fine = "y".repeat(300);
    const sink = new TextSink(null, 0);
    const encoded = JSON.parse(JSON.stringify(encodeGraph({ a: { text: lone }, b: { text: fine } }, sink)));
    const written = await writeTexts(dir, sink);
    written.store.extend(written.cover); // as the writer does once the snapshot naming it is installed
    try {
      const back = decodeGraph(encoded, { store: written.store, bytes: written.cover.bytes }) as {
        a: { text: string };
        b: { text: string };
      };
      expect(back.a.text).toBe(lone);
      expect(back.b.text).toBe(fine);
      // Only the well-formed text went to the text file.
      expect(written.cover.bytes).toBe(300);
    } finally {
      written.store.close();
    }
  });

  it("reopened from the snapshot, a prompt with a lone surrogate reads as the replay reads it", async () => {
    const prompt = `[long] L\ud800${"?".repeat(300)}`;
    let rt = await open();
    const { threadId } = await rt.createThread({ providerTarget: "a", title: "lone" });
    await sendAndWait(rt, threadId, prompt);
    await rt.close();
    rt = await open();
    try {
      expect(rt.snapshots!.loadedSeq).toBeGreaterThan(0);
      const { runs } = await rt.readThread(threadId);
      expect(runs[0]!.text).toBe(prompt);
    } finally {
      await rt.close();
    }
  });
});

describe("the text file", () => {
  it("does not grow by being read: open, read every thread, close, five times", async () => {
    let rt = await open();
    for (let i = 0; i < 3; i++) {
      const { threadId } = await rt.createThread({ providerTarget: "a", title: `t${i}` });
      await sendAndWait(rt, threadId, "[long] go");
      await sendAndWait(rt, threadId, "[long] again");
    }
    await rt.close();
    const sizes = [await textBytes()];
    for (let cycle = 0; cycle < 5; cycle++) {
      rt = await open();
      expect(rt.snapshots!.loadedSeq).toBeGreaterThan(0);
      for (const { threadId } of rt.listThreads()) await rt.readThread(threadId);
      await rt.close();
      sizes.push(await textBytes());
    }
    expect(sizes[0]).toBeGreaterThan(0);
    expect(sizes).toEqual(sizes.map(() => sizes[0]));
  });

  it("is rewritten in a new generation once it holds more than twice what its snapshot uses", async () => {
    const { log, views, writer, errors } = await foldedLog(dir);
    try {
      const text = (n: number) => `${n} `.padEnd(256 * 1024, String.fromCharCode(97 + (n % 26)));
      const sizes: number[] = [];
      for (let n = 0; n < 16; n++) {
        // The thread is made again with another long title each time: each snapshot writes it again.
        const event: DomainEvent = {
          type: "thread.created",
          threadId: "thr_1",
          title: text(n),
          cwd: "/",
          providerTarget: "a",
          model: null,
          lineage: null,
        };
        views.apply(log.append(event));
        await log.whenDurable();
        expect(await writer.snapshotNow()).toBe(true);
        sizes.push(await textBytes());
      }
      expect(errors).toEqual([]);
      // Without a new generation the file would hold every title (4 MiB); it stays within twice the live text.
      expect(Math.max(...sizes)).toBeLessThanOrEqual(2 * 256 * 1024 + COMPACT_SLACK + 256 * 1024);
      expect(await textFiles()).toHaveLength(1);
    } finally {
      await log.close();
      await writer.close();
    }
  });
});

describe("what open takes on trust, checked after it", () => {
  it("a same-length edit in the log's first block: history is never read from it, the runtime stops", async () => {
    let rt = await open();
    const { threadId } = await rt.createThread({ providerTarget: "a", title: "prefix" });
    await sendAndWait(rt, threadId, "[big] one");
    await sendAndWait(rt, threadId, "[big] two");
    await rt.close();
    const log = join(dir, "events.jsonl");
    const bytes = await readFile(log);
    expect(bytes.length).toBeGreaterThan(CHAIN_BLOCK + 100_000);
    // A letter of the streamed text, early in the log: the line stays valid JSON, and a valid record.
    const at = bytes.indexOf("word 1");
    expect(at).toBeGreaterThan(0);
    expect(at).toBeLessThan(CHAIN_BLOCK);
    bytes[at] = "W".charCodeAt(0);
    await writeFile(log, bytes);

    const failures: RuntimeFailure[] = [];
    rt = await open(failures);
    const delivered: number[] = [];
    try {
      expect(rt.snapshots!.loadedSeq).toBeGreaterThan(0); // open took the prefix on trust
      rt.subscribe({ afterSeq: 0 }, ({ seq }) => void delivered.push(seq));
      expect(await rejection(rt.readThread(threadId))).toBeInstanceOf(StoreCorruptError);
      expect(await rt.snapshotChecked).toBeInstanceOf(StoreCorruptError);
      await until("the subscriber's catch-up is refused", () => failures.some((f) => f.kind === "subscriber_threw"));
      // Nothing of the history before the snapshot was delivered: it was never proven the snapshot's.
      expect(delivered.filter((seq) => seq <= rt.snapshots!.loadedSeq)).toEqual([]);
      expect(failures.map((f) => f.kind)).toContain("store_failed");
      expect(await rejection(rt.createThread({ providerTarget: "a" }))).toBeInstanceOf(StoreCorruptError);
    } finally {
      await rt.close();
    }
    // The snapshot is gone: the next open replays the log as it is (the edit was in a delta, a valid record).
    expect((await readdir(dir)).includes(SNAPSHOT_FILE)).toBe(false);
    rt = await open();
    try {
      expect(rt.snapshots!.loadedSeq).toBe(0);
      expect((await rt.readThread(threadId)).runs.map((run) => run.status)).toEqual(["completed", "completed"]);
    } finally {
      await rt.close();
    }
  });

  it("an index entry that does not start its record is found: in the last block at open, before it after", async () => {
    const { log, writer, logFile, append } = await foldedLog(dir);
    const padding = "p".repeat(500);
    for (let n = 1; n <= 4500; n++) {
      const receipt = { n, padding };
      append({ type: "command.receipt", commandId: `cmd_${n}`, command: "x", receipt });
    }
    await log.close();
    await writer.close();
    expect((await stat(logFile)).size).toBeGreaterThan(2 * CHAIN_BLOCK);
    const { header, body } = await snapshotParts();
    const index = header.index as number[];
    const chain = header.chain as { blocks: number };
    const early = index.findIndex((at) => at > 0 && at < CHAIN_BLOCK);
    const late = index.findIndex((at) => at >= chain.blocks * CHAIN_BLOCK);
    expect(early).toBeGreaterThan(0);
    expect(late).toBeGreaterThan(early);
    const expected = { fold: FOLD_VERSION, directory: TEST_DIRECTORY };
    // Sealed again, as a snapshot that was written wrong would be: its seal holds, its index does not.
    for (const [slot, when] of [
      [early, "after"],
      [late, "at open"],
    ] as const) {
      await writeSealed({ ...header, index: index.map((at, i) => (i === slot ? at + 3 : at)) }, body);
      const found = await readSnapshot(dir, logFile, expected);
      try {
        if (when === "at open") {
          expect(found.ignored).toMatch(/its index says record \d+ starts at byte/);
        } else {
          expect(found.ignored).toBeNull();
          expect(await checkPrefix(logFile, found.snapshot!)).toMatch(/its index says record \d+ starts at byte/);
        }
      } finally {
        found.snapshot?.texts.store.close();
      }
    }
  });

  it("a snapshot from another data directory is refused at open for what it is", async () => {
    let rt = await open();
    await rt.createThread({ providerTarget: "a", title: "mine" });
    await rt.close();
    const meta = JSON.parse(await readFile(join(dir, "runtime.json"), "utf8")) as { directoryId: string };
    expect(meta.directoryId).toMatch(/^[0-9a-f]{32}$/);
    const { header, body } = await snapshotParts();
    await writeSealed({ ...header, directory: "f".repeat(32) }, body);
    const failures: RuntimeFailure[] = [];
    rt = await open(failures);
    try {
      expect(rt.snapshots!.loadedSeq).toBe(0);
      const warnings: string[] = [];
      rt.subscribe({ afterSeq: 0 }, ({ event }) => void (event.type === "warning" && warnings.push(event.message)));
      await until("the warning", () => warnings.length > 0);
      expect(warnings).toEqual([expect.stringContaining("it was taken of another data directory")]);
    } finally {
      await rt.close();
    }
  });
});

describe("what the seal and the sums cover", () => {
  it("a text file changed in place (the receipts' part): a repeated command id never runs again", async () => {
    let rt = await open();
    const { threadId } = await rt.createThread({ providerTarget: "a", title: "receipts" });
    const sent = await rt.sendMessage({ threadId, text: "[long] once", commandId: "send-once" });
    await rt.waitForRun(sent.runId);
    await rt.close();
    // Every byte of the text file's JSON lists (where the receipts are) turned into a space: the same length.
    const [name] = await textFiles();
    const bytes = await readFile(join(dir, name!));
    const at = bytes.lastIndexOf("send-once");
    expect(at).toBeGreaterThan(0);
    bytes.fill(0x20, at - 4, at + 12);
    await writeFile(join(dir, name!), bytes);

    const failures: RuntimeFailure[] = [];
    rt = await open(failures);
    try {
      const again = rt.sendMessage({ threadId, text: "[long] once", commandId: "send-once" });
      const error = await rejection(again);
      expect(error).toBeInstanceOf(StoreCorruptError);
      expect(rt.views.runs.size).toBe(1);
      expect(failures.map((f) => f.kind)).toContain("store_failed");
    } finally {
      await rt.close();
    }
    // The snapshot went with the corruption: the next open replays the log, whose receipt answers the command.
    rt = await open();
    try {
      expect(rt.snapshots!.loadedSeq).toBe(0);
      const receipt = await rt.sendMessage({ threadId, text: "[long] once", commandId: "send-once" });
      expect(receipt.runId).toBe(sent.runId);
    } finally {
      await rt.close();
    }
  });

  it("a header whose index was changed and sealed again is found out: catch-up never starts wrong", async () => {
    let rt = await open();
    const { threadId } = await rt.createThread({ providerTarget: "a", title: "index" });
    for (let i = 0; i < 3; i++) await sendAndWait(rt, threadId, `[long] ${i}`);
    await rt.close();
    const { header, body } = await snapshotParts();
    const index = header.index as number[];
    expect(index[0]).toBe(0);
    await writeSealed({ ...header, index: [index[0]! + 7, ...index.slice(1)] }, body);
    rt = await open();
    try {
      // At open (what it checks of the index holds against the log) or in the background: never used as it is.
      expect(rt.snapshots!.loadedSeq).toBe(0);
      expect((await rt.readThread(threadId)).runs).toHaveLength(3);
    } finally {
      await rt.close();
    }
  });

  it("a write a crash cut short leaves no temporary file after the next open", async () => {
    let rt = await open();
    await rt.createThread({ providerTarget: "a", title: "temps" });
    await rt.close();
    await writeFile(join(dir, `${SNAPSHOT_FILE}.4242.tmp`), "half a snapshot");
    rt = await open();
    await rt.close();
    expect((await readdir(dir)).filter((name) => name.endsWith(".tmp"))).toEqual([]);
  });
});
