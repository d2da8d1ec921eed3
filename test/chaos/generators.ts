import fc from "fast-check";
import type { ProviderEvent } from "../../src/adapters/contract.js";
import type { TurnTerminalStatus } from "../../src/domain/entities.js";
import { ProviderItemKindSchema, type ProviderItemKind } from "../../src/domain/items.js";
import type { Strength } from "../../src/capabilities/schema.js";
import { defineCapabilities, type ProviderCapabilities } from "../../src/index.js";

/**
 * Generators for the chaos properties: a capability record (identity and terminal quality
 * at random), the provider's honest transcript of a turn, and what a hostile transport does
 * to it (duplicates, reorders, late copies after the terminal, garbage, events with wrong
 * ids). Each generated event carries a tag saying what it addresses, so the properties can
 * derive what the runtime may and may not do with it from the specification alone.
 */

// ---- capabilities ------------------------------------------------------------------------

export interface CapsChoice {
  threadIds: Strength;
  turnIds: Strength;
  itemIds: Strength;
  requestIds: Strength;
  exposesNativeThreadId: boolean;
  exposesNativeTurnId: boolean;
  emitsTurnStarted: boolean;
  emitsTurnCompleted: boolean;
  terminalStatusQuality: Strength;
  emitsMessageCompleted: boolean;
  supportsSubagents: boolean;
  emitsSubagentLifecycle: boolean;
  exposesSubagentThreadIds: boolean;
  planDeltasHaveItemIds: boolean;
}

const strength = fc.constantFrom<Strength>("strong", "weak", "none");

export const capsChoice: fc.Arbitrary<CapsChoice> = fc.record({
  threadIds: strength,
  turnIds: strength,
  itemIds: strength,
  requestIds: strength,
  exposesNativeThreadId: fc.boolean(),
  exposesNativeTurnId: fc.boolean(),
  emitsTurnStarted: fc.boolean(),
  emitsTurnCompleted: fc.boolean(),
  terminalStatusQuality: strength,
  emitsMessageCompleted: fc.boolean(),
  supportsSubagents: fc.boolean(),
  emitsSubagentLifecycle: fc.boolean(),
  exposesSubagentThreadIds: fc.boolean(),
  planDeltasHaveItemIds: fc.boolean(),
});

/** The controlled provider at its most explicit: every id strong and shown, turn starts and ends said, no subagents. */
export const STRONG_CHOICE: CapsChoice = {
  threadIds: "strong",
  turnIds: "strong",
  itemIds: "strong",
  requestIds: "strong",
  exposesNativeThreadId: true,
  exposesNativeTurnId: true,
  emitsTurnStarted: true,
  emitsTurnCompleted: true,
  terminalStatusQuality: "strong",
  emitsMessageCompleted: true,
  supportsSubagents: false,
  emitsSubagentLifecycle: false,
  exposesSubagentThreadIds: false,
  planDeltasHaveItemIds: true,
};

export function capabilitiesOf(
  c: CapsChoice,
  steering: { native: boolean; interruptRestart: boolean } = { native: false, interruptRestart: false },
): ProviderCapabilities {
  return defineCapabilities({
    identity: {
      nativeThreadIds: c.threadIds,
      nativeTurnIds: c.turnIds,
      nativeItemIds: c.itemIds,
      nativeRequestIds: c.requestIds,
    },
    // The controlled provider serves no snapshot, rollback or fork: its record does not claim them.
    threads: {
      exposesNativeThreadId: c.exposesNativeThreadId,
      canReadThreadSnapshot: false,
      canRollbackThread: false,
      canForkThread: false,
      canForkFromTurn: false,
      canForkFromSubagentThread: false,
    },
    checkpointing: { providerCanRollbackConversation: false, providerRollbackReturnsSnapshot: false },
    context: { canGenerateSummaries: false },
    turns: {
      exposesNativeTurnId: c.exposesNativeTurnId,
      emitsTurnStarted: c.emitsTurnStarted,
      emitsTurnCompleted: c.emitsTurnCompleted,
      terminalStatusQuality: c.terminalStatusQuality,
      supportsActiveSteering: steering.native,
      supportsSteeringByInterruptRestart: steering.interruptRestart,
    },
    streaming: { emitsMessageCompleted: c.emitsMessageCompleted },
    subagents: {
      supportsSubagents: c.supportsSubagents,
      emitsSubagentLifecycle: c.emitsSubagentLifecycle,
      exposesSubagentThreadIds: c.exposesSubagentThreadIds,
      canWaitForSubagents: false,
      canCloseSubagents: false,
      canForkSubagentThread: false,
    },
    planning: { planDeltasHaveItemIds: c.planDeltasHaveItemIds },
  });
}

