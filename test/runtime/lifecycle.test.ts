import { execFile } from "node:child_process";
import { appendFile, mkdir, readdir, readlink, writeFile } from "node:fs/promises";
import { join } from "node:path";
import { promisify } from "node:util";
import { describe, expect, it } from "vitest";
import { createRuntime, createScriptedAdapter, type ProviderAdapter, type RuntimeFailure } from "../../src/index.js";
import { nextEvent, ofType, openTestRuntime, override, until } from "../support/runtime.js";
import { openRuntime } from "../support/internals.js";

/**
 * Smaller promises: what open cut is told, closed runtimes are released, forks after a rollback, listener errors are
 * reported, an adapter that fails to close.
 */
describe("runtime lifecycle", () => {
  it("reports a complete last log line that does not parse: cut at open, said in the log and in recovery", async () => {
    const { rt, dataDir, cleanup } = await openTestRuntime({ s: createScriptedAdapter() });
    try {
      await rt.createThread({ providerTarget: "s" });
      await rt.close();
      await appendFile(join(dataDir, "events.jsonl"), '{"seq":999,"garbage":true}\n');
      const reopened = await openRuntime({ dataDir, providers: { s: createScriptedAdapter() } });
      try {
        expect(reopened.recovery.cut).toMatchObject({
          complete: true,
          bytes: 27,
          reason: expect.stringMatching(/invalid record/),
        });
        const warning = await nextEvent(reopened, "warning", (e) => e.message.includes("was cut at open"));
        expect(warning.event.message).toMatch(
          /line \d+ \(27 bytes\) was cut at open: a complete last line that does not parse/,
        );
        expect(reopened.listThreads()).toHaveLength(1);
      } finally {
        await reopened.close();
      }
    } finally {
      await cleanup();
    }
  });

  it("a closed runtime is released: no idle or grace timer keeps it reachable", async () => {
    const { stdout } = await promisify(execFile)(
      process.execPath,
      ["--expose-gc", "--import", "tsx", "test/runtime/closeReleaseChild.ts"],
      { timeout: 120_000 },
    );
    const result = JSON.parse(stdout.trim()) as { cycles: number; alive: number };
    expect(result).toEqual({ cycles: 30, alive: 0, which: [] });
  });

  it("forkThread without afterRunId right after a rollback forks after the last run that still counts", async () => {
    const { rt, events, cleanup } = await openTestRuntime({ s: createScriptedAdapter() });
    try {
      const { threadId } = await rt.createThread({ providerTarget: "s" });
      const first = await rt.sendMessage({ threadId, text: "one" });
      await rt.waitForRun(first.runId);
      const second = await rt.sendMessage({ threadId, text: "two" });
      await rt.waitForRun(second.runId);
      await rt.rollback({ threadId, toRunId: first.runId });
      expect(rt.affordances(threadId).fork.find((f) => f.afterRunId === first.runId)).toMatchObject({
        source: expect.not.stringMatching("unavailable"),
      });
      const fork = await rt.forkThread({ threadId });
      expect(ofType(events, "fork.recorded").find((e) => e.threadId === fork.threadId)?.forkedFromRunId).toBe(
        first.runId,
      );
    } finally {
      await cleanup();
    }
  });

  it("a second close() resolves only once the directory is given back", async () => {
    const base = createScriptedAdapter();
    const adapter = override(base, {
      close: () => new Promise<void>((done) => setImmediate(() => void base.close().then(done))),
    });
    const { rt, dataDir, cleanup } = await openTestRuntime({ s: adapter });
    try {
      void rt.close();
      await rt.close();
      const again = await openRuntime({ dataDir, providers: { s: createScriptedAdapter() } });
      await again.close();
    } finally {
      await cleanup();
    }
  });

  it("an open that fails after the log was opened gives the log back (no file handle left)", async () => {
    const { rt, dataDir, cleanup } = await openTestRuntime({ s: createScriptedAdapter() });
    await rt.close();
    try {
      await mkdir(join(dataDir, "runtimes"), { recursive: true });
      await writeFile(join(dataDir, "runtimes", "hosts.json"), "{ not json");
      const log = join(dataDir, "events.jsonl");
      const handlesOnLog = async () =>
        (
          await Promise.all(
            (await readdir("/proc/self/fd")).map((fd) => readlink(`/proc/self/fd/${fd}`).catch(() => "")),
          )
        ).filter((target) => target === log).length;
      const before = await handlesOnLog();
      for (let i = 0; i < 3; i++)
        await expect(openRuntime({ dataDir, providers: { s: createScriptedAdapter() } })).rejects.toMatchObject({
          code: "store_corrupt",
        });
      expect(await handlesOnLog()).toBe(before);
    } finally {
      await cleanup();
    }
  });

  it("a subscribe listener that throws is reported through onFailure, and delivery goes on", async () => {
    const failures: RuntimeFailure[] = [];
    const { rt, cleanup } = await openTestRuntime(
      { s: createScriptedAdapter() },
      { onFailure: (f) => failures.push(f) },
    );
    try {
      const seen: number[] = [];
      rt.subscribe({ afterSeq: 0 }, () => {
        throw new Error("listener bug");
      });
      rt.subscribe({ afterSeq: 0 }, (r) => seen.push(r.seq));
      await rt.createThread({ providerTarget: "s" });
      await until("delivery to the healthy listener", () => seen.length > 0 && failures.length > 0);
      expect(failures[0]).toMatchObject({ kind: "subscriber_threw", error: { message: "listener bug" } });
    } finally {
      await cleanup();
    }
  });
});

describe("an adapter whose close() throws, or that has none", () => {
  /** `endsStream`: whether the failing close() still ended the adapter's event stream first. */
  for (const endsStream of [true, false]) {
    it(
      `still releases the data directory (close throws ` +
        `${endsStream ? "after" : "before"} ending its event stream) (review a9)`,
      async () => {
        const base = createScriptedAdapter();
        const adapter = override(base, {
          close: async () => {
            if (endsStream) await base.close();
            throw new Error("could not stop the provider host");
          },
        });
        const first = await openTestRuntime({ s: adapter });
        const { threadId } = await first.rt.createThread({ providerTarget: "s" });
        await first.rt.waitForRun((await first.rt.sendMessage({ threadId, text: "hi" })).runId);
        await first.rt.close();
        expect(first.rt.closed).toBe(true);
        const second = await openTestRuntime({ s: createScriptedAdapter() }, { dataDir: first.dataDir });
        try {
          expect(second.rt.listThreads().map((t) => t.threadId)).toEqual([threadId]);
        } finally {
          await second.cleanup();
        }
      },
    );
  }

  it("an adapter without close() is refused at open, without locking the directory (review a9)", async () => {
    const { close: _close, ...rest } = createScriptedAdapter();
    const { rt, dataDir, cleanup } = await openTestRuntime({ s: createScriptedAdapter() });
    await rt.close();
    try {
      await expect(createRuntime({ dataDir, providers: { s: rest as ProviderAdapter } })).rejects.toMatchObject({
        code: "invalid_input",
        field: "providers.s.close",
      });
      const reopened = await createRuntime({ dataDir, providers: { s: createScriptedAdapter() } });
      await reopened.close();
    } finally {
      await cleanup();
    }
  });
});
