import { mkdir } from "node:fs/promises";
import { join } from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { createScriptedAdapter, keyedScript, ScriptedBackend, type TillerRuntime } from "../../src/index.js";
import { createInspectorFeed } from "../../inspector/server/feed.js";
import { startInspectorServer } from "../../inspector/server/server.js";
import type { InspectedRuntime } from "../../inspector/server/protocol.js";
import { nextEvent, openTestRuntime } from "../helpers/runtime.js";
import { openBrowser, testCatalog, WAIT, type Browser } from "./helpers.js";

/**
 * The live inspector in headless Chromium, on a runtime with the scripted provider: a run
 * watched through its states, approved from the page, and a steer that degrades to
 * interrupt-restart because the provider cannot steer natively.
 */

export const ARTIFACTS = join(import.meta.dirname, "artifacts");

const backend = new ScriptedBackend();
const adapter = createScriptedAdapter({
  backend,
  chunkDelayMs: 5,
  capabilities: { turns: { supportsActiveSteering: false } },
  script: keyedScript({
    "[approve]": [
      { type: "text", text: "Looking at the failing date test." },
      { type: "gate", name: "streaming" },
      { type: "command", command: "npm test -- date", output: "✓ date.test.ts (3 tests)", approval: true },
      { type: "text", text: "All green." },
    ],
    "[long]": [{ type: "text", text: "## Changelog\n - " }, { type: "hang" }],
    "[ask]": [{ type: "question", questions: [{ id: "color", question: "Which color?" }] }, { type: "text", text: "Noted." }],
  }),
});

let rt: TillerRuntime;
let cleanup: () => Promise<void>;
let url = "";
let browser: Browser;

beforeAll(async () => {
  ({ rt, cleanup } = await openTestRuntime({ scripted: adapter }, { inspect: { onListening: (u) => (url = u) } }));
  browser = await openBrowser();
});

afterAll(async () => {
  await browser?.close();
  await cleanup?.();
});

const actor = (id: string) => `[data-testid=actor][data-actor-id="${id}"]`;
const current = (path: string) => `[data-testid=statechart] g[data-state-path="${path}"][data-current="true"]`;

