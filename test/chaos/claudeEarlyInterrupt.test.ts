import { afterEach, describe, expect, it } from "vitest";
import { claudeWorld, type ClaudeWorld } from "../claude/harness.js";
import { earlyInterrupts, hangUnlessFast } from "./earlyInterrupts.js";
import { tallyChaos } from "./tally.js";

/**
 * Claude Code announces no turn start, so an interrupt goes out at once: sent right after a
 * send, it can reach Claude before Claude has taken the prompt. It must still stop the turn.
 * A lost interrupt leaves its run hanging on the simulator forever: each wait is bounded and a
 * timeout counts as lost.
 */
const ROUNDS = 10;
/** A lost interrupt hangs for ever; a slow one (a loaded machine) ends well within this. */
const LOST_AFTER_MS = 90_000;

/** The last user message of a Messages API request. */
function lastUserText(body: unknown): string {
  const messages = (body as { messages?: Array<{ role?: string; content?: unknown }> } | null)?.messages ?? [];
  return JSON.stringify(messages.filter((m) => m.role === "user").at(-1)?.content ?? "");
}

let world: ClaudeWorld | undefined;
afterEach(async () => {
  await world?.cleanup();
  world = undefined;
});

describe("chaos: early interrupts on the real Claude Code binary", () => {
  it(`delivers ${ROUNDS} interrupts and ${ROUNDS} restarts sent right after a send`, async () => {
    world = await claudeWorld();
    const { rt, sim } = world;
    for (let i = 0; i < 6 * ROUNDS + 10; i++) sim.push(hangUnlessFast(lastUserText));
    const { threadId } = await rt.createThread({ providerTarget: "claude", cwd: world.workspace });
    expect((await rt.waitForRun((await rt.sendMessage({ threadId, text: "[fast] warm up" })).runId)).status).toBe(
      "completed",
    );
    const lost = await earlyInterrupts(rt, threadId, ROUNDS, LOST_AFTER_MS);
    expect(lost).toEqual([]);
    tallyChaos("claude early interrupts", { properties: 2, runs: 2 * ROUNDS });
  }, 240_000);
});
