import { rm } from "node:fs/promises";
import fc from "fast-check";
import { describe, it } from "vitest";
import { createScriptedAdapter } from "../../src/adapters/scripted/host/provider.js";
import { ScriptedBackend } from "../../src/adapters/scripted/host/backend.js";
import { keyedScript } from "../../src/adapters/scripted/host/script.js";
import { isTillerError } from "../../src/domain/errors.js";
import type { DomainEvent } from "../../src/domain/events.js";
import type { Runtime } from "../../src/runtime/runtime.js";
import type { LogRecord } from "../../src/runtime/store/eventLog.js";
import { readLog } from "./propertiesHarness.js";
import { params, seed } from "./seed.js";
import { tallyChaos } from "./tally.js";
import { openTestRuntime, withInjectedFrames } from "../support/runtime.js";

/**
 * Chaos over the session lifecycle, through the real runtime and the scripted provider (doubles
 * at the provider boundary only): random overlapping sends (auto, queue, steer, restart; some
 * with another model), interrupts, forks, rollbacks and provider-side session losses on 1–3
 * threads, with an idle deadline of a few milliseconds so idle stops race with everything.
 * Afterwards every run must end, no run may fail unless the test lost its session, every
 * session's state sequence must be legal, no steer may be lost unless the test caused it, the
 * live session actors must be the sessions not yet stopped, and close then reopen must read the log.
 *
 * Replay a failure with TILLER_CHAOS_SEED=<seed> (and TILLER_CHAOS_PATH=<path>) from its report;
 * TILLER_CHAOS_RUNS scales the number of generated cases.
 */

/** A bound on every wait: a stuck run fails the property with a message instead of hanging it. */
const WAIT_MS = 15_000;
const GATES = ["g1", "g2"] as const;
const MODELS = ["model-a", "model-b"] as const;
const TERMINAL = new Set(["completed", "failed", "interrupted", "cancelled", "rolled_back"]);

const script = keyedScript({
  "[hang]": [{ type: "text", text: "hanging" }, { type: "hang" }],
  "[g1]": [
    { type: "text", text: "at g1" },
    { type: "gate", name: "g1" },
    { type: "text", text: "past g1" },
  ],
  "[g2]": [
    { type: "gate", name: "g2" },
    { type: "text", text: "past g2" },
  ],
});

type Op =
  | {
      op: "send";
      thread: number;
      mode: "auto" | "queue" | "steer" | "restart";
      body: "echo" | "[hang]" | "[g1]" | "[g2]";
      model: (typeof MODELS)[number] | null;
    }
  | { op: "interrupt"; thread: number }
  | { op: "fork"; thread: number }
  | { op: "rollback"; thread: number }
  | { op: "openGate"; gate: (typeof GATES)[number] }
  | { op: "waitRun"; thread: number }
  /** The provider loses a live session: it stops it, or it says so first (stopped or error) and then stops it. */
  | { op: "lose"; which: number; how: "stop" | "stopped" | "error" };

interface Case {
  threads: number;
  idleMs: number;
  switchInSession: boolean;
  multiThreadSessions: boolean;
  nativeSteer: boolean;
  groups: Op[][];
}

const thread = fc.nat({ max: 5 });
const opArb: fc.Arbitrary<Op> = fc.oneof(
  {
    weight: 6,
    arbitrary: fc.record({
      op: fc.constant("send" as const),
      thread,
      mode: fc.constantFrom("auto" as const, "queue" as const, "steer" as const, "restart" as const),
      body: fc.constantFrom("echo" as const, "echo" as const, "[hang]" as const, "[g1]" as const, "[g2]" as const),
      model: fc.constantFrom(null, ...MODELS),
    }),
  },
  { weight: 2, arbitrary: fc.record({ op: fc.constant("interrupt" as const), thread }) },
  { weight: 1, arbitrary: fc.record({ op: fc.constant("fork" as const), thread }) },
  { weight: 1, arbitrary: fc.record({ op: fc.constant("rollback" as const), thread }) },
  { weight: 1, arbitrary: fc.record({ op: fc.constant("openGate" as const), gate: fc.constantFrom(...GATES) }) },
  { weight: 2, arbitrary: fc.record({ op: fc.constant("waitRun" as const), thread }) },
  {
    weight: 1,
    arbitrary: fc.record({
      op: fc.constant("lose" as const),
      which: fc.nat({ max: 5 }),
      how: fc.constantFrom("stop" as const, "stopped" as const, "error" as const),
    }),
  },
);

