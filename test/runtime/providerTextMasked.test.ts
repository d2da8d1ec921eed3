import { readdir, readFile } from "node:fs/promises";
import { join } from "node:path";
import { describe, expect, it } from "vitest";
import { createRuntime, createScriptedAdapter, keyedScript, sequentialIds } from "../../src/index.js";
import { openTestRuntime } from "../support/runtime.js";

/**
 * What a provider says is masked before the log keeps it (docs/events.md: failure texts are masked): a turn that
 * fails with a provider's "Incorrect API key provided: sk-proj-..." leaves no piece of the key in the data directory
 * (the log, the projection snapshot and its text file), and the read models show the message masked, live and
 * reopened.
 */

const KEY_BODY = "proj-Qm7vR2xT9kLp4ZsW8nB3cY6dF1gH5jK0";
const MESSAGE = `Incorrect API key provided: sk-${KEY_BODY}. You can find your API key at https://example.com.`;

/** Every file of the data directory the log and its snapshots write, as text. */
async function storedFiles(dataDir: string): Promise<Map<string, string>> {
  const names = (await readdir(dataDir)).filter((n) => n === "events.jsonl" || n.startsWith("projections."));
  const files = new Map<string, string>();
  for (const name of names) files.set(name, await readFile(join(dataDir, name), "utf8"));
  return files;
}

/** Any 8 characters of the key in a row. */
const pieces = (secret: string): string[] =>
  Array.from({ length: secret.length - 7 }, (_, i) => secret.slice(i, i + 8));

describe("a provider's failure message", () => {
  it("is stored masked: no piece of an API key in events.jsonl, projections.snapshot or its text file", async () => {
    const adapter = () =>
      createScriptedAdapter({ script: keyedScript({ "[fail]": [{ type: "fail", message: MESSAGE }] }) });
    const { rt, dataDir, cleanup } = await openTestRuntime({ s: adapter() });
    let closed = false;
    try {
      const { threadId } = await rt.createThread({ providerTarget: "s" });
      const { runId } = await rt.sendMessage({ threadId, text: "[fail] go" });
      const run = await rt.waitForRun(runId);
      expect(run.status).toBe("failed");
      expect(run.failure?.message).toContain("Incorrect API key provided: sk-[redacted]");
      expect(run.failure?.message).not.toContain(KEY_BODY.slice(5, 13));
      await rt.close();
      closed = true;

      const files = await storedFiles(dataDir);
      expect([...files.keys()]).toEqual(expect.arrayContaining(["events.jsonl", "projections.snapshot"]));
      expect([...files.keys()].some((n) => n.startsWith("projections.text."))).toBe(true);
      for (const [name, text] of files) {
        const found = pieces(KEY_BODY).filter((p) => text.includes(p));
        expect(found, name).toEqual([]);
      }

      // Reopened from the snapshot: the same masked message.
      const reopened = await createRuntime({ dataDir, providers: { s: adapter() }, ids: sequentialIds() });
      try {
        const thread = await reopened.readThread(threadId);
        const again = thread.runs.find((r) => r.runId === runId);
        expect(again?.failure?.message).toBe(run.failure?.message);
      } finally {
        await reopened.close();
      }
    } finally {
      if (!closed) await rt.close();
      await cleanup();
    }
  });
});
