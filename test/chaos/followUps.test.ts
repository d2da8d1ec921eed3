import fc from "fast-check";
import { describe, it } from "vitest";
import { isTillerError, ScriptedBackend, type ScriptSource, type TillerRuntime } from "../../src/index.js";
import { scripted } from "../support/policies.js";
import { openTestRuntime } from "../support/runtime.js";
import { params } from "./seed.js";
import { tallyChaos } from "./tally.js";

/**
 * Follow-ups under interleavings: messages queued behind a running turn, interrupts of any run at any moment, and
 * turns let go in any order, on providers that queue follow-ups themselves or not, name their turns or not, announce
 * them or not. What must hold whatever the order, from the domain model ("queue: next run, at the turn boundary,
 * never mid-turn"; "interrupt: request, provider interrupt, wait for terminal"):
 * - every run ends; a run never interrupted completes with its own reply;
 * - the provider ran the completed runs' turns in the order they were sent, one at a time;
 * - an interrupt ends only the run it names.
 */

/** Turn `[gate N]` says something, waits at gate `gN` (let go by the test), then finishes. */
const script: ScriptSource = ({ text }) => {
  const n = /\[gate (\d+)\]/.exec(text)![1]!;
  return [
    { type: "text", text: `working ${n}` },
    { type: "gate", name: `g${n}` },
    { type: "text", text: ` done ${n}` },
  ];
};

type Op = { kind: "send" } | { kind: "interrupt"; which: number } | { kind: "release"; which: number };

const op: fc.Arbitrary<Op> = fc.oneof(
  fc.constant({ kind: "send" as const }),
  fc.record({ kind: fc.constant("interrupt" as const), which: fc.nat({ max: 9 }) }),
  fc.record({ kind: fc.constant("release" as const), which: fc.nat({ max: 9 }) }),
);

interface Provider {
  queues: boolean;
  namesTurns: boolean;
  announcesTurns: boolean;
}

const provider: fc.Arbitrary<Provider> = fc.record({
  queues: fc.boolean(),
  namesTurns: fc.boolean(),
  announcesTurns: fc.boolean(),
});

/** Runs the operations, lets every turn go, and returns what breaks the properties above. */
async function violations(caps: Provider, ops: Op[]): Promise<string[]> {
  const backend = new ScriptedBackend();
  const adapter = scripted(
    {
      turns: {
        supportsQueuedMessages: caps.queues,
        exposesNativeTurnId: caps.namesTurns,
        emitsTurnStarted: caps.announcesTurns,
      },
    },
    script,
    backend,
  );
  const { rt, cleanup } = await openTestRuntime({ s: adapter }, { checkpoints: false });
  try {
    const { threadId } = await rt.createThread({ providerTarget: "s" });
    const runs: string[] = [];
    const interrupted = new Set<number>();
    const send = async () => {
      const n = runs.length;
      runs.push((await rt.sendMessage({ threadId, text: `[gate ${n}] message ${n}`, mode: "queue" })).runId);
    };
    await send();
    for (const o of ops) {
      if (o.kind === "send") await send();
      else if (o.kind === "release") backend.openGate(`g${o.which % runs.length}`);
      else {
        const which = o.which % runs.length;
        if (await tolerated(rt.interrupt({ runId: runs[which]! }))) interrupted.add(which);
      }
    }
    runs.forEach((_, n) => backend.openGate(`g${n}`));
    return await check(rt, backend, runs, interrupted);
  } finally {
    await cleanup();
  }
}

/** A typed refusal (the run already ended, an interrupt already asked) is an answer; anything else is a defect. */
async function tolerated(call: Promise<unknown>): Promise<boolean> {
  try {
    await call;
    return true;
  } catch (error) {
    if (isTillerError(error)) return false;
    throw error;
  }
}

async function check(rt: TillerRuntime, backend: ScriptedBackend, runs: string[], interrupted: Set<number>) {
  const found: string[] = [];
  const ended = await Promise.all(runs.map((runId) => rt.waitForRun(runId)));
  ended.forEach((run, n) => {
    if (interrupted.has(n)) {
      if (!["interrupted", "cancelled", "completed"].includes(run.status)) found.push(`run ${n} ended ${run.status}`);
      return;
    }
    const said = run.items
      .filter((i) => i.kind === "assistant_message")
      .map((i) => i.text)
      .join("");
    if (run.status !== "completed") found.push(`run ${n}, never interrupted, ended ${run.status} (${run.reason})`);
    else if (said !== `working ${n} done ${n}`) found.push(`run ${n} said "${said}"`);
  });
  const completed = ended.flatMap((run, n) => (run.status === "completed" ? [`[gate ${n}] message ${n}`] : []));
  const ran = [...backend.threads.values()].flatMap((t) => t.turns.filter((turn) => turn.status === "completed"));
  const order = ran.map((t) => t.userText);
  if (JSON.stringify(order) !== JSON.stringify(completed))
    found.push(`the provider completed ${JSON.stringify(order)}, the runs completed ${JSON.stringify(completed)}`);
  return found;
}

describe("chaos: follow-ups, interrupts and turn boundaries in any order", () => {
  it("every run ends, in order, and only the runs interrupted are", async () => {
    let runs = 0;
    let found = 0;
    await fc.assert(
      fc.asyncProperty(provider, fc.array(op, { minLength: 1, maxLength: 10 }), async (caps, ops) => {
        runs += 1;
        const v = await violations(caps, ops);
        found += v.length > 0 ? 1 : 0;
        if (v.length > 0) throw new Error(`${v.join("\n")}\nprovider: ${JSON.stringify(caps)}`);
      }),
      params(150),
    );
    tallyChaos("follow-ups", { properties: 1, runs, violations: found });
  }, 300_000);
});
