import fc from "fast-check";
import { afterAll, describe, expect, it } from "vitest";
import type { DomainEvent, LogRecord, RunView } from "../../src/index.js";
import type { Strength } from "../../src/capabilities/schema.js";
import type { ProviderEvent } from "../../src/adapters/contract.js";
import { logViolations, readModelViolations, transcriptViolations } from "../model/invariants.js";
import { capabilitiesOf, describeStep, exposureOf, stepsOf, turnScenario, type CapsChoice, type Step } from "./generators.js";
import { awaitRecord, disposeWorld, frameOf, openWorld, readLog, readModel, reopenedReadModel, turnViolations, TurnExpectations } from "./propertiesHarness.js";
import { tallyChaos } from "./tally.js";

/**
 * Property-based chaos over the normalizer, the run machine and the projections, driving the
 * real runtime: the provider's events (a double at the provider boundary only) arrive
 * duplicated, reordered, late (after the terminal), malformed, or addressed to threads, turns
 * and sessions that are not the run's, under random identity and terminal-quality
 * capabilities. After every delivered frame the domain invariants must hold.
 *
 * Replay a failure with TILLER_CHAOS_SEED=<seed> (and TILLER_CHAOS_PATH=<path>) from its report;
 * TILLER_CHAOS_RUNS scales the number of generated cases.
 */

const seed = process.env.TILLER_CHAOS_SEED ? Number(process.env.TILLER_CHAOS_SEED) : Math.floor(Math.random() * 2 ** 31);
const path = process.env.TILLER_CHAOS_PATH;
const scale = Number(process.env.TILLER_CHAOS_RUNS ?? 1);
const params = (numRuns: number): fc.Parameters<unknown> => ({ seed, ...(path ? { path } : {}), numRuns: Math.max(1, Math.round(numRuns * scale)) });

/** Log-level invariants: seq gap-free, one terminal per run, nothing applied after it, nodes once and closed before it. */
function logChecks(records: LogRecord<DomainEvent>[], itemIds: Strength): string[] {
  return [...logViolations(records), ...transcriptViolations(records), ...(itemIds === "none" ? [] : nativeItemViolations(records, itemIds))];
}

/**
 * Identity of items (domain model, "Identity and correlation"): a native item id names one
 * item of its turn while that item is open, and for the whole turn when the identity is
 * strong; a weak id may be reused once its item completed.
 */
function nativeItemViolations(records: LogRecord<DomainEvent>[], itemIds: "strong" | "weak"): string[] {
  const violations: string[] = [];
  const holder = new Map<string, { nodeId: string; open: boolean }>();
  const refOf = new Map<string, string>();
  for (const { seq, event } of records) {
    if (event.type === "node.completed") {
      const key = refOf.get(event.nodeId);
      const entry = key === undefined ? undefined : holder.get(key);
      if (entry?.nodeId === event.nodeId) entry.open = false;
    }
    if (event.type !== "node.started" || event.nativeRef === null) continue;
    const key = `${event.attemptId} ${event.nativeRef}`;
    const entry = holder.get(key);
    if (entry && entry.nodeId !== event.nodeId && (itemIds === "strong" || entry.open)) {
      violations.push(`${seq}: native item ${event.nativeRef} became a second node ${event.nodeId} (${entry.open ? "the first still open" : "identity strong"})`);
    }
    if (!entry || entry.nodeId !== event.nodeId) holder.set(key, { nodeId: event.nodeId, open: true });
    refOf.set(event.nodeId, key);
  }
  return violations;
}

/** One run, one turn, its events delivered as `stepsFor` orders them; returns what broke (empty when nothing did) and the run as it ended. */
async function playTurn(choice: CapsChoice, stepsFor: (turnRef: string | null) => Step[]): Promise<{ violations: string[]; run: RunView }> {
  const caps = capabilitiesOf(choice);
  const x = exposureOf(choice);
  const world = await openWorld(caps, x);
  const { rt, provider } = world;
  const violations: string[] = [];
  let runId = "";
  try {
    ({ runId } = await rt.sendMessage({ threadId: world.threadId, text: "go" }));
    const turn = await provider.turn(1);
    const turnRef = x.turnRefs ? "turn-1" : null;
    const expected = new TurnExpectations(choice, x);
    let accepted = false;
    const accept = async () => {
      accepted = true;
      const bound = awaitRecord(rt, (e) => e.type === "attempt.turn_bound");
      turn.accept();
      await bound;
      expected.accepted(turnRef);
    };
    for (const [i, step] of stepsFor(turnRef).entries()) {
      if (step.kind === "accept") await accept();
      else {
        await provider.deliver(frameOf(step, turn.input.sessionId));
        expected.delivered(step);
      }
      const found = [...readModelViolations(rt.views), ...turnViolations(rt, runId, expected)];
      if (found.length > 0) {
        violations.push(...found.map((v) => `after step ${i} ${describeStep(step)}: ${v}`));
        break;
      }
    }
    if (!accepted) await accept();
  } finally {
    await world.rt.close();
  }
  try {
    violations.push(...readModelViolations(rt.views).map((v) => `after close: ${v}`));
    violations.push(...logChecks(await readLog(world.dataDir), choice.itemIds).map((v) => `log: ${v}`));
    // Replay determinism: the read model folded again from the log on reopen is the live one.
    const live = readModel(rt);
    const reopened = await reopenedReadModel(world, caps, x);
    if (JSON.stringify(live) !== JSON.stringify(reopened)) violations.push(`reopen: the read model folded from the log differs from the live one:\n${JSON.stringify(live)}\n${JSON.stringify(reopened)}`);
  } finally {
    await disposeWorld(world);
  }
  return { violations, run: structuredClone(rt.views.runs.get(runId)!) };
}