/** Which native refs the provider puts on its events, as its record declares them. */
export interface Exposure {
  threadRef: string | null;
  turnRefs: boolean;
  itemRefs: boolean;
  requestRefs: boolean;
  childThreads: boolean;
}

export function exposureOf(c: CapsChoice): Exposure {
  const threads = c.exposesNativeThreadId && c.threadIds !== "none";
  return {
    threadRef: threads ? "thr-1" : null,
    turnRefs: c.exposesNativeTurnId && c.turnIds !== "none",
    itemRefs: c.itemIds !== "none",
    requestRefs: c.requestIds !== "none",
    childThreads: c.supportsSubagents && c.exposesSubagentThreadIds && c.threadIds !== "none",
  };
}

// ---- the honest transcript of one turn ---------------------------------------------------

export interface ItemPlan {
  kind: ProviderItemKind;
  start: boolean;
  deltas: string[];
  complete: boolean;
  status: "completed" | "failed" | "cancelled" | "declined";
  /** Authoritative final text on the completion (providers that do not stream). */
  finalText: string | null;
}

export type Ending = "terminal" | "idle" | "terminal_and_idle" | "none" | "session_stopped" | "session_error";

export interface TurnPlan {
  turnStarted: boolean;
  items: ItemPlan[];
  subagent: { items: ItemPlan[]; status: TurnTerminalStatus } | null;
  plan: boolean;
  todo: boolean;
  request: { resolved: boolean } | null;
  warning: boolean;
  terminal: { status: TurnTerminalStatus; broken: boolean };
  ending: Ending;
}

const itemKind = fc.constantFrom(...ProviderItemKindSchema.options);
const turnStatus = fc.constantFrom<TurnTerminalStatus>("completed", "completed", "interrupted", "failed", "cancelled");

export const itemPlan: fc.Arbitrary<ItemPlan> = fc.record({
  kind: itemKind,
  start: fc.boolean(),
  deltas: fc.array(fc.constantFrom("a", "b", "c "), { maxLength: 3 }),
  complete: fc.boolean(),
  status: fc.constantFrom("completed", "completed", "failed", "cancelled", "declined"),
  finalText: fc.option(fc.constant("final"), { nil: null }),
});

/** Weighted towards endings the record declares: a provider that emits terminals mostly ends with one. */
export const turnPlan = (caps: CapsChoice): fc.Arbitrary<TurnPlan> =>
  fc.record({
    turnStarted: fc.boolean(),
    items: fc.array(itemPlan, { maxLength: 4 }),
    subagent: caps.supportsSubagents
      ? fc.option(fc.record({ items: fc.array(itemPlan, { maxLength: 2 }), status: turnStatus }), { nil: null })
      : fc.constant(null),
    plan: fc.boolean(),
    todo: fc.boolean(),
    request: fc.option(fc.record({ resolved: fc.boolean() }), { nil: null }),
    warning: fc.boolean(),
    terminal: fc.record({ status: turnStatus, broken: fc.boolean() }),
    ending: caps.emitsTurnCompleted
      ? fc.constantFrom<Ending>(
          "terminal",
          "terminal",
          "terminal",
          "terminal",
          "terminal_and_idle",
          "none",
          "session_stopped",
          "session_error",
        )
      : fc.constantFrom<Ending>("idle", "idle", "idle", "terminal", "terminal_and_idle", "none", "session_error"),
  });

