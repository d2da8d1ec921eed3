import { mkdir } from "node:fs/promises";
import { join } from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { createScriptedAdapter, keyedScript, ScriptedBackend, type TillerRuntime } from "../../src/index.js";
import { createInspectorFeed } from "../../inspector/server/feed.js";
import { startInspectorServer } from "../../inspector/server/server.js";
import type { FeedCommand, InspectedRuntime, LogEntry } from "../../inspector/server/protocol.js";
import { nextEvent, openTestRuntime } from "../support/runtime.js";
import { fakeProducer, openBrowser, testCatalog, tokenOf, WAIT, type Browser } from "./helpers.js";

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
    "[ask]": [
      { type: "question", questions: [{ id: "color", question: "Which color?" }] },
      { type: "text", text: "Noted." },
    ],
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
    const base = `${new URL(url).origin}/`;
    for (const address of [base, `${base}?token=${tokenOf(url)}`, `${base}${tokenOf(url).slice(1)}/`]) {
      const response = await page.goto(address);
      expect(response!.status(), address).toBe(401);
      expect(await page.textContent("body")).toContain("token is required");
    }
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

  it(
    "shows the actor tree and the run's state as it streams, " +
      "waits on an approval answered from the page, and completes",
    async () => {
      const { page } = browser;
      browser.errors.length = 0; // the refusals above were logged by the page on purpose
      await page.goto(url);
      await page.locator('[data-testid=connection][data-state="connected"]').waitFor(WAIT);
      // The token is in the page's path, nowhere else: no cookie (cookies reach every port of 127.0.0.1).
      expect(await browser.context.cookies()).toEqual([]);
      expect(page.url()).toBe(url);

      const { threadId } = await rt.createThread({ providerTarget: "scripted", title: "Fix the date bug" });
      const { runId } = await rt.sendMessage({ threadId, text: "[approve] fix the failing date test" });

      // Streaming, held at the gate: the run's machine is in active.running.
      await page.locator(`${actor(runId)}[data-state="active.running"]`).waitFor(WAIT);
      await page.locator(`${actor(threadId)}[data-state="busy"]`).waitFor(WAIT);
      await page.locator(actor(runId)).click();
      await page.locator(current("active.running")).waitFor(WAIT);
      await expect
        .poll(() => page.locator("[data-testid=statechart] svg").getAttribute("data-machine"), WAIT)
        .toBe("run");

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
    },
  );

  it("shows the degradation when a steer meets a provider without native steering", async () => {
    const { page } = browser;
    await page.locator("[data-testid=degradation-count]").waitFor(WAIT);
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
    await page.locator("[data-testid=session-capabilities] summary").first().click();
    expect(
      await page
        .locator('[data-testid=session-capabilities] [data-capability="turns.supportsActiveSteering"]')
        .first()
        .textContent(),
    ).toContain("✗");

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
    const request = page.locator(
      `[data-testid=request][data-request-id="${opened.event.requestId}"][data-state="respondable"]`,
    );
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
    await page
      .locator(`[data-testid=request][data-request-id="${again.event.requestId}"][data-state="respondable"]`)
      .waitFor(WAIT);
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

  it(
    "answers a Claude-shaped question (its id is its text) without the page ever holding that text, " +
      "and keeps each request's refusal to that request until it settles",
    async () => {
      // The runtime's side is played by the test, so it can refuse an answer at will.
      const server = await startInspectorServer();
      const producer = await fakeProducer(server.feedUrl);
      const question = "Should I delete prod?";
      const secrets = [question, "Danger", "Yes, drop it", "Drops every table", "List the secret folder"];
      const at = new Date().toISOString();
      const records: LogEntry[] = [
        { type: "thread.created", threadId: "thr_c", title: "Claude", providerTarget: "claude" },
        { type: "run.created", threadId: "thr_c", runId: "run_c", ordinal: 1 },
        {
          type: "request.opened",
          threadId: "thr_c",
          runId: "run_c",
          requestId: "req_q",
          payload: {
            kind: "user_input",
            questions: [
              {
                id: question,
                question,
                header: "Danger",
                options: [{ label: "Yes, drop it", description: "Drops every table" }],
              },
            ],
          },
        },
        {
          type: "request.opened",
          threadId: "thr_c",
          runId: "run_c",
          requestId: "req_a",
          payload: { kind: "command", command: "ls", reason: "List the secret folder" },
        },
        {
          type: "request.opened",
          threadId: "thr_c",
          runId: "run_c",
          requestId: "req_b",
          payload: { kind: "command", command: "pwd" },
        },
      ].map((event, i) => ({ seq: i + 1, at, event }));
      producer.send({ kind: "log", records });
      producer.send({
        kind: "affordances",
        threadId: "thr_c",
        value: { requests: ["req_q", "req_a", "req_b"].map((requestId) => ({ requestId, state: "respondable" })) },
      });
      const { page } = browser;
      const request = (id: string) =>
        page.locator(`[data-testid=request][data-request-id="${id}"][data-state="respondable"]`);
      const answered = (id: string) =>
        producer.until((c) => c.command.requestId === id && !handled.has(c.id)).then((c) => (handled.add(c.id), c));
      const handled = new Set<string>();
      const settle = (c: FeedCommand, error: string | null) =>
        producer.send({ kind: "respond.result", id: c.id, ok: error === null, error });
      browser.errors.length = 0; // the previous test's refusals were logged by the page on purpose
      try {
        await page.goto(server.url);
        for (const id of ["req_q", "req_a", "req_b"]) await request(id).waitFor(WAIT);
        await page.locator('[data-testid=event][data-type="request.opened"]').first().waitFor(WAIT);
        const html = await page.content();
        for (const secret of secrets) expect(html, secret).not.toContain(secret);
        const input = request("req_q").locator("[data-testid=answer]");
        expect(await input.getAttribute("placeholder")).toBe("answer to ‹question 1›");

        // Answered from the page by placeholder; the runtime gets it keyed by the real id.
        await input.fill("no");
        await request("req_q").locator("[data-testid=submit-answers]").click();
        const answer = await answered("req_q");
        expect(answer.command.response).toEqual({ kind: "answers", answers: { [question]: "no" } });
        settle(answer, null);

        // The runtime refuses the answer to req_a: the error shows on req_a, which can be answered again.
        await request("req_a").locator("[data-testid=approve]").click();
        const first = await answered("req_a");
        await request("req_a").locator("[data-testid=approve]:disabled").waitFor(WAIT); // in flight
        settle(first, "stale: try again");
        await request("req_a").locator('[data-testid=respond-error]:has-text("stale: try again")').waitFor(WAIT);
        await request("req_a").locator("[data-testid=approve]:enabled").waitFor(WAIT);

        // req_b in flight does not wear req_a's error.
        await request("req_b").locator("[data-testid=approve]").click();
        const second = await answered("req_b");
        await request("req_b").locator("[data-testid=approve]:disabled").waitFor(WAIT);
        expect(await request("req_b").locator("[data-testid=respond-error]").count()).toBe(0);
        settle(second, null);
        await request("req_b").locator("[data-testid=approve]:enabled").waitFor(WAIT);
        expect(await request("req_b").locator("[data-testid=respond-error]").count()).toBe(0);
        expect(await request("req_a").locator("[data-testid=respond-error]").count()).toBe(1);

        // Answered again and accepted: req_a's error is gone.
        await request("req_a").locator("[data-testid=approve]").click();
        await request("req_a")
          .locator("[data-testid=respond-error]")
          .waitFor({ state: "detached", ...WAIT });
        settle(await answered("req_a"), null);
        await request("req_a").locator("[data-testid=approve]:enabled").waitFor(WAIT);
        expect(await page.locator("[data-testid=respond-error]").count()).toBe(0);
        expect(browser.errors).toEqual([]);
      } finally {
        producer.close();
        await server.close();
      }
    },
  );
});
