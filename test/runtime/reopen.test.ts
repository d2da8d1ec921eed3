import { createHash } from "node:crypto";
import { appendFile, cp, readFile, rm, truncate, writeFile } from "node:fs/promises";
import { join } from "node:path";
import { describe, expect, it } from "vitest";
import { keyedScript, sequentialIds, type ScriptStep, type TillerRuntime } from "../../src/index.js";
import type { TurnItem } from "../../src/runtime/projections.js";
import type { Runtime } from "../../src/runtime/runtime.js";
import { SNAPSHOT_FILE } from "../../src/runtime/snapshots/file.js";
import { unreadTexts } from "../../src/runtime/snapshots/texts.js";
import { tempDir } from "../support/files.js";
import { openRuntime } from "../support/internals.js";
import { scripted } from "../support/policies.js";
import { nextEvent, sendAndWait } from "../support/runtime.js";

/**
 * Reopening from a projection snapshot (src/runtime/snapshots/) gives exactly what a replay of the whole log gives,
 * and later work on it too; a snapshot that does not hold against the log is ignored (said in a warning) and the log
 * replayed; a crash after a background snapshot folds the tail after it.
 */

const script = keyedScript({
  "[tools]": [
    { type: "reasoning", text: "looking around" },
    { type: "tool", name: "grep", input: { pattern: "x" }, output: "found x" },
    { type: "command", command: "ls", output: "a b\n".repeat(200) },
    { type: "text", text: `done with the tools: ${"the answer, at length; ".repeat(40)}`, chunkSize: 40 },
  ],
  "[ask]": [
    { type: "command", command: "make", output: "built", approval: true },
    { type: "text", text: "made it" },
  ],
} satisfies Record<string, ScriptStep[]>);

const open = (dataDir: string) =>
  openRuntime({ dataDir, ids: sequentialIds(), providers: { a: scripted({}, script), b: scripted({}, script) } });

type Threads = { main: string; fork: string; first: string; onFork: string };

/** Threads, runs with tools, an answered request, a handoff to another target, a fork and a rollback. */
async function work(rt: TillerRuntime): Promise<Threads> {
  const { threadId } = await rt.createThread({ providerTarget: "a", title: "main" });
  const first = await sendAndWait(rt, threadId, "[tools] first");
  const asked = await rt.sendMessage({ threadId, text: "[ask] second" });
  const { requestId } = (await nextEvent(rt, "request.opened", (e) => e.runId === asked.runId)).event;
  await rt.respond({ requestId, response: { kind: "decision", decision: "accept" } });
  await rt.waitForRun(asked.runId);
  await sendAndWait(rt, threadId, "third, elsewhere", { providerTarget: "b" });
  const fork = await rt.forkThread({ threadId, afterRunId: asked.runId, providerTarget: "a" });
  const onFork = await sendAndWait(rt, fork.threadId, "[tools] on the fork");
  await rt.rollback({ threadId, toRunId: asked.runId });
  return { main: threadId, fork: fork.threadId, first: first.runId, onFork: onFork.runId };
}

/** Work after the reopen that mutates what the reopen loaded (threads' runs, provider threads, handoffs...). */
async function moreWork(rt: TillerRuntime, threads: Threads): Promise<void> {
  await sendAndWait(rt, threads.main, "[tools] after the reopen");
  await sendAndWait(rt, threads.fork, "plain");
  await rt.rollback({ threadId: threads.fork, toRunId: threads.onFork });
}

/**
 * The scripted backends name native refs with a random prefix per backend: the same work gives other refs, and other
 * ids derived from them (named here in the order they first appear).
 */
function sameRefs(json: string): string {
  const derived = new Map<string, string>();
  return (
    json
      .replace(/\bs(thread|turn|item)-[0-9a-f]+-/g, "s$1-*-")
      // An id may end in "-" or "_", where \b finds no word boundary: the end is where the id's characters end.
      .replace(/\b(nod|att|ptu|req)_[A-Za-z0-9_-]{16}(?![A-Za-z0-9_-])/g, (id, kind: string) => {
        if (!derived.has(id)) derived.set(id, `${kind}_#${derived.size}`);
        return derived.get(id)!;
      })
  );
}

const withoutSeqs = (json: string) =>
  json.replace(/"(seq|head)":\d+/g, '"$1":#').replace(/("run_\d+"),\d+\]/g, "$1,#]");

/**
 * Everything the projections hold, private maps and trackers included, in order (maps and sets as their entries;
 * the items by id in the order the items were made: a snapshot's are indexed as they are read).
 */
const graphOf = (rt: Runtime) =>
  sameRefs(
    JSON.stringify(rt.views.state(), (key, value: unknown) => {
      if (value instanceof Set) return { set: [...value] };
      if (!(value instanceof Map)) return value;
      const entries = [...value];
      if (key === "items") entries.sort(([, a]: [string, TurnItem], [, b]: [string, TurnItem]) => a.seq - b.seq);
      return { map: entries };
    }),
  );