/** What a generated event addresses: the runtime's only license for what it may do with it. */
export type Tag =
  /** The run's own turn (root thread, the turn's ref or none). */
  | "root"
  /** A subagent's child thread (or items nested under the subagent). */
  | "child"
  /** A provider thread the runtime never bound (an unknown child at most). */
  | "foreign_thread"
  /** Another turn on the run's own provider thread. */
  | "foreign_turn"
  /** A session the runtime never started. */
  | "foreign_session"
  /** Not a valid provider event at all. */
  | "garbage";

export type Step =
  | { kind: "event"; tag: Tag; event: ProviderEvent; session: "live" | "other" }
  | { kind: "garbage"; frame: (sessionId: string) => unknown; label: string }
  | { kind: "accept" };

/** The turn's events in provider order; refs only where the record exposes them. */
export function transcriptOf(plan: TurnPlan, x: Exposure, turnRef: string | null): Step[] {
  const where = { ...(x.threadRef ? { threadRef: x.threadRef } : {}), ...(x.turnRefs && turnRef ? { turnRef } : {}) };
  const root = (event: ProviderEvent): Step => ({ kind: "event", tag: "root", event, session: "live" });
  const steps: Step[] = [];
  if (plan.turnStarted) steps.push(root({ type: "turn.started", ...where }));
  const items = (
    list: ItemPlan[],
    prefix: string,
    scope: typeof where,
    parentItemRef: string | undefined,
    tag: Tag,
  ) => {
    list.forEach((item, i) => {
      const ref = x.itemRefs ? { itemRef: `${prefix}${i + 1}` } : {};
      const push = (event: ProviderEvent) => steps.push({ kind: "event", tag, event, session: "live" });
      if (item.start)
        push({ type: "item.started", ...scope, ...ref, kind: item.kind, ...(parentItemRef ? { parentItemRef } : {}) });
      const stream = item.kind === "assistant_message" || item.kind === "reasoning" ? "text" : "output";
      for (const delta of item.deltas) push({ type: "item.delta", ...scope, ...ref, kind: item.kind, stream, delta });
      if (item.complete)
        push({
          type: "item.completed",
          ...scope,
          ...ref,
          kind: item.kind,
          status: item.status,
          ...(item.finalText ? { text: item.finalText } : {}),
        });
    });
  };
  items(plan.items, "item-", where, undefined, "root");
  if (plan.plan)
    steps.push(
      root({
        type: "plan.updated",
        ...where,
        ...(x.itemRefs ? { itemRef: "plan-1" } : {}),
        steps: [{ step: "look", status: "in_progress" }],
      }),
    );
  if (plan.todo)
    steps.push(
      root({
        type: "todo.updated",
        ...where,
        ...(x.itemRefs ? { itemRef: "todo-1" } : {}),
        items: [{ text: "fix", status: "pending" }],
      }),
    );
  if (plan.subagent) {
    const subRef = x.itemRefs ? { itemRef: "sub-1" } : {};
    // A native thread id names one thread of the session: each turn's subagent gets its own.
    const childThreadRef = x.childThreads ? `child-of-${turnRef ?? "turn"}` : undefined;
    steps.push(
      root({
        type: "subagent.started",
        ...where,
        ...subRef,
        ...(childThreadRef ? { childThreadRef } : {}),
        agent: "helper",
        prompt: "help",
      }),
    );
    const childWhere = childThreadRef
      ? { threadRef: childThreadRef, ...(x.turnRefs ? { turnRef: `${childThreadRef}-turn` } : {}) }
      : where;
    // A native item id names one item of the session: a child thread's items are named after their thread (two
    // turns' subagents each have an item 1, never under one id).
    const itemPrefix = childThreadRef ? `${childThreadRef}-item-` : "sitem-";
    items(plan.subagent.items, itemPrefix, childWhere, childThreadRef ? undefined : subRef.itemRef, "child");
    if (childThreadRef) {
      steps.push({
        kind: "event",
        tag: "child",
        session: "live",
        event: {
          type: "turn.terminal",
          ...childWhere,
          status: plan.subagent.status,
          threadDisposition: "reusable",
          failureClass: null,
          message: null,
          retryable: false,
        },
      });
    }
    steps.push(
      root({
        type: "subagent.completed",
        ...where,
        ...subRef,
        ...(childThreadRef ? { childThreadRef } : {}),
        status: plan.subagent.status,
        result: "done",
      }),
    );
  }
  if (plan.request) {
    const requestRef = x.requestRefs ? { requestRef: "req-1" } : {};
    steps.push(root({ type: "request.opened", ...where, ...requestRef, request: { kind: "command", command: "ls" } }));
    if (plan.request.resolved)
      steps.push(root({ type: "request.resolved", ...where, ...requestRef, outcome: "accepted" }));
  }
  if (plan.warning) steps.push(root({ type: "warning", ...where, message: "provider says hi" }));
  const { status, broken } = plan.terminal;
  const terminal = root({
    type: "turn.terminal",
    ...where,
    status,
    threadDisposition: broken ? "broken" : "reusable",
    failureClass: status === "failed" ? "provider_error" : null,
    message: null,
    retryable: false,
  });
  const idle = root({ type: "session.state", state: "idle" });
  switch (plan.ending) {
    case "terminal":
      steps.push(terminal);
      break;
    case "idle":
      steps.push(idle);
      break;
    case "terminal_and_idle":
      steps.push(terminal, idle);
      break;
    case "session_stopped":
      steps.push(root({ type: "session.state", state: "stopped", message: "host went away" }));
      break;
    case "session_error":
      steps.push(root({ type: "session.state", state: "error", message: "host crashed" }));
      break;
    case "none":
      break;
  }
  return steps;
}

