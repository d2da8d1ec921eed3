import { cp, readdir, readFile, rm, stat, truncate, writeFile } from "node:fs/promises";
import { join } from "node:path";
import fc from "fast-check";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import {
  keyedScript,
  sequentialIds,
  TillerError,
  type RuntimeFailure,
  type ScriptStep,
  type TillerRuntime,
} from "../../src/index.js";
import { CHAIN_BLOCK } from "../../src/runtime/store/chain.js";
import { SNAPSHOT_FILE } from "../../src/runtime/snapshots/file.js";
import { tempDir } from "../support/files.js";
import { openRuntime } from "../support/internals.js";
import { scripted } from "../support/policies.js";
import { sendAndWait } from "../support/runtime.js";
import { params, seed } from "./seed.js";
import { tallyChaos } from "./tally.js";

/**
 * The log stays the truth whatever happens to the files beside it. Random corruptions and edits of the log, the
 * projection snapshot and its text file (a byte flipped, a block zeroed, a cut, a line garbled, a same-length valid
 * edit, a snapshot from another directory or from earlier) are made to a closed data directory; reopening it must
 * either give the read models a snapshot-free replay of the same log gives, or fail or warn with a typed error. Never
 * a silent difference: a snapshot that hides a damaged log, or serves what the log does not say, is a violation.
 *
 * Replay a failure with TILLER_CHAOS_SEED=<seed> (TILLER_CHAOS_PATH=<path>); TILLER_CHAOS_RUNS scales the runs.
 */

const long = (what: string, n: number) =>
  Array.from({ length: n }, (_, i) => `${what} ${i}: ${((i * 7919) % 10007).toString(36)}`).join("; ");

const script = keyedScript({
  // Big enough that the log is more than one chain block: the whole blocks are only checked in the background.
  "[big]": [{ type: "text", text: long("streamed", 16_000), chunkSize: 8192 }],
  "[tools]": [
    { type: "command", command: "ls", output: long("listed", 40) },
    { type: "text", text: long("answer", 30), chunkSize: 64 },
  ],
  // A lone surrogate in a long text: the snapshot must keep it exactly.
  "[lone]": [{ type: "text", text: `L\ud800${long("lonely", 40)}\udc00 end` }],
} satisfies Record<string, ScriptStep[]>);

const clock = () => new Date("2026-01-01T00:00:00.000Z");
const open = (dataDir: string, failures: RuntimeFailure[] = []) =>
  openRuntime({
    dataDir,
    ids: sequentialIds(),
    now: clock,
    providers: { a: scripted({}, script) },
    onFailure: (failure) => void failures.push(failure),
  });

async function work(rt: TillerRuntime, title: string): Promise<void> {
  const { threadId } = await rt.createThread({ providerTarget: "a", title });
  await sendAndWait(rt, threadId, "[big] one");
  await sendAndWait(rt, threadId, "[tools] two");
  const other = await rt.createThread({ providerTarget: "a", title: `${title}, the other` });
  await sendAndWait(rt, other.threadId, "[lone] three");
  await sendAndWait(rt, other.threadId, "[big] four");
}

/** What the read models say of every thread (`seq` aside: an ignored snapshot's warning is one more record). */
async function models(rt: TillerRuntime): Promise<string> {
  const threads = rt.listThreads().sort((a, b) => a.threadId.localeCompare(b.threadId));
  const out: unknown[] = [threads];
  for (const { threadId } of threads) {
    const { seq: _seq, ...snapshot } = await rt.readThread(threadId);
    out.push(snapshot);
  }
  return JSON.stringify(out);
}

type Outcome = { models: string } | { typed: string };

