import { spawn, type ChildProcess } from "node:child_process";
import { readFile, stat } from "node:fs/promises";
import { join } from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { runInspect } from "../../src/cli/inspect.js";
import { createScriptedAdapter, keyedScript } from "../../src/index.js";
import { readRecordedLog } from "../../inspector/server/replay.js";
import type { LogEntry, PageMessage } from "../../inspector/server/protocol.js";
import { nextEvent, openTestRuntime } from "../support/runtime.js";
import { tempDir } from "../support/files.js";
import { openBrowser, pageClient, pageSocketUrl, WAIT, type Browser } from "./helpers.js";

type View = Extract<PageMessage, { kind: "view" }>;

/**
 * Replay: a data directory recorded by a runtime (an approved command, then a steer that
 * degrades to interrupt-restart) opened by `tiller inspect --replay`, read-only, and stepped
 * through in headless Chromium.
 */

let dataDir: string;
let removeDir: () => Promise<void>;
let runId = "";
let records: LogEntry[] = [];
let browser: Browser;

beforeAll(async () => {
  ({ dir: dataDir, cleanup: removeDir } = await tempDir("tiller-replay-"));
  const adapter = createScriptedAdapter({
    capabilities: { turns: { supportsActiveSteering: false } },
    script: keyedScript({
      "[approve]": [
        { type: "text", text: "Running the tests." },
        { type: "command", command: "npm test", output: "ok", approval: true },
        { type: "text", text: "Done." },
      ],
      "[long]": [{ type: "text", text: "working" }, { type: "hang" }],
    }),
  });
  const { rt } = await openTestRuntime({ scripted: adapter }, { dataDir });
  rt.subscribe({ afterSeq: 0 }, ({ event }) => {
    if (event.type === "request.opened")
      void rt.respond({ requestId: event.requestId, response: { kind: "decision", decision: "accept" } });
  });
  const { threadId } = await rt.createThread({ providerTarget: "scripted", title: "Recorded" });
  runId = (await rt.sendMessage({ threadId, text: "[approve] run the tests" })).runId;
  await rt.waitForRun(runId);
  const second = await rt.sendMessage({ threadId, text: "[long] changelog" });
  await nextEvent(rt, "node.delta", (e) => e.runId === second.runId);
  await rt.sendMessage({ threadId, text: "shorter", mode: "steer" });
  await rt.waitForRun(second.runId);
  await rt.close();
  records = await readRecordedLog(dataDir);
  browser = await openBrowser();
});

afterAll(async () => {
  await browser?.close();
  await removeDir?.();
});

const actor = (id: string) => `[data-testid=actor][data-actor-id="${id}"]`;
const seqOf = (match: (r: LogEntry) => boolean) => records.find(match)!.seq;