describe("chaos properties", () => {
  it("a turn's provider events, duplicated, reordered, late, malformed or misaddressed, never corrupt the transcript or end the run wrongly", async () => {
    let runs = 0;
    await fc.assert(
      fc.asyncProperty(turnScenario, async (s) => {
        runs += 1;
        const { violations } = await playTurn(s.caps, (turnRef) => stepsOf(s, turnRef));
        if (violations.length > 0) throw new Error(`${violations.join("\n")}\nscenario: ${JSON.stringify(s)}`);
      }),
      params(150),
    );
    tallyChaos("properties", { properties: 1, runs });
    expect(runs).toBeGreaterThan(0);
  }, 120_000);
});

/** A provider that declares everything, with the item identity under test. */
const declared = (itemIds: Strength): CapsChoice => ({
  threadIds: "strong",
  turnIds: "strong",
  itemIds,
  requestIds: "strong",
  exposesNativeThreadId: true,
  exposesNativeTurnId: true,
  emitsTurnStarted: true,
  emitsTurnCompleted: true,
  terminalStatusQuality: "strong",
  emitsMessageCompleted: true,
  supportsSubagents: true,
  emitsSubagentLifecycle: true,
  exposesSubagentThreadIds: true,
  planDeltasHaveItemIds: true,
});

/** Builds a turn's steps by hand: events on the run's own turn, refs as the record exposes them. */
function script(choice: CapsChoice, build: (on: { where: object; ref: (r: string) => object }) => Array<ProviderEvent | "accept">): (turnRef: string | null) => Step[] {
  const x = exposureOf(choice);
  return (turnRef) => {
    const where = { ...(x.threadRef ? { threadRef: x.threadRef } : {}), ...(turnRef ? { turnRef } : {}) };
    const ref = (r: string) => (x.itemRefs ? { itemRef: r } : {});
    return build({ where, ref }).map((e): Step => (e === "accept" ? { kind: "accept" } : { kind: "event", tag: "root", session: "live", event: e }));
  };
}

const completed = { type: "turn.terminal", status: "completed", threadDisposition: "reusable", failureClass: null, message: null, retryable: false } as const;

async function played(choice: CapsChoice, build: Parameters<typeof script>[1]): Promise<RunView> {
  const { violations, run } = await playTurn(choice, script(choice, build));
  expect(violations).toEqual([]);
  expect(run.status).toBe("completed");
  examples += 1;
  return run;
}

const itemsOf = (run: RunView, kind: string) => run.items.filter((i) => i.kind === kind);
let examples = 0;

