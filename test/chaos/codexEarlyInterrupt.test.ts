import { afterEach, describe, expect, it } from "vitest";
import { codexWorld, type CodexWorld } from "../codex/harness.js";
import { ofType } from "../support/runtime.js";
import { earlyInterrupts, hangUnlessFast } from "./earlyInterrupts.js";
import { tallyChaos } from "./tally.js";

/**
 * The real Codex binary answers `turn/interrupt` with "no active turn to interrupt" between its
 * `turn/start` reply and its `turn/started` notification. An interrupt (or a restart) sent at
 * once after a send, on a warm host, must still be delivered: 20 of each in a row, none lost.
 * A lost one leaves its run streaming forever, so each wait is bounded and a timeout counts as lost.
 */
const ROUNDS = 20;
/** A lost interrupt hangs for ever; a slow one (a loaded machine) ends well within this. */
const LOST_AFTER_MS = 90_000;

/** The text of the last user message the model was sent (Responses API input). */
function lastUserText(body: unknown): string {
  const input = (body as { input?: Array<{ role?: string; content?: unknown }> } | null)?.input ?? [];
  const users = input.filter((item) => item.role === "user");
  return JSON.stringify(users.at(-1)?.content ?? "");
}

let world: CodexWorld | undefined;
afterEach(async () => {
  await world?.cleanup();
  world = undefined;
});

describe("chaos: early interrupts on the real Codex binary", () => {
  it(`delivers ${ROUNDS} interrupts and ${ROUNDS} restarts sent right after a send on one warm host`, async () => {
    world = await codexWorld();
    const { rt, sim } = world;
    // Every turn hangs mid-stream (until interrupted) unless its prompt says [fast].
    for (let i = 0; i < 4 * ROUNDS + 10; i++) sim.push(hangUnlessFast(lastUserText));
    const { threadId } = await rt.createThread({ providerTarget: "codex", cwd: world.workspace });
    // Warm the host: one turn that completes.
    expect((await rt.waitForRun((await rt.sendMessage({ threadId, text: "[fast] warm up" })).runId)).status).toBe(
      "completed",
    );

    const lost = await earlyInterrupts(rt, threadId, ROUNDS, LOST_AFTER_MS);
    const log: Parameters<typeof ofType>[0] = [];
    const stop = rt.subscribe({ afterSeq: 0 }, (r) => log.push(r));
    await rt.readThread(threadId);
    await new Promise<void>((done) => {
      const check = () => (log.length >= rt.views.head ? done() : setImmediate(check));
      check();
    });
    stop();
    expect(lost).toEqual([]);
    expect(ofType(log, "interrupt.failed")).toEqual([]);
    tallyChaos("codex early interrupts", { properties: 2, runs: 2 * ROUNDS });
  }, 180_000);
});