// ---- what the transport does to it -------------------------------------------------------

/** Frames that are not provider events (the runtime records a protocol error and goes on). */
const GARBAGE: Array<{ label: string; frame: (sessionId: string) => unknown }> = [
  { label: "null frame", frame: () => null },
  { label: "number frame", frame: () => 42 },
  { label: "text frame", frame: () => "turn.terminal" },
  { label: "no event", frame: (sessionId) => ({ sessionId }) },
  { label: "null event", frame: (sessionId) => ({ sessionId, event: null }) },
  { label: "unknown type", frame: (sessionId) => ({ sessionId, event: { type: "item.exploded", itemRef: "item-1" } }) },
  { label: "missing fields", frame: (sessionId) => ({ sessionId, event: { type: "item.delta" } }) },
  {
    label: "wrong field type",
    frame: (sessionId) => ({
      sessionId,
      event: { type: "item.delta", kind: "assistant_message", stream: "text", delta: 5 },
    }),
  },
  {
    label: "unknown status",
    frame: (sessionId) => ({
      sessionId,
      event: { type: "turn.terminal", status: "exploded", threadDisposition: "reusable" },
    }),
  },
  { label: "extra field", frame: (sessionId) => ({ sessionId, event: { type: "turn.started", surprise: true } }) },
  {
    label: "empty ref",
    frame: (sessionId) => ({ sessionId, event: { type: "item.started", itemRef: "", kind: "reasoning" } }),
  },
  {
    label: "no session",
    frame: () => ({ event: { type: "turn.terminal", status: "completed", threadDisposition: "reusable" } }),
  },
  { label: "numeric session", frame: () => ({ sessionId: 7, event: { type: "turn.started" } }) },
  {
    label: "terminal without disposition",
    frame: (sessionId) => ({ sessionId, event: { type: "turn.terminal", status: "completed" } }),
  },
];

