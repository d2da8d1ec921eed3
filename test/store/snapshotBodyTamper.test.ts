import { cp, readFile, rm, writeFile } from "node:fs/promises";
import { join } from "node:path";
import { describe, expect, it } from "vitest";
import { createRuntime, createScriptedAdapter, keyedScript, type TillerRuntime } from "../../src/index.js";
import { tempDir } from "../support/files.js";

/**
 * A projection snapshot whose body was changed, at the same length and still well-formed, is not trusted: the reopen
 * replays the log (the read models are the log's, not the body's) and says that the snapshot was ignored.
 * Only public behaviour: the files in the data directory and the runtime's API. Of the snapshot file, only that its
 * first line is the header and the rest the body.
 */

const SNAPSHOT = "projections.snapshot";
const TITLE = "Tamper target";
const EDITED = "Tamper targes"; // one letter, same length: the body still parses

const open = (dataDir: string) =>
  createRuntime({
    dataDir,
    providers: {
      s: createScriptedAdapter({ script: keyedScript({ "[say]": [{ type: "text", text: "said" }] }) }),
    },
  });

/** What the read models say of every thread (not the log head they were read at: a warning moves it). */
async function readModels(rt: TillerRuntime) {
  const list = rt.listThreads();
  const threads = await Promise.all(list.map(async (t) => ({ ...(await rt.readThread(t.threadId)), seq: null })));
  return { list, threads };
}

/** The durable warnings about the snapshot file, from the first record to the head. */
function snapshotWarnings(rt: TillerRuntime): Promise<string[]> {
  const found: string[] = [];
  return new Promise((resolve) => {
    const stop = rt.subscribe({ afterSeq: 0 }, ({ seq, event }) => {
      if (event.type === "warning" && event.message.includes(SNAPSHOT)) found.push(event.message);
      if (seq === rt.head) {
        stop();
        resolve(found);
      }
    });
  });
}

describe("a snapshot body edited at the same length", () => {
  it("is ignored on reopen, with a warning: the read models are the log's", async () => {
    const { dir, cleanup } = await tempDir("tiller-snapshot-tamper-");
    try {
      const tampered = join(dir, "tampered");
      const replayed = join(dir, "replayed");
      const rt = await open(tampered);
      const { threadId } = await rt.createThread({ providerTarget: "s", title: TITLE, cwd: dir });
      expect((await rt.waitForRun((await rt.sendMessage({ threadId, text: "[say] hi" })).runId)).status).toBe(
        "completed",
      );
      await rt.close(); // writes the snapshot

      // The same log without a snapshot: what a full replay gives.
      await cp(tampered, replayed, { recursive: true });
      await rm(join(replayed, SNAPSHOT));

      const file = join(tampered, SNAPSHOT);
      const bytes = await readFile(file);
      const newline = bytes.indexOf(0x0a);
      expect(newline).toBeGreaterThan(0);
      const header = bytes.subarray(0, newline + 1);
      const body = bytes.subarray(newline + 1).toString("utf8");
      expect(body.split(TITLE)).toHaveLength(2); // the title is in the body, once
      const edited = Buffer.from(body.replace(TITLE, EDITED), "utf8");
      expect(edited.length).toBe(Buffer.byteLength(body));
      await writeFile(file, Buffer.concat([header, edited]));

      const full = await open(replayed);
      const reopened = await open(tampered);
      try {
        expect(reopened.listThreads().map((t) => t.title)).toEqual([TITLE]);
        expect(await readModels(reopened)).toEqual(await readModels(full));
        expect(await snapshotWarnings(reopened)).toEqual([expect.stringMatching(/ignored/)]);
        expect(await snapshotWarnings(full)).toEqual([]);
      } finally {
        await reopened.close();
        await full.close();
      }
    } finally {
      await cleanup();
    }
  });
});