/** Issue 12 item 11, as the properties first found it: each of these failed on the code before the fix. */
describe("reordered and duplicated provider events (issue 12 item 11)", () => {
  for (const itemIds of ["strong", "weak", "none"] as const) {
    it(`a delta before its item.started makes one item, complete when the run completes (identity ${itemIds})`, async () => {
      const run = await played(declared(itemIds), ({ where, ref }) => [
        "accept",
        { type: "item.delta", ...where, ...ref("item-1"), kind: "assistant_message", stream: "text", delta: "hel" },
        { type: "item.started", ...where, ...ref("item-1"), kind: "assistant_message" },
        { type: "item.delta", ...where, ...ref("item-1"), kind: "assistant_message", stream: "text", delta: "lo" },
        { type: "item.completed", ...where, ...ref("item-1"), kind: "assistant_message", status: "completed" },
        { ...where, ...completed },
      ]);
      expect(itemsOf(run, "assistant_message")).toMatchObject([{ text: "hello", status: "complete" }]);
    });

    it(`a completion for an item never started makes one complete item (identity ${itemIds})`, async () => {
      const run = await played(declared(itemIds), ({ where, ref }) => [
        "accept",
        { type: "item.completed", ...where, ...ref("item-1"), kind: "command_execution", status: "completed", output: "ok", exitCode: 0 },
        { ...where, ...completed },
      ]);
      expect(itemsOf(run, "command")).toMatchObject([{ output: "ok", status: "complete", detail: { status: "completed", exitCode: 0 } }]);
    });
  }

  for (const itemIds of ["strong", "weak"] as const) {
    it(`a start that comes after its item's completion announces that item, never a second one (identity ${itemIds})`, async () => {
      const run = await played(declared(itemIds), ({ where, ref }) => [
        "accept",
        { type: "item.delta", ...where, ...ref("item-1"), kind: "tool_call", stream: "output", delta: "found" },
        { type: "item.completed", ...where, ...ref("item-1"), kind: "tool_call", status: "completed" },
        { type: "item.started", ...where, ...ref("item-1"), kind: "tool_call", detail: { toolName: "grep" } },
        { ...where, ...completed },
      ]);
      expect(itemsOf(run, "tool")).toMatchObject([{ output: "found", status: "complete", detail: { toolName: "grep", status: "completed" } }]);
    });

    it(`a duplicated start and a duplicated completion are idempotent (identity ${itemIds})`, async () => {
      const start = (where: object, ref: (r: string) => object) => ({ type: "item.started", ...where, ...ref("item-1"), kind: "tool_call", detail: { toolName: "grep" } }) as const;
      const done = (where: object, ref: (r: string) => object) => ({ type: "item.completed", ...where, ...ref("item-1"), kind: "tool_call", status: "completed", output: "1 match" }) as const;
      const run = await played(declared(itemIds), ({ where, ref }) => ["accept", start(where, ref), start(where, ref), done(where, ref), done(where, ref), { ...where, ...completed }]);
      expect(itemsOf(run, "tool")).toMatchObject([{ output: "1 match", status: "complete" }]);
    });
  }

  it("a child thread's events before its subagent.started make one subagent item", async () => {
    const run = await played(declared("strong"), ({ where, ref }) => [
      "accept",
      { type: "item.delta", threadRef: "child-1", kind: "reasoning", stream: "text", delta: "looking" },
      { type: "subagent.started", ...where, ...ref("sub-1"), childThreadRef: "child-1", agent: "helper" },
      { type: "subagent.completed", ...where, ...ref("sub-1"), childThreadRef: "child-1", status: "completed", result: "done" },
      { ...where, ...completed },
    ]);
    expect(itemsOf(run, "subagent")).toMatchObject([{ status: "complete", result: "done", detail: { toolName: "helper" } }]);
    expect(itemsOf(run, "reasoning")).toMatchObject([{ parentId: itemsOf(run, "subagent")[0]!.id }]);
  });

  it("a subagent.completed naming an unknown subagent closes none of the open ones", async () => {
    const run = await played(declared("strong"), ({ where, ref }) => [
      "accept",
      { type: "subagent.started", ...where, ...ref("sub-1"), agent: "helper" },
      { type: "subagent.completed", ...where, ...ref("sub-9"), status: "failed" },
      { type: "subagent.completed", ...where, ...ref("sub-1"), status: "completed", result: "done" },
      { ...where, ...completed },
    ]);
    expect(itemsOf(run, "subagent")).toMatchObject([{ status: "complete", result: "done", detail: { status: "completed" } }]);
  });

  it("a duplicated request.opened is one request", async () => {
    const run = await played(declared("strong"), ({ where }) => {
      const opened = { type: "request.opened", ...where, requestRef: "req-1", request: { kind: "command", command: "ls" } } as const;
      return ["accept", opened, opened, { type: "request.resolved", ...where, requestRef: "req-1", outcome: "accepted" }, { ...where, ...completed }];
    });
    expect(itemsOf(run, "approval")).toHaveLength(1);
  });

  it("an event naming another turn on a thread without refs is not the run's", async () => {
    const choice = { ...declared("none"), exposesNativeThreadId: false };
    const run = await played(choice, ({ where }) => [
      { type: "item.delta", ...where, kind: "assistant_message", stream: "text", delta: "mine" },
      { type: "turn.terminal", turnRef: "turn-999", status: "failed", threadDisposition: "reusable", failureClass: "boom", message: null, retryable: false },
      "accept",
      { ...where, ...completed },
    ]);
    expect(run.failure).toBeNull();
  });

  afterAll(() => tallyChaos("properties-examples", { runs: examples }));
});