/** Valid events that address something else than the run's turn, or an item nobody started. */
function foreignEvents(x: Exposure, turnRef: string | null): Array<Extract<Step, { kind: "event" }>> {
  const where = { ...(x.threadRef ? { threadRef: x.threadRef } : {}), ...(x.turnRefs && turnRef ? { turnRef } : {}) };
  const out: Array<Extract<Step, { kind: "event" }>> = [
    // An item the provider never started: created once, closed by the completion barrier at the latest.
    {
      kind: "event",
      tag: "root",
      session: "live",
      event: {
        type: "item.delta",
        ...where,
        ...(x.itemRefs ? { itemRef: "ghost-1" } : {}),
        kind: "assistant_message",
        stream: "text",
        delta: "boo",
      },
    },
    {
      kind: "event",
      tag: "root",
      session: "live",
      event: {
        type: "item.completed",
        ...where,
        ...(x.itemRefs ? { itemRef: "ghost-2" } : {}),
        kind: "tool_call",
        status: "completed",
        output: "out",
      },
    },
    // The right turn, another session.
    {
      kind: "event",
      tag: "foreign_session",
      session: "other",
      event: {
        type: "turn.terminal",
        ...where,
        status: "completed",
        threadDisposition: "reusable",
        failureClass: null,
        message: null,
        retryable: false,
      },
    },
    {
      kind: "event",
      tag: "foreign_session",
      session: "other",
      event: { type: "item.started", ...where, ...(x.itemRefs ? { itemRef: "item-1" } : {}), kind: "reasoning" },
    },
    // A provider thread nobody bound (at most an unannounced child of the open turn).
    {
      kind: "event",
      tag: "foreign_thread",
      session: "live",
      event: { type: "item.delta", threadRef: "thr-999", kind: "reasoning", stream: "text", delta: "elsewhere" },
    },
    {
      kind: "event",
      tag: "foreign_thread",
      session: "live",
      event: {
        type: "turn.terminal",
        threadRef: "thr-999",
        status: "failed",
        threadDisposition: "reusable",
        failureClass: "boom",
        message: null,
        retryable: false,
      },
    },
  ];
  if (x.turnRefs) {
    const other = { ...(x.threadRef ? { threadRef: x.threadRef } : {}), turnRef: "turn-999" };
    out.push(
      {
        kind: "event",
        tag: "foreign_turn",
        session: "live",
        event: {
          type: "turn.terminal",
          ...other,
          status: "failed",
          threadDisposition: "reusable",
          failureClass: "boom",
          message: null,
          retryable: false,
        },
      },
      {
        kind: "event",
        tag: "foreign_turn",
        session: "live",
        event: { type: "item.started", ...other, ...(x.itemRefs ? { itemRef: "other-1" } : {}), kind: "tool_call" },
      },
    );
  }
  return out;
}

export type ChaosOp =
  | { op: "duplicate"; from: number; to: number }
  | { op: "move"; from: number; to: number }
  | { op: "late"; from: number }
  | { op: "garbage"; to: number; which: number }
  | { op: "foreign"; to: number; which: number };

const index = fc.nat({ max: 999 });
export const chaosOp: fc.Arbitrary<ChaosOp> = fc.oneof(
  { arbitrary: fc.record({ op: fc.constant("duplicate" as const), from: index, to: index }), weight: 3 },
  { arbitrary: fc.record({ op: fc.constant("move" as const), from: index, to: index }), weight: 3 },
  { arbitrary: fc.record({ op: fc.constant("late" as const), from: index }), weight: 2 },
  { arbitrary: fc.record({ op: fc.constant("garbage" as const), to: index, which: index }), weight: 1 },
  { arbitrary: fc.record({ op: fc.constant("foreign" as const), to: index, which: index }), weight: 2 },
);