/** Opens `dir` and reads everything; a typed failure (open, a read, onFailure) is the outcome, any other is thrown. */
async function outcomeOf(dir: string): Promise<Outcome> {
  const failures: RuntimeFailure[] = [];
  let rt;
  try {
    rt = await open(dir, failures);
  } catch (error) {
    if (error instanceof TillerError) return { typed: `open: ${error.code}` };
    throw error;
  }
  try {
    let read: Outcome;
    try {
      read = { models: await models(rt) };
    } catch (error) {
      if (!(error instanceof TillerError)) throw error;
      read = { typed: `read: ${error.code}` };
    }
    await rt.snapshotChecked;
    for (const failure of failures) {
      if (!("error" in failure) || !(failure.error instanceof TillerError)) {
        throw new Error(
          `an untyped failure: ${JSON.stringify(failure)} ${String((failure as { error?: unknown }).error)}`,
        );
      }
      if (failure.kind === "store_failed") return { typed: `failure: ${failure.error.code}` };
    }
    return read;
  } finally {
    await rt.close().catch(() => undefined);
  }
}

type Damage =
  | { kind: "none" }
  | { kind: "flip"; file: "log" | "snapshot" | "text"; at: number; mask: number }
  | { kind: "zero"; file: "log" | "snapshot" | "text"; at: number; bytes: number }
  | { kind: "cut"; file: "log" | "snapshot" | "text"; at: number }
  | { kind: "garble"; at: number }
  | { kind: "edit"; at: number }
  | { kind: "foreign"; sameId: boolean }
  | { kind: "stale" };

const fraction = fc.double({ min: 0, max: 1, maxExcluded: true, noNaN: true });
const file = fc.constantFrom("log" as const, "snapshot" as const, "text" as const);
const damages: fc.Arbitrary<Damage> = fc.oneof(
  fc.constant({ kind: "none" as const }),
  fc.record({ kind: fc.constant("flip" as const), file, at: fraction, mask: fc.integer({ min: 1, max: 255 }) }),
  fc.record({ kind: fc.constant("zero" as const), file, at: fraction, bytes: fc.integer({ min: 1, max: 4096 }) }),
  fc.record({ kind: fc.constant("cut" as const), file, at: fraction }),
  fc.record({ kind: fc.constant("garble" as const), at: fraction }),
  fc.record({ kind: fc.constant("edit" as const), at: fraction }),
  fc.record({ kind: fc.constant("foreign" as const), sameId: fc.boolean() }),
  fc.constant({ kind: "stale" as const }),
);

let root: string;
let cleanup: () => Promise<void>;
/** The directory every case damages a copy of; `earlier`: its snapshot before the last work; `other`: another. */
let base: string;
let earlier: string;
let other: string;
let logBytes: number;

beforeAll(async () => {
  ({ dir: root, cleanup } = await tempDir("tiller-chaos-snapshots-"));
  base = join(root, "base");
  earlier = join(root, "earlier");
  other = join(root, "other");
  let rt = await open(base);
  await work(rt, "first");
  await rt.close();
  await cp(base, earlier, { recursive: true });
  rt = await open(base);
  await work(rt, "second");
  await rt.close();
  rt = await open(other);
  await work(rt, "another");
  await rt.close();
  logBytes = (await stat(join(base, "events.jsonl"))).size;
}, 120_000);
afterAll(() => cleanup());

const textFileOf = async (dir: string) => (await readdir(dir)).find((name) => name.startsWith("projections.text."));
async function pathOf(dir: string, which: "log" | "snapshot" | "text"): Promise<string | null> {
  if (which === "log") return join(dir, "events.jsonl");
  if (which === "snapshot") return join(dir, SNAPSHOT_FILE);
  const name = await textFileOf(dir);
  return name ? join(dir, name) : null;
}

/** The log's lines before the snapshot's point: where a damage hides if the snapshot is trusted. */
async function logLines(dir: string): Promise<Array<{ start: number; text: string }>> {
  const text = await readFile(join(dir, "events.jsonl"), "latin1");
  const lines: Array<{ start: number; text: string }> = [];
  for (let at = 0; at < text.length;) {
    const end = text.indexOf("\n", at);
    lines.push({ start: at, text: text.slice(at, end) });
    at = end + 1;
  }
  return lines;
}

