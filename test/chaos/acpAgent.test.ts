import { afterEach, describe, expect, it } from "vitest";
import { isRunning as alive } from "../../src/runtime/hosts/process.js";
import { TerminalRunStatusSchema } from "../../src/domain/entities.js";
import type { RunView } from "../../src/index.js";
import { anomalies, fakeWorld, shell, TARGET, type Action, type FakeWorld } from "../acp/fakeAgent.js";
import { until } from "../support/runtime.js";
import { seededRandom } from "./killWorkload.js";
import { tallyChaos } from "./tally.js";

/**
 * The ACP adapter under a seeded storm: a stand-in ACP agent (test/acp/fakeAgent.mjs, never a real agent) streams
 * turns that ask permission at random points and mix hostile frames into the stream, and each turn is, at random,
 * let run (its permission allowed or refused), interrupted, or ended by a SIGKILL of the agent. From the contract
 * (docs/guarantees.md, "Nothing stays running", "Host processes"; ACP's prompt turn):
 *   1. every run ends within RUN_END_MS: none is stuck;
 *   2. it ends as its turn was ended: completed (with exactly the text the agent streamed), interrupted, or failed
 *      `provider_session_lost` for a kill;
 *   3. no request stays pending once its run ended, and one open at a kill is refused `not_resumable`;
 *   4. a killed agent is gone, and a new one serves the next turn of the same thread;
 *   5. once the runtime is closed, no agent process is left;
 *   6. every hostile frame was counted in the agent's ring.
 * Replay a failure with TILLER_ACP_CHAOS_SEED=<seed>.
 */

const SEED = Number(process.env.TILLER_ACP_CHAOS_SEED ?? 20_260_515);
const ROUNDS = 40;
/** Generous: a run that does not end within this is stuck (a violation, never a hang). */
const RUN_END_MS = 20_000;

type Ending = "complete" | "decline" | "interrupt" | "kill";

/** Hostile frames the agent mixes into a turn: each is one anomaly of the ring's, and changes nothing else. */
const HOSTILE = [
  "not json at all",
  "[1,2,3]",
  '{"jsonrpc":"2.0","id":424242,"result":{}}',
  '{"jsonrpc":"2.0","method":"session/update","params":{"sessionId":"ghost","update":' +
    '{"sessionUpdate":"agent_message_chunk","content":{"type":"text","text":"GHOST"}}}}',
];

interface Round {
  ending: Ending;
  words: string[];
  /** The permission request's place among the words (null: none). */
  askAt: number | null;
  hostile: string | null;
}

function plan(seed: number): Round[] {
  const random = seededRandom(seed);
  return Array.from({ length: ROUNDS }, (_, n) => {
    const words = Array.from({ length: random.int(2, 5) }, (_, i) => `r${n}w${i} `);
    const askAt = random.next() < 0.5 ? random.int(0, words.length - 1) : null;
    const endings: Array<readonly [Ending, number]> = [
      ["complete", 3],
      ["interrupt", 2],
      ["kill", 2],
      ...(askAt === null ? [] : ([["decline", 1]] as const)),
    ];
    return {
      ending: random.weighted(endings),
      words,
      askAt,
      hostile: random.next() < 0.5 ? random.pick(HOSTILE) : null,
    };
  });
}

/** The agent's side of a round: its words (a pause before each), its permission request, then its end. */
function turnOf(round: Round, n: number): Action[] {
  const actions: Action[] = [];
  round.words.forEach((word, i) => {
    if (i === round.askAt) {
      const id = 1000 + n;
      actions.push({ permission: { id, toolCall: shell(`tool-${n}`, `echo ${n}`) } }, { waitReply: id });
    }
    if (round.hostile && i === 1) actions.push({ raw: round.hostile });
    actions.push({ sleep: 15 }, { text: word });
  });
  // A turn to be interrupted or killed waits for it; the agent answers session/cancel at once (autoCancel).
  actions.push(
    round.ending === "interrupt" || round.ending === "kill" ? { sleep: 60_000 } : { reply: { stopReason: "end_turn" } },
  );
  return actions;
}

let w: FakeWorld | null = null;
afterEach(async () => {
  await w?.cleanup();
  w = null;
});