const caseArb: fc.Arbitrary<Case> = fc.record({
  threads: fc.integer({ min: 1, max: 3 }),
  idleMs: fc.integer({ min: 1, max: 5 }),
  switchInSession: fc.boolean(),
  multiThreadSessions: fc.boolean(),
  nativeSteer: fc.boolean(),
  groups: fc.array(fc.array(opArb, { minLength: 1, maxLength: 3 }), { minLength: 2, maxLength: 10 }),
});

/** Rejects with a clear message when `promise` does not settle within the bound. */
async function bounded<T>(what: string, promise: Promise<T>): Promise<T> {
  let timer: NodeJS.Timeout | undefined;
  const limit = new Promise<never>((_, reject) => {
    timer = setTimeout(() => reject(new Error(`stuck: ${what} did not happen within ${WAIT_MS} ms`)), WAIT_MS);
  });
  try {
    return await Promise.race([promise, limit]);
  } finally {
    clearTimeout(timer);
  }
}

/** Resolves once the runtime recorded that the session stopped or failed. */
function sessionEnded(rt: Runtime, sessionId: string): Promise<void> {
  return new Promise((resolve) => {
    const done = () => {
      stop();
      resolve();
    };
    const ended = () => ["stopped", "error"].includes(rt.views.sessions.get(sessionId)?.status ?? "");
    const stop = rt.subscribe({ afterSeq: rt.views.head }, (r) => {
      if (r.event.type === "session.state" && r.event.sessionId === sessionId && ended()) done();
    });
    if (ended()) done();
  });
}

/** One session's `session.state` sequence: started, running and ready alternating, then stopped or error once. */
function sessionStateViolations(records: LogRecord<DomainEvent>[]): string[] {
  const violations: string[] = [];
  const state = new Map<string, string>();
  for (const { seq, event } of records) {
    if (event.type === "session.started") {
      if (state.has(event.sessionId)) violations.push(`${seq}: session ${event.sessionId} started twice`);
      state.set(event.sessionId, "ready");
      continue;
    }
    if (event.type !== "session.state") continue;
    const before = state.get(event.sessionId) ?? "unstarted";
    const legal =
      before === "ready"
        ? ["running", "stopped", "error"]
        : before === "running"
          ? ["ready", "stopped", "error"]
          : before === "unstarted"
            ? ["error"] // a session whose start failed
            : [];
    if (!legal.includes(event.status))
      violations.push(`${seq}: session ${event.sessionId} went ${before} -> ${event.status}`);
    state.set(event.sessionId, event.status);
  }
  return violations;
}

interface World {
  rt: Runtime;
  dataDir: string;
  threads: string[];
  /** Run ids sent on each thread, in order. */
  runsOf: Map<string, string[]>;
  /** Runs the test exposed to a session loss (alive while it happened, or sent before the runtime heard of it). */
  exposed: Set<string>;
  /** Runs the test interrupted (or that a restart or rollback of the test ended). */
  interrupted: Set<string>;
  /** The markers of every message that went into a run (its own, and the steers it took). */
  markers: Map<string, Set<string>>;
  opened: Set<string>;
  /** Waits on a thread's run, given up (not failed) when a concurrent message could make it hang (a steer into it). */
  waits: Map<string, Set<AbortController>>;
  /** Messages that could make a run hang, sent and not yet answered, by thread. */
  blockingSends: Map<string, number>;
  losses: number;
  violations: string[];
}