describe("live inspector in Chromium", () => {
  it("is refused without the token, over HTTP and WebSocket", async () => {
    const { page } = browser;
    const base = url.slice(0, url.indexOf("?"));
    const response = await page.goto(base);
    expect(response!.status()).toBe(401);
    expect(await page.textContent("body")).toContain("token is required");
    const outcome = await page.evaluate(
      (ws) =>
        new Promise<string>((resolve) => {
          const socket = new WebSocket(ws);
          socket.onopen = () => resolve("open");
          socket.onclose = (e) => resolve(`closed ${e.code}`);
        }),
      base.replace("http://", "ws://") + "ws",
    );
    expect(outcome).toBe("closed 1006");
  });

  it("shows the actor tree and the run's state as it streams, waits on an approval answered from the page, and completes", async () => {
    const { page } = browser;
    browser.errors.length = 0; // the refusals above were logged by the page on purpose
    await page.goto(url);
    await page.locator('[data-testid=connection][data-state="connected"]').waitFor(WAIT);

    const { threadId } = await rt.createThread({ providerTarget: "scripted", title: "Fix the date bug" });
    const { runId } = await rt.sendMessage({ threadId, text: "[approve] fix the failing date test" });

    // Streaming, held at the gate: the run's machine is in active.running.
    await page.locator(`${actor(runId)}[data-state="active.running"]`).waitFor(WAIT);
    await page.locator(`${actor(threadId)}[data-state="busy"]`).waitFor(WAIT);
    await page.locator(actor(runId)).click();
    await page.locator(current("active.running")).waitFor(WAIT);
    await expect.poll(() => page.locator('[data-testid=statechart] svg').getAttribute("data-machine"), WAIT).toBe("run");

    // Every kind of actor the run involves is in the tree.
    for (const kind of ["target", "session", "providerThread", "thread", "run", "attempt"]) {
      await page.locator(`[data-testid=actor][data-kind="${kind}"]`).first().waitFor(WAIT);
    }

    // The command asks for approval: the run waits, the request is respondable.
    backend.openGate("streaming");
    const opened = await nextEvent(rt, "request.opened", (e) => e.runId === runId);
    const request = page.locator(`[data-testid=request][data-request-id="${opened.event.requestId}"]`);
    await request.and(page.locator('[data-state="respondable"]')).waitFor(WAIT);
    await page.locator(`${actor(runId)}[data-state="active.waiting"]`).waitFor(WAIT);
    await page.locator(current("active.waiting")).waitFor(WAIT);
    await page.locator(`${actor(opened.event.requestId)}[data-state="pending"]`).waitFor(WAIT);
    await page.locator('[data-testid=event][data-type="request.opened"]').first().waitFor(WAIT);
    await mkdir(ARTIFACTS, { recursive: true });
    await page.screenshot({ path: join(ARTIFACTS, "inspector-mid-run.png"), fullPage: true });

    // Approved from the page: the run goes on to the end.
    await request.locator("[data-testid=approve]").click();
    const run = await rt.waitForRun(runId);
    expect(run.status).toBe("completed");
    const resolved = await nextEvent(rt, "request.resolved", (e) => e.requestId === opened.event.requestId);
    expect(resolved.event).toMatchObject({ by: "user", response: { kind: "decision", decision: "accept" } });
    await page.locator(`${actor(runId)}[data-state="completed"]`).waitFor(WAIT);
    await page.locator(current("completed")).waitFor(WAIT);
    await page.locator(`${actor(threadId)}[data-state="idle"]`).waitFor(WAIT);
    await request.waitFor({ state: "detached", ...WAIT });

    // The timeline, filtered to this run, shows only its events, with their seq.
    await page.locator("[data-testid=filter-run]").selectOption(runId);
    const rows = page.locator("[data-testid=event]");
    await page.locator('[data-testid=event][data-type="run.terminal"]').waitFor(WAIT);
    const runIds = await rows.evaluateAll((trs) => trs.map((tr) => tr.getAttribute("data-run-id")));
    expect(new Set(runIds)).toEqual(new Set([runId]));
    const seqs = await rows.evaluateAll((trs) => trs.map((tr) => Number(tr.getAttribute("data-seq"))));
    expect(seqs).toEqual([...seqs].sort((a, b) => b - a));
    await page.locator("[data-testid=filter-run]").selectOption("");
  });

  it("shows the degradation when a steer meets a provider without native steering", async () => {
    const { page } = browser;
    await page.locator('[data-testid=degradation-count]').waitFor(WAIT);
    expect(await page.locator("[data-testid=degradation]").count()).toBe(0);
    const { threadId } = await rt.createThread({ providerTarget: "scripted", title: "Changelog" });
    const { runId } = await rt.sendMessage({ threadId, text: "[long] write a changelog" });
    await nextEvent(rt, "node.delta", (e) => e.runId === runId);
    const receipt = await rt.sendMessage({ threadId, text: "one line only", mode: "steer" });
    expect(receipt).toMatchObject({ disposition: "steered", via: "interrupt_restart" });

    const degradation = page.locator('[data-testid=degradation][data-policy="steer_by_interrupt_restart"]');
    await degradation.waitFor(WAIT);
    expect(await degradation.getAttribute("data-outcome")).toBe("fallback");
    expect(await degradation.getAttribute("data-capability")).toBe("turns.supportsActiveSteering");
    expect(await degradation.textContent()).toContain("interrupt it, restart the run");
    // The session's record says why: no native steering.
    await page.locator('[data-testid=session-capabilities] summary').first().click();
    expect(await page.locator('[data-testid=session-capabilities] [data-capability="turns.supportsActiveSteering"]').first().textContent()).toContain("✗");

    expect((await rt.waitForRun(runId)).status).toBe("completed");
    await page.locator(`${actor(runId)}[data-state="completed"]`).waitFor(WAIT);
    // Both attempts are in the tree: the superseded one and the restart.
    await page.locator(`${actor(runId)} + ul [data-kind="attempt"][data-status="superseded"]`).waitFor(WAIT);
    expect(browser.errors).toEqual([]);
  });

  it("answers a question from the page, and offers no answer to a request that can no longer be answered", async () => {
    const { page } = browser;
    const { threadId } = await rt.createThread({ providerTarget: "scripted", title: "Question" });
    const { runId } = await rt.sendMessage({ threadId, text: "[ask] pick a color" });
    const opened = await nextEvent(rt, "request.opened", (e) => e.runId === runId);
    const request = page.locator(`[data-testid=request][data-request-id="${opened.event.requestId}"][data-state="respondable"]`);
    await request.waitFor(WAIT);
    await request.locator("[data-testid=answer]").fill("blue");
    await request.locator("[data-testid=submit-answers]").click();
    const resolved = await nextEvent(rt, "request.resolved", (e) => e.requestId === opened.event.requestId);
    expect(resolved.event.response).toEqual({ kind: "answers", answers: { color: "blue" } });
    expect((await rt.waitForRun(runId)).status).toBe("completed");
    await page.locator(`${actor(runId)}[data-state="completed"]`).waitFor(WAIT);

    // A request whose run ends unanswered expires: the page says so and offers no answer.
    const second = await rt.sendMessage({ threadId, text: "[ask] again" });
    const again = await nextEvent(rt, "request.opened", (e) => e.runId === second.runId);
    await page.locator(`[data-testid=request][data-request-id="${again.event.requestId}"][data-state="respondable"]`).waitFor(WAIT);
    await rt.interrupt({ runId: second.runId });
    await rt.waitForRun(second.runId);
    await page.locator(`${actor(again.event.requestId)}:not([data-status="pending"])`).waitFor(WAIT);
    const closed = await nextEvent(rt, "request.closed", (e) => e.requestId === again.event.requestId);
    const expired = page.locator(`[data-testid=request][data-request-id="${again.event.requestId}"]`);
    // The runtime no longer offers it: the page shows what the log recorded, without buttons.
    await expired.and(page.locator(`[data-state="${closed.event.status}"]`)).waitFor(WAIT);
    expect(await expired.locator("button").count()).toBe(0);
  });

  it("reconnects the page to a restarted server, and says so when the token it holds is no longer valid", async () => {
    const token = "fedcba9876543210fedcba9876543210";
    let server = await startInspectorServer({ token });
    const port = server.port;
    const feed = createInspectorFeed({ url: server.feedUrl, reconnect: { minMs: 20, maxMs: 200 } });
    const other = await openTestRuntime({ s: createScriptedAdapter({}) }, { inspect: feed.inspect });
    try {
      feed.attach(other.rt as unknown as InspectedRuntime, await testCatalog(), ["s"]);
      const { threadId } = await other.rt.createThread({ providerTarget: "s", title: "Before the restart" });
      const { page } = browser;
      await page.goto(server.url);
      await page.locator(actor(threadId)).waitFor(WAIT);

      await server.close();
      await page.locator('[data-testid=connection][data-state="disconnected"]').waitFor(WAIT);
      server = await startInspectorServer({ port, token });
      await page.locator('[data-testid=connection][data-state="connected"]').waitFor(WAIT);
      const { runId } = await other.rt.sendMessage({ threadId, text: "after the restart" });
      await page.locator(`${actor(runId)}[data-state="completed"]`).waitFor(WAIT);

      // A server started again with another token: the page says its token is refused.
      await server.close();
      server = await startInspectorServer({ port });
      await page.locator('[data-testid=connection][data-state="refused"]').waitFor(WAIT);
    } finally {
      feed.close();
      await other.cleanup();
      await server.close();
    }
  });
});
