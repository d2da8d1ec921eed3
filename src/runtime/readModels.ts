import { createStore } from "@xstate/store";
import type { DispatchMode, Failure, RunStatus, RuntimeMode } from "../domain/entities.js";
import type { DomainEvent, DomainEventType } from "../domain/events.js";
import {
  isTerminalRunStatus,
  type Projections,
  type RequestView,
  type RunView,
  type ThreadView,
} from "./projections.js";
import type { LogRecord } from "./store/eventLog.js";

/**
 * The read models UIs select from (`runtime.select`), held in an @xstate/store.
 *
 * Only the low-rate models live here: the thread list, each thread's header, run statuses and
 * panels, the pending requests. Streamed text does not: a text delta never touches the store.
 * bench/readModels.ts measured why: one immutable store holding the items too, updated per
 * delta, adds about a quarter of the pipeline's time per record; this one adds under 1%.
 * Text is read with `readThread` and streamed with `subscribe`.
 *
 * Each state is derived from the projections right after the record that changed them is
 * folded, so it is exactly the state at that record; it reaches the store (and selectors)
 * once that record is durable, so a UI is never shown what a crash could take back. States
 * are frozen copies: nothing a caller does to them reaches the runtime. Nothing is derived
 * until the first `select`, so a runtime nobody selects from pays one check per record.
 */

/** One line of the thread list. */
export interface ThreadListEntry {
  threadId: string;
  title: string;
  providerTarget: string;
  /** How many runs the thread has. */
  runs: number;
  /** `active` while one of its runs is not terminal. */
  status: "idle" | "active";
}

/** A run without its items: what a run list, a status badge or an affordance needs. */
export interface RunSummary {
  runId: string;
  ordinal: number;
  status: RunStatus;
  providerTarget: string;
  model: string | null;
  /** The runtime mode the run works in (plan mode, approval policy). */
  runtimeMode: RuntimeMode;
  mode: DispatchMode;
  reason: string | null;
  failure: Failure | null;
}

/** A thread without its streamed content. */
export interface ThreadModel extends Pick<
  ThreadView,
  "threadId" | "title" | "cwd" | "providerTarget" | "model" | "runtimeMode" | "lineage"
> {
  status: "idle" | "active";
  runs: readonly RunSummary[];
  /** Structured artifacts exist in the thread (the plan and todo panels of `affordances`). */
  panels: { plan: boolean; todo: boolean };
}

/** What a selector of `runtime.select` receives. Every part is replaced, never mutated, when it changes. */
export interface ReadModelState {
  /** The thread list, oldest first. */
  readonly threadList: readonly ThreadListEntry[];
  /** Each thread by id. */
  readonly threads: Readonly<Record<string, ThreadModel>>;
  /** Requests waiting for an answer (all threads), oldest first. */
  readonly pendingRequests: readonly RequestView[];
}

export type ReadModelSelector<T> = (state: ReadModelState) => T;

/** Where durability is learnt (the event log). */
export interface Durability {
  readonly durableHead: number;
  whenDurable(seq: number): Promise<void>;
}

type Part = "thread" | "panels" | "requests";
/** The records that change a read model here, and which part. Any other (text deltas first) is skipped. */
const PARTS: ReadonlyMap<DomainEventType, Part> = new Map([
  ["thread.created", "thread"],
  ["thread.model_changed", "thread"],
  ["thread.mode_changed", "thread"],
  ["run.created", "thread"],
  ["run.state", "thread"],
  ["run.terminal", "thread"],
  ["rollback.applied", "thread"],
  ["node.started", "panels"],
  ["plan.proposed", "panels"],
  ["plan.updated", "panels"],
  ["todo.updated", "panels"],
  ["request.opened", "requests"],
  ["request.resolved", "requests"],
  ["request.closed", "requests"],
]);

const EMPTY: ReadModelState = Object.freeze({
  threadList: Object.freeze([]),
  threads: Object.freeze({}),
  pendingRequests: Object.freeze([]),
});

/**
 * What one record changed: a thread's model, or the pending requests. The containers that hold them (the thread list,
 * the threads by id) are rebuilt once per publish, not once per record: each is as long as the runtime has threads.
 */
type Change = { seq: number; model: ThreadModel } | { seq: number; pendingRequests: readonly RequestView[] };

export class ReadModelStore {
  /** Holds the published (durable) state; created by the first `select`. */
  #store: ReturnType<typeof createReadModelStore> | undefined;
  /** The last state handed to the store. */
  #published: ReadModelState = EMPTY;
  /** Each thread's model at the latest folded record (may be ahead of the published one). */
  #models = new Map<string, ThreadModel>();
  #requests: readonly RequestView[] = EMPTY.pendingRequests;
  #latestSeq = 0;
  /** Changes derived and not published yet, oldest first. */
  #pending: Change[] = [];