const isTerminal = (rt: Runtime, runId: string) => TERMINAL.has(rt.views.runs.get(runId)?.status ?? "");
const latestRun = (w: World, t: string) => w.runsOf.get(t)?.at(-1) ?? null;
/** A refusal the API documents is the test's problem, never a defect; anything else is. */
const refusal = (w: World, what: string, error: unknown) => {
  if (!isTillerError(error)) w.violations.push(`${what} threw an untyped error: ${String(error)}`);
};

async function perform(w: World, op: Op, backend: ScriptedBackend, lose: LoseFn, n: number): Promise<void> {
  const { rt } = w;
  const threadId = w.threads[("thread" in op ? op.thread : 0) % w.threads.length]!;
  switch (op.op) {
    case "send": {
      const text = `${op.body === "echo" ? "" : `${op.body} `}message ${n}`;
      const blocks = op.body !== "echo";
      if (blocks) {
        for (const wait of w.waits.get(threadId) ?? []) wait.abort();
        w.blockingSends.set(threadId, (w.blockingSends.get(threadId) ?? 0) + 1);
      }
      try {
        const receipt = await rt.sendMessage({
          threadId,
          text,
          mode: op.mode,
          ...(op.model ? { model: op.model } : {}),
        });
        const runs = w.runsOf.get(threadId)!;
        if (!runs.includes(receipt.runId)) runs.push(receipt.runId);
        const markers = w.markers.get(receipt.runId) ?? new Set<string>();
        if (op.body !== "echo") markers.add(op.body);
        w.markers.set(receipt.runId, markers);
        // A restart interrupts the active run: whatever it still carried (a steer) is the test's doing.
        if (receipt.disposition === "restarting")
          for (const r of rt.views.runs.values())
            if (r.threadId === threadId && r.runId !== receipt.runId) w.interrupted.add(r.runId);
      } catch (error) {
        refusal(w, `send ${op.mode}`, error);
      } finally {
        if (blocks) w.blockingSends.set(threadId, w.blockingSends.get(threadId)! - 1);
      }
      return;
    }
    case "interrupt": {
      const runId = latestRun(w, threadId);
      if (!runId || isTerminal(rt, runId)) return;
      w.interrupted.add(runId);
      await rt.interrupt({ runId }).catch((error: unknown) => refusal(w, "interrupt", error));
      return;
    }
    case "fork": {
      if (w.threads.length >= 4) return;
      try {
        const fork = await rt.forkThread({ threadId });
        w.threads.push(fork.threadId);
        w.runsOf.set(fork.threadId, []);
      } catch (error) {
        refusal(w, "fork", error);
      }
      return;
    }
    case "rollback": {
      const toRunId = w.runsOf.get(threadId)![0];
      if (!toRunId) return;
      try {
        const receipt = await rt.rollback({ threadId, toRunId });
        for (const runId of receipt.rolledBackRunIds) w.interrupted.add(runId);
      } catch (error) {
        refusal(w, "rollback", error);
      }
      return;
    }
    case "openGate":
      w.opened.add(`[${op.gate}]`);
      return backend.openGate(op.gate);
    case "waitRun": {
      // Only a run that ends by itself: nothing on its thread still open hangs or waits at a closed gate.
      const runId = latestRun(w, threadId);
      if (!runId) return;
      const blocked = w.runsOf
        .get(threadId)!
        .some((r) => !isTerminal(rt, r) && [...(w.markers.get(r) ?? [])].some((m) => !w.opened.has(m)));
      if (blocked || (w.blockingSends.get(threadId) ?? 0) > 0) return;
      const given = new AbortController();
      const waits = w.waits.get(threadId) ?? new Set();
      w.waits.set(threadId, waits.add(given));
      try {
        await rt.waitForRun(runId, { timeoutMs: WAIT_MS, signal: given.signal });
      } catch (error) {
        if (!given.signal.aborted) w.violations.push(`run ${runId} never ended by itself: ${String(error)}`);
      } finally {
        waits.delete(given);
      }
      return;
    }
    case "lose":
      return lose(op);
  }
}