/**
 * The sharing the fold makes (what later folds rely on): a run is one object in `runs` and in its thread's runs, an
 * item in `items` and in its run's items, a provider thread in both maps, a checkpoint in both.
 */
function expectFoldSharing(rt: Runtime): void {
  const state = rt.views.state();
  for (const run of state.runs.values()) expect(state.threads.get(run.threadId)!.runs).toContain(run);
  const itemsOfRuns = new Set([...state.runs.values()].flatMap((r) => r.items));
  for (const item of state.items.values()) expect(itemsOfRuns.has(item)).toBe(true);
  for (const record of state.providerThreads.values())
    expect(state.providerThreadsById.get(record.providerThreadId)).toBe(record);
  for (const list of state.threadCheckpoints.values())
    for (const checkpoint of list) expect(state.checkpoints.get(checkpoint.checkpointId)).toBe(checkpoint);
}

const runsOf = (rt: Runtime) => sameRefs(JSON.stringify([...rt.views.threads.values()]));

async function readModels(rt: Runtime, threads: { main: string; fork: string }) {
  const read = [await rt.readThread(threads.main), await rt.readThread(threads.fork)];
  return sameRefs(JSON.stringify({ read, list: rt.listThreads() }));
}

async function ignoredWarnings(rt: Runtime): Promise<string[]> {
  const records: string[] = [];
  await new Promise<void>((resolve) => {
    const stop = rt.subscribe({ afterSeq: 0 }, (r) => {
      if (r.event.type === "warning" && r.event.message.includes(SNAPSHOT_FILE)) records.push(r.event.message);
      if (r.seq === rt.head) {
        stop();
        resolve();
      }
    });
  });
  return records;
}

/** A data directory after `work` and a clean close (its snapshot written), and a copy of it. */
async function closedPair(dir: string) {
  const withSnapshot = join(dir, "snap");
  const replayed = join(dir, "full");
  const rt = await open(withSnapshot);
  const threads = await work(rt);
  await rt.close();
  await cp(withSnapshot, replayed, { recursive: true });
  await rm(join(replayed, SNAPSHOT_FILE));
  return { withSnapshot, replayed, threads };
}

