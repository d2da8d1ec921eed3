import { mkdtemp, readFile, rm } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { ProviderEventSchema, type ProviderEvent } from "../../src/adapters/contract.js";
import type { ProviderCapabilities } from "../../src/capabilities/schema.js";
import { sequentialIds, type DomainEvent, type LogRecord } from "../../src/index.js";
import type { Runtime } from "../../src/runtime/runtime.js";
import { isProviderItemKind } from "../model/invariants.js";
import { ControlledProvider } from "./controlledProvider.js";
import type { CapsChoice, Exposure, Step } from "./generators.js";
import { openRuntime } from "../support/internals.js";

/**
 * The world one generated case runs in: a real runtime on a fresh data directory whose only
 * provider is a ControlledProvider, and what the specification says the runtime may do with
 * each event the case delivered (the Expectations).
 */

const TERMINAL = new Set(["completed", "interrupted", "failed", "cancelled", "rolled_back"]);
export const isTerminal = (status: string): boolean => TERMINAL.has(status);

export const TARGET = "chaos";

export interface ChaosWorld {
  rt: Runtime;
  provider: ControlledProvider;
  dataDir: string;
  threadId: string;
}

export async function openWorld(caps: ProviderCapabilities, x: Exposure, autoAccept = false): Promise<ChaosWorld> {
  const dataDir = await mkdtemp(join(tmpdir(), "tiller-chaos-prop-"));
  const provider = new ControlledProvider(
    caps,
    { threadRef: x.threadRef, turnRef: (n) => (x.turnRefs ? `turn-${n}` : null) },
    autoAccept,
  );
  // sessionIdleMs null: no idle timer may stop a session while the test holds the stream.
  const rt = await openRuntime({
    dataDir,
    providers: { [TARGET]: provider },
    ids: sequentialIds(),
    sessionIdleMs: null,
    turnSilenceMs: null,
  });
  const { threadId } = await rt.createThread({ providerTarget: TARGET });
  return { rt, provider, dataDir, threadId };
}

/** The log as the file holds it (after close: everything is there). */
export async function readLog(dataDir: string): Promise<LogRecord<DomainEvent>[]> {
  const text = await readFile(join(dataDir, "events.jsonl"), "utf8");
  return text
    .split("\n")
    .filter((line) => line.length > 0)
    .map((line) => JSON.parse(line) as LogRecord<DomainEvent>);
}

/** Resolves with the first durable record after `afterSeq` that matches. */
export function awaitRecord(
  rt: Runtime,
  match: (event: DomainEvent) => boolean,
  afterSeq = rt.views.head,
): Promise<LogRecord<DomainEvent>> {
  return new Promise((resolve) => {
    const stop = rt.subscribe({ afterSeq }, (record) => {
      if (!match(record.event)) return;
      stop();
      resolve(record);
    });
  });
}

/** What the read model must look like, comparable across a reopen. */
export function readModel(rt: Runtime): unknown {
  return JSON.parse(
    JSON.stringify({ threads: [...rt.views.threads.values()], requests: [...rt.views.requests.values()] }),
  );
}

/** Reopens the data directory with a fresh provider and returns the read model it folds. */
export async function reopenedReadModel(world: ChaosWorld, caps: ProviderCapabilities, x: Exposure): Promise<unknown> {
  const provider = new ControlledProvider(caps, { threadRef: x.threadRef, turnRef: () => null });
  const rt = await openRuntime({
    dataDir: world.dataDir,
    providers: { [TARGET]: provider },
    ids: sequentialIds(),
    sessionIdleMs: null,
    turnSilenceMs: null,
  });
  try {
    return readModel(rt);
  } finally {
    await rt.close();
  }
}

export async function disposeWorld(world: ChaosWorld): Promise<void> {
  await world.rt.close();
  await rm(world.dataDir, { recursive: true, force: true });
}

/** Frames the way the transport delivers them. */
export function frameOf(step: Step, sessionId: string): unknown {
  if (step.kind === "accept") throw new Error("the sendRun reply is not a frame");
  if (step.kind === "garbage") return step.frame(sessionId);
  return { sessionId: step.session === "live" ? sessionId : "ses_not_ours", event: step.event };
}

/**
 * The specification's account of one turn: which delivered events end the run's turn (only
 * the active attempt's root, i.e. its own turn on its own provider thread, or the loss of its
 * session, or, when the provider declares no terminals, the session going idle), and which
 * delivered events may complete an item of each kind before the run ends.
 */
export class TurnExpectations {
  /** Native refs the run's turn answers to: the sendRun reply's, and the first seen on its thread before that reply. */
  readonly turnRefs = new Set<string>();
  #bound = false;
  /** The sendRun reply came. */
  #replied = false;
  /**
   * Events that wait for the reply, in order: from the first that named an earlier turn by a ref the record does not
   * trust (weak ids repeat: only the reply says whether the ref is now this turn's), every event of the session.
   */
  #waiting: Array<{ step: Step; earlier: boolean }> | null = null;
  /** The first event that ended the turn, and the run status it means. */
  ended: { status: string; by: string; via: "terminal" | "idle" | "session" } | null = null;
  /** Item kinds (turn item vocabulary) some delivered event could complete. */
  readonly completable = new Set<string>();
  #interrupted = false;