async function damage(dir: string, d: Damage): Promise<string> {
  switch (d.kind) {
    case "none":
      return "none";
    case "flip":
    case "zero":
    case "cut": {
      const path = await pathOf(dir, d.file);
      if (!path) return "no text file";
      const bytes = await readFile(path);
      if (bytes.length === 0) return "empty";
      const at = Math.floor(d.at * bytes.length);
      if (d.kind === "cut") {
        await truncate(path, at);
        return `${d.file} cut at ${at} of ${bytes.length}`;
      }
      if (d.kind === "flip") bytes[at] = bytes[at]! ^ d.mask;
      else bytes.fill(0, at, Math.min(bytes.length, at + d.bytes));
      await writeFile(path, bytes);
      return `${d.file} ${d.kind} at ${at} of ${bytes.length}`;
    }
    case "garble":
    case "edit": {
      const lines = await logLines(dir);
      const line = lines[Math.floor(d.at * lines.length)]!;
      const bytes = await readFile(join(dir, "events.jsonl"));
      if (d.kind === "garble") bytes.fill(0x78, line.start, line.start + line.text.length);
      else {
        // A same-length edit that keeps the line valid: one letter of the event changed (a title, a text, a type).
        const letters = [...line.text.matchAll(/[a-z]/g)].filter((m) => m.index > line.text.indexOf('"event"'));
        const m = letters[Math.floor(d.at * 7919) % letters.length]!;
        bytes[line.start + m.index] = m[0] === "e" ? 0x61 : 0x65;
      }
      await writeFile(join(dir, "events.jsonl"), bytes);
      return `log line ${lines.indexOf(line) + 1} ${d.kind}d`;
    }
    case "foreign":
      for (const name of await readdir(dir)) if (name.startsWith("projections.")) await rm(join(dir, name));
      for (const name of await readdir(other)) {
        if (name.startsWith("projections.") || (d.sameId && name === "runtime.json")) {
          await cp(join(other, name), join(dir, name));
        }
      }
      return `another directory's snapshot${d.sameId ? ", with its identity" : ""}`;
    case "stale":
      await cp(join(earlier, SNAPSHOT_FILE), join(dir, SNAPSHOT_FILE));
      return "an earlier snapshot";
  }
}

let cases = 0;
describe(`chaos: damaged snapshots and logs (seed ${seed})`, () => {
  it("the data directory is bigger than one chain block (the background check has something to check)", () => {
    expect(logBytes).toBeGreaterThan(CHAIN_BLOCK);
  });

  it("every damage reopens to the log's read models, or to a typed failure; never a silent difference", async () => {
    let violations = 0;
    try {
      await fc.assert(
        fc.asyncProperty(damages, async (d) => {
          cases++;
          const dir = join(root, `case-${cases}`);
          const replay = join(root, `replay-${cases}`);
          try {
            await cp(base, dir, { recursive: true });
            const what = await damage(dir, d);
            // The truth: the same (damaged) log, replayed with no snapshot beside it.
            await cp(dir, replay, { recursive: true });
            for (const name of await readdir(replay)) if (name.startsWith("projections.")) await rm(join(replay, name));
            const truth = await outcomeOf(replay);
            const got = await outcomeOf(dir);
            if ("models" in got) {
              // Served without a word: it must be what the log says (and the log must be one that opens).
              expect("models" in truth ? truth.models : truth, what).toBe(got.models);
            }
          } catch (error) {
            violations++;
            throw error;
          } finally {
            await rm(dir, { recursive: true, force: true });
            await rm(replay, { recursive: true, force: true });
          }
        }),
        params(40),
      );
    } finally {
      tallyChaos("snapshotCorruption", { properties: 1, runs: cases, violations });
    }
  }, 600_000);
});