  constructor(
    private readonly views: Projections,
    private readonly durability: Durability,
    private readonly onListenerError: (error: unknown) => void,
  ) {}

  /** Called right after the projections folded `record`. */
  apply({ seq, event }: LogRecord<DomainEvent>): void {
    if (!this.#store) return;
    const part = PARTS.get(event.type);
    if (!part) return;
    const change = this.#derive(seq, event, part);
    if (!change) return;
    if ("model" in change) this.#models.set(change.model.threadId, change.model);
    else this.#requests = change.pendingRequests;
    this.#latestSeq = seq;
    this.#pending.push(change);
    if (this.#pending.length === 1) this.#publishWhenDurable(seq);
  }

  /**
   * `listener` receives the selected value once (asynchronously, once what it reflects is
   * durable), then each time it changes by `equal` (default `Object.is`). Returns unsubscribe.
   */
  select<T>(
    selector: ReadModelSelector<T>,
    listener: (value: T) => void,
    equal: (a: T, b: T) => boolean = Object.is,
  ): () => void {
    const store = this.#start();
    let active = true;
    let subscription: { unsubscribe(): void } | undefined;
    let last: T;
    const guardedSelector = (state: ReadModelState): T => {
      try {
        return (last = selector(state));
      } catch (error) {
        this.onListenerError(error);
        return last; // unchanged: the listener is not told
      }
    };
    const tell = (value: T) => {
      if (!active) return;
      try {
        listener(value);
      } catch (error) {
        this.onListenerError(error);
      }
    };
    // What is derived now is published by the time this resolves (its waiter was registered first).
    this.durability.whenDurable(this.#latestSeq).then(
      () => {
        if (!active) return;
        const selection = store.select(guardedSelector, equal);
        tell(selection.get());
        subscription = selection.subscribe(tell);
      },
      () => undefined, // the log failed or closed: nothing more is published
    );
    return () => {
      active = false;
      subscription?.unsubscribe();
    };
  }

  #start(): ReturnType<typeof createReadModelStore> {
    if (this.#store) return this.#store;
    const seeded = seed(this.views);
    this.#store = createReadModelStore();
    // The base of every later change; the store is told once the records it reflects are durable (before any change
    // after it: durability resolves its waiters in order).
    this.#published = seeded;
    for (const model of Object.values(seeded.threads)) this.#models.set(model.threadId, model);
    this.#requests = seeded.pendingRequests;
    this.#latestSeq = this.views.head;
    this.durability.whenDurable(this.#latestSeq).then(
      () => {
        if (this.#published === seeded) this.#store!.trigger.published({ state: seeded });
      },
      () => undefined,
    );
    return this.#store;
  }

  #derive(seq: number, event: DomainEvent, part: Part): Change | null {
    const { views } = this;
    if (part === "requests") {
      if (!("requestId" in event)) return null;
      const view = views.requests.get(event.requestId);
      const rest = this.#requests.filter((r) => r.requestId !== event.requestId);
      if (view?.status === "pending") return { seq, pendingRequests: freeze([...rest, freeze(structuredClone(view))]) };
      return rest.length === this.#requests.length ? null : { seq, pendingRequests: freeze(rest) };
    }
    const thread = "threadId" in event && event.threadId ? views.threads.get(event.threadId) : undefined;
    if (!thread) return null;
    const before = this.#models.get(thread.threadId);
    let panels = before?.panels ?? { plan: false, todo: false };
    if (part === "panels") {
      const nodeId = "nodeId" in event ? event.nodeId : null;
      if (!nodeId) return null;
      panels = withKind(panels, views.item(nodeId)?.kind);
      if (panels === before?.panels) return null;
    }
    const model = threadModel(thread, before, panels);
    return model === before ? null : { seq, model };
  }

  /** Publishes what the durable changes make of the published state, then waits for the next change. */
  #publishWhenDurable(seq: number): void {
    this.durability.whenDurable(seq).then(
      () => {
        const head = this.durability.durableHead;
        let durable = 0;
        while (durable < this.#pending.length && this.#pending[durable]!.seq <= head) durable++;
        const changes = this.#pending.slice(0, durable);
        this.#pending = this.#pending.slice(durable);
        if (changes.length > 0) {
          this.#published = withChanges(this.#published, changes);
          this.#store!.trigger.published({ state: this.#published });
        }
        const next = this.#pending[0];
        if (next) this.#publishWhenDurable(next.seq);
      },
      () => undefined,
    );
  }
}

function createReadModelStore() {
  return createStore({
    context: EMPTY,
    on: { published: (_, event: { state: ReadModelState }) => event.state },
  });
}

// ---- derivation from the projections (structural sharing: what did not change stays the same object) ----

/** The whole state at once (the first `select`; built in one pass, not thread by thread). */
function seed(views: Projections): ReadModelState {
  const models = [...views.threads.values()].map((thread) => {
    const panels = thread.runs.reduce((p, run) => run.items.reduce((q, item) => withKind(q, item.kind), p), {
      plan: false,
      todo: false,
    });
    return threadModel(thread, undefined, panels);
  });
  return {
    threadList: freeze(models.map(listEntry)),
    threads: freeze(Object.fromEntries(models.map((m) => [m.threadId, m]))),
    pendingRequests: freeze(views.pendingRequests().map((r) => freeze(structuredClone(r)))),
  };
}

const listEntry = (model: ThreadModel): ThreadListEntry =>
  freeze({
    threadId: model.threadId,
    title: model.title,
    providerTarget: model.providerTarget,
    runs: model.runs.length,
    status: model.status,
  });

function withKind(panels: ThreadModel["panels"], kind: string | undefined): ThreadModel["panels"] {
  const plan = panels.plan || kind === "plan" || kind === "proposed_plan";
  const todo = panels.todo || kind === "todo_list";
  return plan === panels.plan && todo === panels.todo ? panels : freeze({ plan, todo });
}

/** The state once `changes` (in order) applied: each container copied once, what did not change kept as it was. */
function withChanges(state: ReadModelState, changes: readonly Change[]): ReadModelState {
  const models = new Map<string, ThreadModel>();
  let pendingRequests = state.pendingRequests;
  for (const change of changes) {
    if ("model" in change) models.set(change.model.threadId, change.model);
    else pendingRequests = change.pendingRequests;
  }
  if (models.size === 0) return { ...state, pendingRequests };
  const fresh = new Map([...models.values()].map((model) => [model.threadId, listEntry(model)]));
  let listChanged = false;
  const list = state.threadList.map((known) => {
    const entry = fresh.get(known.threadId);
    if (!entry) return known;
    fresh.delete(known.threadId);
    if (sameEntry(known, entry)) return known;
    listChanged = true;
    return entry;
  });
  // Threads new to the list, in the order they first changed.
  for (const entry of fresh.values()) {
    list.push(entry);
    listChanged = true;
  }
  const threads = { ...state.threads };
  for (const [threadId, model] of models) threads[threadId] = model;
  return {
    threadList: listChanged ? freeze(list) : state.threadList,
    threads: Object.freeze(threads),
    pendingRequests,
  };
}

function sameEntry(a: ThreadListEntry, b: ThreadListEntry): boolean {
  return a.runs === b.runs && a.status === b.status && a.title === b.title && a.providerTarget === b.providerTarget;
}

function threadModel(thread: ThreadView, before: ThreadModel | undefined, panels: ThreadModel["panels"]): ThreadModel {
  const runs = sameItems(
    thread.runs.map((run, i) => runSummary(run, before?.runs[i])),
    before?.runs,
  );
  const status = thread.runs.some((r) => !isTerminalRunStatus(r.status)) ? "active" : "idle";
  if (
    before &&
    runs === before.runs &&
    panels === before.panels &&
    status === before.status &&
    thread.model === before.model &&
    thread.runtimeMode === before.runtimeMode
  )
    return before;
  const { threadId, title, cwd, providerTarget, model, runtimeMode, lineage } = thread;
  return freeze({
    threadId,
    title,
    cwd,
    providerTarget,
    model,
    runtimeMode,
    lineage: lineage && freeze(structuredClone(lineage)),
    status,
    runs,
    panels,
  });
}

/** Only status, reason and failure change after a run is created (failure and reason once, at its terminal). */
function runSummary(run: RunView, before: RunSummary | undefined): RunSummary {
  if (
    before?.runId === run.runId &&
    before.status === run.status &&
    before.reason === run.reason &&
    (before.failure === null) === (run.failure === null)
  )
    return before;
  const { runId, ordinal, status, providerTarget, model, runtimeMode, mode, reason, failure } = run;
  return freeze({
    runId,
    ordinal,
    status,
    providerTarget,
    model,
    runtimeMode,
    mode,
    reason,
    failure: failure && freeze(structuredClone(failure)),
  });
}

function sameItems<T>(next: T[], before: readonly T[] | undefined): readonly T[] {
  return before && before.length === next.length && next.every((x, i) => x === before[i]) ? before : freeze(next);
}

/** Deep-freezes a fresh copy (never an object the projections hold). */
function freeze<T>(value: T): T {
  if (typeof value !== "object" || value === null || Object.isFrozen(value)) return value;
  for (const inner of Object.values(value)) freeze(inner);
  return Object.freeze(value);
}