  constructor(
    private readonly caps: CapsChoice,
    private readonly x: Exposure,
    /** Refs of earlier turns on the thread: their events are theirs, never this turn's. */
    private readonly earlierTurnRefs: ReadonlySet<string> = new Set(),
  ) {}

  /** The caller interrupted the run: an inferred terminal, or the session's loss, now means interrupted. */
  interrupted(): void {
    this.#interrupted = true;
  }

  /** The sendRun reply names the turn: a ref taken before it from another turn's event stops being this turn's. */
  accepted(turnRef: string | null): void {
    this.#replied = true;
    if (turnRef) {
      this.turnRefs.clear();
      this.turnRefs.add(turnRef);
      this.#bound = true;
    }
    const waiting = this.#waiting ?? [];
    this.#waiting = null;
    for (const { step, earlier } of waiting) this.delivered(step, earlier);
  }

  /**
   * An event the provider sent while this turn is the thread's. `earlier`: it is an earlier turn's own (fenced, never
   * this turn's), though it waits in line with this turn's events like any other.
   */
  delivered(step: Step, earlier = false): void {
    if (step.kind !== "event" || step.session !== "live") return;
    const parsed = ProviderEventSchema.safeParse(step.event);
    if (!parsed.success) return;
    const event = parsed.data;
    if (this.#waiting || this.#inDoubt(event)) return void (this.#waiting ??= []).push({ step, earlier });
    if (earlier) return;
    this.#noteCompletion(event);
    if (this.ended) return;
    if (event.type === "session.state") {
      if (event.state === "stopped" || event.state === "error")
        this.ended = {
          status: this.#interrupted ? "interrupted" : "failed",
          by: `session ${event.state}`,
          via: "session",
        };
      else if (event.state === "idle" && !this.caps.emitsTurnCompleted)
        this.ended = {
          status: this.#interrupted ? "interrupted" : "completed",
          by: "session idle (no turn terminals declared)",
          via: "idle",
        };
      return;
    }
    if (event.type === "turn.terminal" && this.#addressesRun(event))
      this.ended = { status: event.status, by: `turn.terminal ${event.status}`, via: "terminal" };
  }

  /** Before the reply, on its own thread, an earlier turn named by a ref that is only evidence. */
  #inDoubt(event: ProviderEvent): boolean {
    const evidence = !(this.caps.exposesNativeTurnId && this.caps.turnIds === "strong");
    if (!evidence || this.#replied || this.ended || event.type === "session.state") return false;
    return (
      event.threadRef === (this.x.threadRef ?? undefined) &&
      event.turnRef !== undefined &&
      this.earlierTurnRefs.has(event.turnRef)
    );
  }

  /**
   * Its own provider thread, and its own turn: the turn's ref, none, or the first ref seen before the sendRun reply.
   */
  #addressesRun(event: Exclude<ProviderEvent, { type: "session.state" }>): boolean {
    if (event.threadRef !== (this.x.threadRef ?? undefined)) return false;
    if (event.turnRef === undefined || this.turnRefs.has(event.turnRef)) return true;
    if (this.#bound || this.earlierTurnRefs.has(event.turnRef)) return false;
    this.turnRefs.add(event.turnRef);
    this.#bound = true;
    return true;
  }

  /** Every root-thread event with a turn ref binds an unbound turn, whatever its type. */
  #noteCompletion(event: ProviderEvent): void {
    if (event.type !== "session.state" && event.type !== "turn.terminal") this.#addressesRun(event);
    switch (event.type) {
      case "item.completed":
        this.completable.add(ITEM_OF[event.kind] ?? event.kind);
        break;
      case "subagent.completed":
        this.completable.add("subagent");
        break;
      case "turn.terminal":
        // A child thread's turn ending may close its subagent (never the run).
        if (event.threadRef !== (this.x.threadRef ?? undefined)) this.completable.add("subagent");
        break;
      case "request.resolved":
        this.completable.add("approval");
        break;
      default:
        break;
    }
  }
}

const ITEM_OF: Record<string, string> = {
  assistant_message: "assistant_message",
  reasoning: "reasoning",
  tool_call: "tool",
  command_execution: "command",
  file_change: "file_change",
};

/**
 * Invariants 3 and 4 on the read model: the run is terminal only once its own turn ended
 * (with that turn's status); an item completes before the run ends only when the provider
 * completed something of its kind (a child completing never closes its parent); once the
 * turn ended, the run has ended too (nothing is left running).
 */
export function turnViolations(rt: Runtime, runId: string, expected: TurnExpectations, attemptId?: string): string[] {
  const run = rt.views.runs.get(runId);
  if (!run) return [`run ${runId} missing from the read model`];
  const violations: string[] = [];
  if (isTerminal(run.status)) {
    if (!expected.ended) violations.push(`run is ${run.status} although nothing ended its own turn`);
    else if (run.status !== expected.ended.status)
      violations.push(`run is ${run.status} but its turn ended by ${expected.ended.by}`);
    return violations;
  }
  if (expected.ended) violations.push(`its turn ended by ${expected.ended.by} but the run is still ${run.status}`);
  for (const item of run.items) {
    if (attemptId !== undefined && item.attemptId !== attemptId) continue;
    if (item.status === "complete" && isProviderItemKind(item.kind) && !expected.completable.has(item.kind)) {
      violations.push(
        `${item.kind} item ${item.id} completed though nothing of its kind was completed by the provider`,
      );
    }
  }
  return violations;
}