/**
 * The transcript as a hostile transport delivers it. The `accept` step (the reply to sendRun) is moved, never copied.
 */
export function applyChaos(steps: Step[], ops: ChaosOp[], x: Exposure, turnRef: string | null): Step[] {
  const out = [...steps];
  const foreign = foreignEvents(x, turnRef);
  for (const op of ops) {
    const at = (n: number, extra = 0) => n % (out.length + extra);
    switch (op.op) {
      case "duplicate": {
        if (out.length === 0) break;
        const step = out[at(op.from)]!;
        if (step.kind !== "accept") out.splice(at(op.to, 1), 0, step);
        break;
      }
      case "move": {
        if (out.length === 0) break;
        const [step] = out.splice(at(op.from), 1);
        out.splice(at(op.to, 1), 0, step!);
        break;
      }
      case "late": {
        if (out.length === 0) break;
        const step = out[at(op.from)]!;
        if (step.kind !== "accept") out.push(step);
        break;
      }
      case "garbage":
        out.splice(at(op.to, 1), 0, { kind: "garbage", ...GARBAGE[op.which % GARBAGE.length]! });
        break;
      case "foreign":
        out.splice(at(op.to, 1), 0, foreign[op.which % foreign.length]!);
        break;
    }
  }
  return out;
}

/** One turn's delivery: capabilities, the transcript, where the sendRun reply lands, and the chaos. */
export interface TurnScenario {
  caps: CapsChoice;
  plan: TurnPlan;
  acceptAt: number;
  ops: ChaosOp[];
}

export const turnScenario: fc.Arbitrary<TurnScenario> = capsChoice.chain((caps) =>
  fc.record({
    caps: fc.constant(caps),
    plan: turnPlan(caps),
    acceptAt: index,
    ops: fc.array(chaosOp, { maxLength: 10 }),
  }),
);

/** The steps the harness plays for a scenario's turn n. */
export function stepsOf(s: TurnScenario, turnRef: string | null): Step[] {
  const x = exposureOf(s.caps);
  const honest = transcriptOf(s.plan, x, turnRef);
  honest.splice(s.acceptAt % (honest.length + 1), 0, { kind: "accept" });
  return applyChaos(honest, s.ops, x, turnRef);
}

/** A short description of a step, for a failure report. */
export function describeStep(step: Step): string {
  if (step.kind === "accept") return "<sendRun reply>";
  if (step.kind === "garbage") return `<garbage: ${step.label}>`;
  const { type, ...rest } = step.event;
  return `${step.tag}${step.session === "other" ? "@other-session" : ""} ${type} ${JSON.stringify(rest)}`;
}

// ---- two turns on one thread: a steer by interrupt-restart, or a queued run ----------------

/**
 * Two turns on one thread: turn 1 streams (through chaos); the user steers (by interrupt-
 * restart: turn 2 is attempt 2 of the same run) or queues a message (turn 2 is the next run);
 * turn 1 ends (its terminal, or the idle session when the record declares no terminals); turn
 * 2 runs through chaos while late copies of turn 1's events keep arriving; the user may
 * interrupt turn 2 once it was accepted.
 */
export interface TwoTurnScenario {
  caps: CapsChoice;
  first: TurnPlan;
  firstOps: ChaosOp[];
  steerAt: number;
  second: TurnPlan;
  secondAcceptAt: number;
  secondOps: ChaosOp[];
  late: Array<{ from: number; at: number }>;
  interrupt: boolean;
  via: "interrupt_restart" | "queue";
  /** A provider whose weak turn ids repeat: turn 2 is named "turn-1" too, in its reply and its events. */
  repeatRef?: boolean;
}