type LoseFn = (op: Extract<Op, { op: "lose" }>) => Promise<void>;

async function playCase(c: Case): Promise<string[]> {
  const backend = new ScriptedBackend();
  const scripted = createScriptedAdapter({
    backend,
    script,
    capabilities: {
      sessions: {
        supportsModelSwitchInSession: c.switchInSession,
        supportsMultipleProviderThreadsPerSession: c.multiThreadSessions,
      },
      turns: { supportsActiveSteering: c.nativeSteer },
    },
  });
  const { adapter, inject } = withInjectedFrames(scripted);
  const { rt, dataDir } = await openTestRuntime({ s: adapter }, { sessionIdleMs: c.idleMs });
  const w: World = {
    rt,
    dataDir,
    threads: [],
    runsOf: new Map(),
    exposed: new Set(),
    interrupted: new Set(),
    markers: new Map(),
    opened: new Set(),
    waits: new Map(),
    blockingSends: new Map(),
    losses: 0,
    violations: [],
  };
  const lose: LoseFn = async ({ which, how }) => {
    const live = [...rt.actors.sessions.values()].filter((a) => a.getSnapshot().context.capabilities !== null);
    const session = live[which % Math.max(1, live.length)];
    if (!session) return;
    const { sessionId } = session.getSnapshot().context;
    w.losses += 1;
    const before = new Set(rt.views.runs.keys());
    for (const [runId, run] of rt.views.runs) if (!TERMINAL.has(run.status)) w.exposed.add(runId);
    const ended = sessionEnded(rt, sessionId);
    if (how !== "stop") {
      const message = how === "error" ? "the host crashed" : "the provider stopped the session";
      inject({ sessionId, event: { type: "session.state", state: how, message } });
    }
    // The provider's side of it: the session is gone there too (its turns end without a terminal).
    await scripted.stopSession({ sessionId });
    await bounded(`the runtime hearing that session ${sessionId} ended`, ended);
    // Sent before the runtime knew: they may have gone to the lost session.
    for (const runId of rt.views.runs.keys()) if (!before.has(runId)) w.exposed.add(runId);
  };
  try {
    for (let i = 0; i < c.threads; i++) {
      const { threadId } = await rt.createThread({ providerTarget: "s" });
      w.threads.push(threadId);
      w.runsOf.set(threadId, []);
    }
    let n = 0;
    for (const group of c.groups) {
      await Promise.all(group.map((op) => perform(w, op, backend, lose, n++)));
    }
    // Let every run finish: open the gates, interrupt what hangs (a restart or a queue may start another).
    for (const gate of GATES) backend.openGate(gate);
    for (let round = 0; round < 6; round++) {
      const open = [...rt.views.runs.values()].filter((r) => !TERMINAL.has(r.status));
      if (open.length === 0) break;
      for (const run of open) {
        if (round === 0 && !w.markers.get(run.runId)?.has("[hang]")) continue;
        w.interrupted.add(run.runId);
        await rt.interrupt({ runId: run.runId }).catch((error: unknown) => refusal(w, "final interrupt", error));
      }
      for (const run of open) {
        await rt.waitForRun(run.runId, { timeoutMs: WAIT_MS }).catch((error: unknown) => {
          if (round === 5) w.violations.push(`run ${run.runId} is stuck ${run.status}: ${String(error)}`);
        });
      }
    }
    checkLive(w);
    await idledOut(w);
  } finally {
    await rt.close();
  }
  try {
    if (rt.actors.sessions.size > 0) w.violations.push(`after close ${rt.actors.sessions.size} session actors remain`);
    const records = await readLog(dataDir);
    checkLog(w, records);
    // Reopened, the runtime reads the same log: every run as it was.
    const reopened = await openTestRuntime({ s: createScriptedAdapter({ backend, script }) }, { dataDir });
    try {
      for (const [runId, run] of rt.views.runs) {
        const again = reopened.rt.views.runs.get(runId);
        if (again?.status !== run.status) w.violations.push(`reopen: run ${runId} ${run.status} -> ${again?.status}`);
      }
    } finally {
      await reopened.rt.close();
    }
  } finally {
    await rm(dataDir, { recursive: true, force: true });
  }
  return w.violations;
}