describe("chaos: a hostile ACP agent, interrupted and killed at random", () => {
  it(`${ROUNDS} seeded turns: none stuck, each ends as it was ended, nothing left running`, async () => {
    const rounds = plan(SEED);
    // Every kill is a crash the supervisor counts: a budget for all of them (by its default, 3 a minute, the fourth
    // kill would leave the target host_unavailable, by design).
    const policy = { restartBudget: ROUNDS, backoffMs: [50] };
    w = await fakeWorld({ autoCancel: true, prompts: rounds.map(turnOf) }, { policy });
    const rt = await w.open();
    const threadId = (await rt.createThread({ providerTarget: TARGET, cwd: w.root })).threadId;
    const violations: string[] = [];
    const pids = new Set<number>();
    let kills = 0;
    let hostile = 0;

    for (const [n, round] of rounds.entries()) {
      const say = (what: string) => violations.push(`round ${n} (${round.ending}): ${what}`);
      const { runId } = await rt.sendMessage({ threadId, text: `round ${n}` });
      const run = () => rt.views.runs.get(runId)!;
      const streaming = () => run().items.some((i) => i.kind === "assistant_message");
      const over = () => TerminalRunStatusSchema.safeParse(run().status).success;
      const asked = () => rt.views.pendingRequests(threadId)[0];
      // The point it is ended at: its permission request where it has one, else its first words.
      if (round.askAt !== null) await until("the request", () => asked() !== undefined || over());
      else await until("streaming", () => streaming() || over());
      const request = asked();
      const pid = w.agentPid();
      if (pid !== null) pids.add(pid);
      if (round.ending === "kill") {
        kills++;
        if (pid === null || !alive(pid)) say(`no live agent to kill (the run is ${run().status})`);
        else process.kill(pid, "SIGKILL");
      } else if (round.ending === "interrupt")
        await rt.interrupt({ runId }).catch((e: Error) => say(`interrupt refused (${run().status}): ${e.message}`));
      else if (request) {
        const decision = round.ending === "decline" ? "decline" : "accept";
        await rt
          .respond({ requestId: request.requestId, response: { kind: "decision", decision } })
          .catch((e: Error) => say(`answer refused (${run().status}): ${e.message}`));
      }

      const ended: RunView | Error = await rt.waitForRun(runId, { timeoutMs: RUN_END_MS }).catch((e: Error) => e);
      if (ended instanceof Error) {
        say(`stuck: ${ended.message}`);
        continue;
      }
      const expected = {
        complete: ["completed", null],
        decline: ["completed", null],
        interrupt: ["interrupted", null],
        kill: ["failed", "provider_session_lost"],
      }[round.ending];
      const got = [ended.status, ended.failure?.failureClass ?? null];
      if (JSON.stringify(got) !== JSON.stringify(expected))
        say(`ended ${got.join("/")}: ${ended.failure?.message ?? ""}`);
      const text = ended.items
        .filter((i) => i.kind === "assistant_message")
        .map((i) => i.text)
        .join("");
      if (ended.status === "completed" && text !== round.words.join("")) say(`text ${JSON.stringify(text)}`);
      if (rt.views.pendingRequests(threadId).length > 0) say("a request still pending after its run ended");
      if (round.ending === "kill") {
        if (request) {
          const late = await rt
            .respond({ requestId: request.requestId, response: { kind: "decision", decision: "accept" } })
            .then(
              () => "accepted",
              (e: { code?: string }) => e.code,
            );
          if (late !== "not_resumable") say(`the killed turn's request answered: ${late}`);
        }
        await until("the killed agent gone", () => !alive(pid!), 10_000).catch(() => say(`agent ${pid} survived`));
      }
      // Sent in full only by a turn let run to its end (an interrupt or a kill may come before it).
      if (round.hostile && (round.ending === "complete" || round.ending === "decline")) hostile++;
    }

    const counted = w.rings.reduce((sum, ring) => sum + anomalies(ring), 0);
    if (counted < hostile) violations.push(`${hostile} hostile frames, ${counted} counted`);
    await rt.close();
    for (const pid of pids)
      await until(`agent ${pid} gone`, () => !alive(pid), 10_000).catch(() => violations.push(`agent ${pid} left`));
    tallyChaos("acp hostile agent", { properties: 6, runs: ROUNDS, kills, violations: violations.length });
    expect(violations).toEqual([]);
  }, 300_000);
});