/** The ref turn 2 goes by: its own, or (weak ids that repeat) the first turn's. */
export function secondTurnRef(s: TwoTurnScenario): string {
  return s.repeatRef && s.caps.turnIds !== "strong" ? "turn-1" : "turn-2";
}

/**
 * Turn refs are exposed here: without them a superseded turn's late events cannot be told from the next turn's (the
 * spec's ordinal fallback).
 */
export const twoTurnScenario: fc.Arbitrary<TwoTurnScenario> = capsChoice
  .map((c) => ({ ...c, exposesNativeTurnId: true, turnIds: c.turnIds === "none" ? ("strong" as const) : c.turnIds }))
  .chain((caps) =>
    fc.record({
      caps: fc.constant(caps),
      first: turnPlan(caps),
      firstOps: fc.array(chaosOp, { maxLength: 6 }),
      steerAt: index,
      second: turnPlan(caps),
      secondAcceptAt: index,
      secondOps: fc.array(chaosOp, { maxLength: 6 }),
      late: fc.array(fc.record({ from: index, at: index }), { maxLength: 6 }),
      interrupt: fc.boolean(),
      via: fc.constantFrom("interrupt_restart" as const, "queue" as const),
      repeatRef: fc.boolean(),
    }),
  );

/** Attempt 1's steps: its body (chaos included) split where the user steers, then what ends its turn. */
export function firstAttemptSteps(s: TwoTurnScenario): { beforeSteer: Step[]; afterSteer: Step[]; ending: Step } {
  const x = exposureOf(s.caps);
  const body = applyChaos(transcriptOf({ ...s.first, ending: "none" }, x, "turn-1"), s.firstOps, x, "turn-1");
  const at = s.steerAt % (body.length + 1);
  const where = { ...(x.threadRef ? { threadRef: x.threadRef } : {}), turnRef: "turn-1" };
  const ending: Step = s.caps.emitsTurnCompleted
    ? {
        kind: "event",
        tag: "root",
        session: "live",
        event: {
          type: "turn.terminal",
          ...where,
          status: s.first.terminal.status,
          threadDisposition: s.first.terminal.broken ? "broken" : "reusable",
          failureClass: null,
          message: null,
          retryable: false,
        },
      }
    : { kind: "event", tag: "root", session: "live", event: { type: "session.state", state: "idle" } };
  return { beforeSteer: body.slice(0, at), afterSteer: body.slice(at), ending };
}

/**
 * Attempt 2's steps (its accept placed at random) with late copies of attempt 1's events mixed in, each marked with its
 * turn.
 */
export function secondAttemptSteps(s: TwoTurnScenario, first: Step[]): Array<{ turn: 1 | 2; step: Step }> {
  const ref = secondTurnRef(s);
  const steps: Array<{ turn: 1 | 2; step: Step }> = stepsOf(
    { caps: s.caps, plan: s.second, acceptAt: s.secondAcceptAt, ops: s.secondOps },
    "turn-2",
  ).map((step) => ({ turn: 2, step: renamed(step, ref, s.caps.itemIds === "strong") }));
  if (first.length === 0) return steps;
  for (const { from, at } of s.late)
    steps.splice(at % (steps.length + 1), 0, { turn: 1, step: first[from % first.length]! });
  return steps;
}

/**
 * A step of turn 2 named by the ref it goes by (its child threads keep their own names). Named as turn 1, its strong
 * item ids stay its own: a strong id names one item for ever, whatever turn ref comes with it.
 */
function renamed(step: Step, turnRef: string, strongItems: boolean): Step {
  if (step.kind !== "event" || step.event.type === "session.state" || step.event.turnRef !== "turn-2") return step;
  if (turnRef === "turn-2") return step;
  const event: Record<string, unknown> = { ...step.event, turnRef };
  for (const field of strongItems ? ["itemRef", "parentItemRef"] : [])
    if (typeof event[field] === "string") event[field] = `t2-${event[field]}`;
  return { ...step, event: event as ProviderEvent };
}