/** Before close: every run ended, none failed unless exposed to a loss, the live session actors are live sessions. */
function checkLive(w: World): void {
  const { rt } = w;
  for (const run of rt.views.runs.values()) {
    if (!TERMINAL.has(run.status)) w.violations.push(`run ${run.runId} never ended (${run.status})`);
    if (run.status === "failed" && !w.exposed.has(run.runId))
      w.violations.push(
        `run ${run.runId} ("${run.text}") failed though the test lost no session under it: ` +
          `${run.failure?.failureClass}: ${run.failure?.message}`,
      );
  }
  const notStopped = [...rt.views.sessions.values()].filter((s) => s.status !== "stopped" && s.status !== "error");
  if (rt.actors.sessions.size > notStopped.length)
    w.violations.push(
      `${rt.actors.sessions.size} live session actors for ${notStopped.length} sessions not stopped in the read model`,
    );
  for (const [sessionId, actor] of rt.actors.sessions) {
    const status = rt.views.sessions.get(sessionId)?.status;
    if (status === "stopped" || status === "error")
      w.violations.push(`session ${sessionId} is ${status} in the read model but its actor is still held`);
    if (actor.getSnapshot().status !== "active") w.violations.push(`session ${sessionId}'s actor ended but is held`);
  }
}

/**
 * Nothing runs any more: every session gives its claims back and stops itself once its idle deadline passes (a claim
 * a turn never gave back would hold it forever).
 */
async function idledOut(w: World): Promise<void> {
  for (const [sessionId, actor] of [...w.rt.actors.sessions]) {
    // A stopped actor completes its subscriber at once; a live one when it ends.
    const ended = new Promise<void>((resolve) => void actor.subscribe({ complete: resolve }));
    await bounded(`session ${sessionId} stopping once idle`, ended).catch(() => {
      const snapshot = actor.getSnapshot();
      w.violations.push(
        `session ${sessionId} never idled out: ${JSON.stringify(snapshot.value)}, ${snapshot.context.claims} claims`,
      );
    });
  }
}

/** The log: legal session states; no steer or request lost unless the test caused it. */
function checkLog(w: World, records: LogRecord<DomainEvent>[]): void {
  w.violations.push(...sessionStateViolations(records).map((v) => `log: ${v}`));
  for (const { seq, event } of records) {
    if (event.type !== "warning") continue;
    const lost = /steer was not delivered|not_resumable|could not be answered|response to .* failed/.test(
      event.message,
    );
    if (!lost) continue;
    const runId = event.runId;
    const caused = runId !== null && (w.exposed.has(runId) || w.interrupted.has(runId));
    // A steer that reaches the provider after its turn ended by itself: the provider's race, not a loss.
    const turnEnded = /no active turn on this thread/.test(event.message);
    if (!caused && !turnEnded) w.violations.push(`log: ${seq}: warning for run ${runId}: ${event.message}`);
  }
}

describe("session lifecycle chaos", () => {
  it(`sessions idle out, retire and die under random overlapping commands (seed ${seed})`, async () => {
    let runs = 0;
    await fc.assert(
      fc.asyncProperty(caseArb, async (c) => {
        runs += 1;
        const violations = await playCase(c);
        if (violations.length > 0) throw new Error(violations.join("\n"));
      }),
      params(40),
    );
    tallyChaos("sessionLifecycle", { properties: 1, runs, violations: 0 });
  }, 300_000);
});
