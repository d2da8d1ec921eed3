import { mkdtemp, rm, writeFile } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { describe, expect, it } from "vitest";
import { createScriptedAdapter, keyedScript } from "../../src/index.js";
import { nextEvent, openTestRuntime, override, rejection, until } from "../support/runtime.js";

/**
 * No run stays `running` forever: a silent turn is checked, a broken script step fails its turn, callers can bound
 * their waits.
 */
describe("turn watchdog", () => {
  it(
    "fails a turn the provider accepted but never reports (turn_silent); " + "the thread goes on with a new run",
    async () => {
      const base = createScriptedAdapter();
      let mute = true;
      // A provider that takes the turn and then says nothing, ever (the first turn only).
      const adapter = override(base, {
        sendRun: async (input) => (mute ? ((mute = false), { turnRef: null }) : base.sendRun(input)),
        // The provider cannot say about the muted turn; the next one it vouches for (a loaded machine may be slow).
        isTurnAlive: async (input) =>
          (mute === false && (await base.isTurnAlive!(input))) || Promise.reject(new Error("no such turn")),
      });
      const { rt, cleanup } = await openTestRuntime({ s: adapter }, { turnSilenceMs: 50 });
      try {
        const { threadId } = await rt.createThread({ providerTarget: "s" });
        const { runId } = await rt.sendMessage({ threadId, text: "hello" });
        const run = await rt.waitForRun(runId);
        expect(run.status).toBe("failed");
        expect(run.failure).toMatchObject({ failureClass: "turn_silent" });
        expect(run.failure?.message).toMatch(
          /sent nothing for 50 ms and the provider could not be asked: no such turn/,
        );
        const next = await rt.sendMessage({ threadId, text: "again" });
        expect(next.disposition).toBe("started");
        expect((await rt.waitForRun(next.runId)).status).toBe("completed");
      } finally {
        await cleanup();
      }
    },
  );

  it("asks the provider, and leaves a silent turn that it vouches for running", async () => {
    const base = createScriptedAdapter({ script: keyedScript({ "[hang]": [{ type: "hang" }] }) });
    let asked = 0;
    const adapter = override(base, {
      isTurnAlive: async (input) => {
        asked += 1;
        return base.isTurnAlive!(input);
      },
    });
    const { rt, cleanup } = await openTestRuntime({ s: adapter }, { turnSilenceMs: 20 });
    try {
      const { threadId } = await rt.createThread({ providerTarget: "s" });
      const { runId } = await rt.sendMessage({ threadId, text: "[hang] wait" });
      await until("the provider to be asked three times", () => asked >= 3);
      expect(rt.views.runs.get(runId)!.status).toBe("running");
      await rt.interrupt({ runId });
      expect((await rt.waitForRun(runId)).status).toBe("interrupted");
    } finally {
      await cleanup();
    }
  });

  it("fails the turn when the provider says it is no longer running", async () => {
    const base = createScriptedAdapter({ script: keyedScript({ "[hang]": [{ type: "hang" }] }) });
    const adapter = override(base, { isTurnAlive: async () => false });
    const { rt, cleanup } = await openTestRuntime({ s: adapter }, { turnSilenceMs: 20 });
    try {
      const { threadId } = await rt.createThread({ providerTarget: "s" });
      const { runId } = await rt.sendMessage({ threadId, text: "[hang] wait" });
      const run = await rt.waitForRun(runId);
      expect([run.status, run.failure?.failureClass]).toEqual(["failed", "turn_silent"]);
      expect(run.failure?.message).toMatch(/says the turn is no longer running/);
    } finally {
      await cleanup();
    }
  });

  it(
    "a provider that never answers whether the turn is alive cannot hold the run: " + "it fails as turn_silent",
    async () => {
      const base = createScriptedAdapter({ script: keyedScript({ "[hang]": [{ type: "hang" }] }) });
      const adapter = override(base, { isTurnAlive: () => new Promise<boolean>(() => undefined) });
      const { rt, cleanup } = await openTestRuntime({ s: adapter }, { turnSilenceMs: 50 });
      try {
        const { threadId } = await rt.createThread({ providerTarget: "s" });
        const run = await rt.waitForRun((await rt.sendMessage({ threadId, text: "[hang] wait" })).runId);
        expect([run.status, run.failure?.failureClass]).toEqual(["failed", "turn_silent"]);
        // The provider gets at least 2 s to answer, however short the silence limit.
        expect(run.failure?.message).toMatch(/could not be asked: no answer within 2000 ms/);
      } finally {
        await cleanup();
      }
    },
  );

  it(
    "a restart waiting on a superseded turn that goes silent fails " +
      "the run (turn_silent) and says the steer was not delivered",
    async () => {
      // No native steer: a steer interrupts the turn and restarts the run, but this provider acknowledges the interrupt
      // and its turn never ends.
      const base = createScriptedAdapter({
        capabilities: { turns: { supportsActiveSteering: false } },
        script: keyedScript({ "[hang]": [{ type: "hang" }] }),
      });
      const adapter = override(base, { interrupt: async () => undefined, isTurnAlive: async () => false });
      const { rt, cleanup } = await openTestRuntime({ s: adapter }, { turnSilenceMs: 50 });
      try {
        const { threadId } = await rt.createThread({ providerTarget: "s" });
        const { runId } = await rt.sendMessage({ threadId, text: "[hang] wait" });
        await nextEvent(rt, "run.state", (e) => e.runId === runId && e.status === "running");
        const steer = await rt.sendMessage({ threadId, text: "go left", mode: "steer" });
        expect([steer.disposition, steer.via]).toEqual(["steered", "interrupt_restart"]);
        const run = await rt.waitForRun(runId);
        expect([run.status, run.failure?.failureClass]).toEqual(["failed", "turn_silent"]);
        const warning = await nextEvent(rt, "warning", (e) => e.runId === runId && e.message.includes("go left"));
        expect(warning.event.message).toMatch(/steer was not delivered: the run ended failed before it restarted/);
      } finally {
        await cleanup();
      }
    },
  );

  it("a scripted step that throws ends its turn failed, as does a script that throws", async () => {
    const cwd = await mkdtemp(join(tmpdir(), "tiller-throw-"));
    await writeFile(join(cwd, "a-file"), "x");
    const script = keyedScript({
      "[write]": [
        { type: "text", text: "writing" },
        { type: "file_change", path: "a-file/inside.txt", diff: "+x", content: "x" },
      ],
    });
    const throwing = createScriptedAdapter({
      script: ({ text }) => {
        if (text.includes("[boom]")) throw new Error("boom");
        return script({ text, turnIndex: 0 });
      },
    });
    const { rt, cleanup } = await openTestRuntime({ s: throwing }, { sandbox: "full-access" });
    try {
      const { threadId } = await rt.createThread({ providerTarget: "s", cwd });
      const step = await rt.waitForRun((await rt.sendMessage({ threadId, text: "[write] it" })).runId);
      expect([step.status, step.failure?.message]).toEqual([
        "failed",
        expect.stringMatching(/a script step threw: .*(ENOTDIR|EEXIST)/),
      ]);
      const whole = await rt.waitForRun((await rt.sendMessage({ threadId, text: "[boom]" })).runId);
      expect([whole.status, whole.failure?.message]).toEqual([
        "failed",
        expect.stringMatching(/the script threw: Error: boom/),
      ]);
    } finally {
      await cleanup();
      await rm(cwd, { recursive: true, force: true });
    }
  });

  it(
    "waitForRun gives up after timeoutMs (timeout) or " + "on an abort signal (its reason), and the run goes on",
    async () => {
      const { rt, cleanup } = await openTestRuntime({
        s: createScriptedAdapter({ script: keyedScript({ "[hang]": [{ type: "hang" }] }) }),
      });
      try {
        const { threadId } = await rt.createThread({ providerTarget: "s" });
        const { runId } = await rt.sendMessage({ threadId, text: "[hang] wait" });
        await nextEvent(rt, "run.state", (e) => e.runId === runId && e.status === "running");
        expect(await rejection(rt.waitForRun(runId, { timeoutMs: 5 }))).toMatchObject({
          code: "timeout",
          details: { runId },
        });
        const stop = new AbortController();
        const waiting = rejection(rt.waitForRun(runId, { signal: stop.signal }));
        stop.abort(new Error("caller gave up"));
        expect(await waiting).toMatchObject({ message: "caller gave up" });
        expect(await rejection(rt.waitForRun(runId, { signal: stop.signal }))).toMatchObject({
          message: "caller gave up",
        });
        expect(await rejection(rt.waitForRun(runId, { timeoutMs: -1 }))).toMatchObject({
          code: "invalid_input",
          details: { field: "timeoutMs" },
        });
        expect(rt.views.runs.get(runId)!.status).toBe("running");
        await rt.interrupt({ runId });
        expect((await rt.waitForRun(runId, { timeoutMs: 60_000 })).status).toBe("interrupted");
      } finally {
        await cleanup();
      }
    },
  );
});