describe("replay", () => {
  it(
    "steps backwards and forwards through a recorded data directory, " + "rebuilding states, without touching it",
    async () => {
      const before = await readFile(join(dataDir, "events.jsonl"), "utf8");
      const stop = new AbortController();
      let output = "";
      const serving = runInspect({
        port: 0,
        dataDir: "unused",
        replay: dataDir,
        showText: false,
        yes: false,
        write: (t) => (output += t),
        signal: stop.signal,
      });
      try {
        await expect.poll(() => /http:\S+/.exec(output)?.[0], WAIT).toBeTruthy();
        const url = /http:\S+/.exec(output)![0];
        const { page } = browser;
        await page.goto(url);
        await page.locator('[data-testid=connection][data-state="replay"]').waitFor(WAIT);
        const head = records.at(-1)!.seq;
        const position = page.locator("[data-testid=replay-position]");
        await page.locator(`[data-testid=replay-position][data-seq="${head}"]`).waitFor(WAIT);
        // Serving the replay, with the page on it: the data directory has no lock (none was taken).
        await expect(stat(join(dataDir, "LOCK"))).rejects.toMatchObject({ code: "ENOENT" });

        // At the end: the first run completed, the degradation fired.
        await page.locator(`${actor(runId)}[data-state="completed"]`).waitFor(WAIT);
        await page.locator('[data-testid=degradation][data-policy="steer_by_interrupt_restart"]').waitFor(WAIT);
        await page.locator(actor(runId)).click();
        await page
          .locator('[data-testid=statechart] g[data-state-path="completed"][data-current="true"]')
          .waitFor(WAIT);

        // Back to the moment the run started waiting on its approval.
        const waiting = seqOf(
          (r) => r.event.type === "run.state" && r.event.runId === runId && r.event.status === "waiting",
        );
        await page.locator("[data-testid=replay-slider]").fill(String(waiting));
        await page.locator(`[data-testid=replay-position][data-seq="${waiting}"]`).waitFor(WAIT);
        await page.locator(`${actor(runId)}[data-state="active.waiting"]`).waitFor(WAIT);
        await page
          .locator('[data-testid=statechart] g[data-state-path="active.waiting"][data-current="true"]')
          .waitFor(WAIT);
        await page.locator('[data-testid=request][data-state="pending"]').waitFor(WAIT);
        expect(await page.locator("[data-testid=request] button").count()).toBe(0); // replay answers nothing
        expect(await page.locator("[data-testid=degradation]").count()).toBe(0);
        // The timeline shows the log up to here and no further.
        await page.locator(`[data-testid=event][data-seq="${waiting}"]`).waitFor(WAIT);
        expect(await page.locator(`[data-testid=event][data-seq="${waiting + 1}"]`).count()).toBe(0);

        // One step back: still running; one step forward: waiting again.
        await page.locator("[data-testid=replay-back]").click();
        await page.locator(`[data-testid=replay-position][data-seq="${waiting - 1}"]`).waitFor(WAIT);
        await page.locator(`${actor(runId)}[data-state="active.running"]`).waitFor(WAIT);
        await page
          .locator('[data-testid=statechart] g[data-state-path="active.running"][data-current="true"]')
          .waitFor(WAIT);
        await page.locator("[data-testid=replay-forward]").click();
        await page.locator(`${actor(runId)}[data-state="active.waiting"]`).waitFor(WAIT);

        // The very start: nothing exists yet. The end: everything again.
        await page.locator("[data-testid=replay-start]").click();
        await page.locator('[data-testid=replay-position][data-seq="0"]').waitFor(WAIT);
        await page.locator(actor(runId)).waitFor({ state: "detached", ...WAIT });
        await page.locator("[data-testid=replay-end]").click();
        await page.locator(`${actor(runId)}[data-state="completed"]`).waitFor(WAIT);
        expect(await position.textContent()).toContain(`seq ${head} / ${head}`);
        expect(browser.errors).toEqual([]);
      } finally {
        stop.abort();
        await serving;
      }
      // Read-only: the log is byte for byte what the runtime left.
      expect(await readFile(join(dataDir, "events.jsonl"), "utf8")).toBe(before);
    },
  );

  it("replays a directory a live runtime holds, without disturbing its lock or its work", async () => {
    const { dir, cleanup } = await tempDir("tiller-replay-held-");
    const { rt } = await openTestRuntime({ s: createScriptedAdapter({}) }, { dataDir: dir });
    const stop = new AbortController();
    let serving: Promise<void> | null = null;
    try {
      const { threadId } = await rt.createThread({ providerTarget: "s", title: "Held" });
      const first = await rt.sendMessage({ threadId, text: "before the replay" });
      await rt.waitForRun(first.runId);
      const lock = await readFile(join(dir, "LOCK"), "utf8");

      let output = "";
      serving = runInspect({
        port: 0,
        dataDir: "unused",
        replay: dir,
        showText: false,
        yes: false,
        write: (t) => (output += t),
        signal: stop.signal,
      });
      await expect.poll(() => /http:\S+/.exec(output)?.[0], WAIT).toBeTruthy();
      const client = await pageClient(pageSocketUrl(/http:\S+/.exec(output)![0]));
      try {
        // The replay shows what the runtime recorded so far.
        await client.until(
          (m): m is View =>
            m.kind === "view" &&
            m.tree.some(
              (n) => n.id === threadId && n.children.some((r) => r.id === first.runId && r.status === "completed"),
            ),
        );
      } finally {
        client.close();
      }
      // The runtime still holds its lock, unchanged, and goes on working while the replay serves.
      expect(await readFile(join(dir, "LOCK"), "utf8")).toBe(lock);
      const second = await rt.sendMessage({ threadId, text: "during the replay" });
      expect((await rt.waitForRun(second.runId)).status).toBe("completed");
      expect(await readFile(join(dir, "LOCK"), "utf8")).toBe(lock);
    } finally {
      stop.abort();
      await serving;
      await rt.close();
      await cleanup();
    }
  });

  it("is what `tiller inspect --replay` serves, behind its token", async () => {
    const child: ChildProcess = spawn(
      process.execPath,
      ["--import", "tsx", "src/cli/main.ts", "inspect", "--replay", dataDir],
      {
        cwd: join(import.meta.dirname, "..", ".."),
        stdio: ["ignore", "pipe", "pipe"],
      },
    );
    try {
      let output = "";
      child.stdout!.on("data", (d) => (output += d));
      child.stderr!.on("data", (d) => (output += d));
      await expect.poll(() => /http:\S+/.exec(output)?.[0], WAIT).toBeTruthy();
      const url = /http:\S+/.exec(output)![0];
      expect(output).toContain("read-only");
      expect((await fetch(url)).status).toBe(200);
      expect((await fetch(`${new URL(url).origin}/`)).status).toBe(401);
    } finally {
      const exited = new Promise((resolve) => child.once("exit", resolve));
      child.kill("SIGTERM");
      await exited;
    }
  });
});