describe("reopening from a projection snapshot", () => {
  it("gives the projections a full replay gives, and the same after more work", async () => {
    const { dir, cleanup } = await tempDir("tiller-reopen-");
    try {
      const { withSnapshot, replayed, threads } = await closedPair(dir);
      const fast = await open(withSnapshot);
      const full = await open(replayed);
      try {
        expect(fast.snapshots!.loadedSeq).toBeGreaterThan(0);
        expect(full.snapshots!.loadedSeq).toBe(0);
        expect(fast.head).toBe(full.head);
        // Long texts stay in the text file until read (as the comparison now does).
        const unread = [...fast.views.runs.values()].flatMap((r) => r.items).filter((i) => unreadTexts(i)?.size);
        expect(unread.length).toBeGreaterThan(0);
        expect(graphOf(fast)).toBe(graphOf(full));
        expectFoldSharing(fast);
        expect(await readModels(fast, threads)).toBe(await readModels(full, threads));
        expect(await ignoredWarnings(fast)).toEqual([]);

        await moreWork(fast, threads);
        await moreWork(full, threads);
        // Live, the deltas that share a commit become one record, as timing has it: seqs may differ from here on.
        expect(withoutSeqs(graphOf(fast))).toBe(withoutSeqs(graphOf(full)));
        expect(withoutSeqs(await readModels(fast, threads))).toBe(withoutSeqs(await readModels(full, threads)));
        expect([...fast.views.runs.values()].filter((r) => r.status === "rolled_back")).toHaveLength(2);
        expectFoldSharing(fast);
      } finally {
        await fast.close();
        await full.close();
      }
    } finally {
      await cleanup();
    }
  }, 60_000);

  it.each([
    ["the log edited at the snapshot's line", "edit"],
    ["the log truncated below the snapshot's line", "truncate"],
    ["another log", "swap"],
    ["a corrupt snapshot", "corrupt"],
    ["a snapshot of another fold version", "version"],
  ] as const)(
    "ignores it with a warning and replays the log: %s",
    async (_, damage) => {
      const { dir, cleanup } = await tempDir("tiller-reopen-bad-");
      try {
        const { withSnapshot, replayed } = await closedPair(dir);
        const log = join(withSnapshot, "events.jsonl");
        const snapshotFile = join(withSnapshot, SNAPSHOT_FILE);
        const text = await readFile(log, "utf8");
        const lines = text.split("\n").filter(Boolean);
        if (damage === "edit") {
          // The same record at the same length, one byte different: only the line check can tell.
          const last = lines.at(-1)!.replace(/"at":"(\d)/, (_m, d: string) => `"at":"${(Number(d) + 1) % 10}`);
          await writeFile(log, [...lines.slice(0, -1), last].join("\n") + "\n");
        } else if (damage === "truncate") {
          await truncate(log, Buffer.byteLength(lines.slice(0, -3).join("\n") + "\n"));
        } else if (damage === "swap") {
          const other = await open(join(dir, "other"));
          await work(other);
          await other.close();
          await cp(join(dir, "other", "events.jsonl"), log);
        } else if (damage === "corrupt") {
          const bytes = await readFile(snapshotFile);
          const at = bytes.length - 10;
          bytes.writeUInt8(bytes.readUInt8(at) ^ 0x01, at);
          await writeFile(snapshotFile, bytes);
        } else {
          // Sealed again: only the fold version tells.
          const [, sealed] = (await readFile(snapshotFile, "utf8")).split(/\n(.*)/s) as [string, string];
          const resealed = sealed.replace(/"fold":\d+/, '"fold":999');
          await writeFile(snapshotFile, `${createHash("sha256").update(resealed).digest("hex")}\n${resealed}`);
        }
        const reopened = await open(withSnapshot);
        try {
          expect(reopened.snapshots!.loadedSeq).toBe(0);
          expect(await ignoredWarnings(reopened)).toEqual([expect.stringContaining(`${SNAPSHOT_FILE} was ignored`)]);
          if (damage !== "truncate" && damage !== "swap") {
            const full = await open(replayed);
            try {
              // What the replay makes of the same records (the warning aside).
              expect(runsOf(reopened)).toBe(runsOf(full));
            } finally {
              await full.close();
            }
          } else if (damage === "truncate") {
            expect(reopened.listThreads().length).toBeGreaterThan(0);
          }
        } finally {
          await reopened.close();
        }
      } finally {
        await cleanup();
      }
    },
    60_000,
  );

  it("after a crash past a background snapshot, folds the tail after it (and a torn tail is still cut)", async () => {
    const { dir, cleanup } = await tempDir("tiller-reopen-crash-");
    try {
      const live = join(dir, "live");
      const image = join(dir, "crashed");
      const full = join(dir, "full");
      const rt = await open(live);
      try {
        const threads = await work(rt);
        expect(await rt.snapshots!.snapshotNow()).toBe(true);
        const snapshotSeq = rt.head;
        await sendAndWait(rt, threads.main, "[tools] after the snapshot");
        // What a crash leaves: the files as they are on disk (without the lock of this live runtime).
        await cp(live, image, { recursive: true, filter: (src) => !src.split("/").at(-1)!.startsWith("LOCK") });
        await appendFile(join(image, "events.jsonl"), '{"seq":99999,"at":"torn'); // a write the crash cut short
        await cp(image, full, { recursive: true });
        await rm(join(full, SNAPSHOT_FILE));

        const fast = await open(image);
        const slow = await open(full);
        try {
          expect(fast.snapshots!.loadedSeq).toBe(snapshotSeq);
          expect(fast.recovery.cut).toMatchObject({ complete: false });
          expect(slow.snapshots!.loadedSeq).toBe(0);
          expect(fast.views.runs.size).toBe(rt.views.runs.size);
          const after = [...fast.views.runs.values()].find((r) => r.text === "[tools] after the snapshot");
          expect(after?.status).toBe("completed");
          expect(graphOf(fast)).toBe(graphOf(slow));
          expect(await readModels(fast, threads)).toBe(await readModels(slow, threads));
        } finally {
          await fast.close();
          await slow.close();
        }
      } finally {
        await rt.close();
      }
    } finally {
      await cleanup();
    }
  }, 60_000);

  it("each reopen starts from the snapshot the close before wrote", async () => {
    const { dir, cleanup } = await tempDir("tiller-reopen-again-");
    try {
      const { withSnapshot, threads } = await closedPair(dir);
      const said = async (rt: Runtime) => JSON.stringify((await rt.readThread(threads.main)).runs);
      const first = await open(withSnapshot);
      const expected = await said(first);
      await first.close();
      let last = first.head;
      for (let i = 1; i < 3; i++) {
        const rt = await open(withSnapshot);
        // Closed without reading a text: the snapshot it writes refers to the texts where they are.
        expect(rt.snapshots!.loadedSeq).toBe(last);
        expect(await ignoredWarnings(rt)).toEqual([]);
        last = rt.head;
        await rt.close();
      }
      const again = await open(withSnapshot);
      try {
        expect(await said(again)).toBe(expected);
        expect(expected).toContain("the answer, at length; the answer");
      } finally {
        await again.close();
      }
    } finally {
      await cleanup();
    }
  }, 60_000);
});
