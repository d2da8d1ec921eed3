import { createStore } from "@xstate/store";
import type {
  DomainEvent,
  DomainEventOf,
  LogRecord,
  ProviderAdapterEvent,
  RequestView,
  RunStatus,
  TurnItem,
} from "../src/index.js";
import { TURN_ITEM_KIND_OF_NODE } from "../src/domain/items.js";
import { Projections, isTerminalRunStatus } from "../src/runtime/projections.js";
import { ReadModelStore } from "../src/runtime/readModels.js";
import { runPipeline } from "./pipeline.js";
import type { Workload } from "./workload.js";

/**
 * Does an @xstate/store carry the event rate of the read models UIs select from? The
 * records of the bench workload are captured once, then folded three ways:
 *  (a) `Projections.apply`: today's read models, mutable maps (the runtime needs them anyway);
 *  (b) one @xstate/store holding every UI read model (thread list, each thread with its runs
 *      and items, pending requests), updated immutably per record, text deltas included,
 *      with three selections subscribed as a UI would (thread list, one thread's items,
 *      pending requests);
 *  (c) the hybrid the runtime uses (src/runtime/readModels.ts): (a), plus a store of the
 *      low-rate models only (thread list, run statuses, panels, pending requests) that no
 *      text delta touches, with three selections subscribed (thread list, one thread's runs,
 *      pending requests).
 * A store "carries the event rate" when what it adds per record is under ~5% of the
 * pipeline's own time per record: (b) adds all of its fold (the projections stay), (c) adds
 * its difference to (a).
 */

export type Records = Array<LogRecord<DomainEvent>>;

export async function captureRecords(w: Workload, onFrame?: (frame: ProviderAdapterEvent) => void): Promise<Records> {
  const records: Records = [];
  await runPipeline(w, { onRecord: (record) => records.push(record), ...(onFrame ? { onFrame } : {}) });
  return records;
}

export interface FoldRates {
  records: number;
  projections: number;
  store: number;
  hybrid: number;
  /** How often each selection's listener was told during one fold. */
  storeNotifications: Record<string, number>;
  hybridNotifications: Record<string, number>;
}

/**
 * Records per second of each fold: the best of `reps` (a fold takes milliseconds, so on a shared
 * machine the fastest run is the one least disturbed), the three interleaved so drift hits them alike.
 */
export async function measureReadModels(records: Records, reps = 15): Promise<FoldRates> {
  const created = records.find((r) => r.event.type === "thread.created")!.event as DomainEventOf<"thread.created">;
  const threadId = created.threadId;
  const folds = {
    projections: async () => foldProjections(records),
    store: async () => foldFullStore(records, threadId),
    hybrid: async () => foldHybrid(records, threadId),
  };
  const seconds: Record<keyof typeof folds, number[]> = { projections: [], store: [], hybrid: [] };
  const notifications: Record<string, Record<string, number>> = {};
  for (let rep = -1; rep < reps; rep++) {
    for (const [name, fold] of Object.entries(folds) as Array<
      [keyof typeof folds, () => Promise<Record<string, number>>]
    >) {
      globalThis.gc?.();
      const start = process.hrtime.bigint();
      notifications[name] = await fold();
      const elapsed = Number(process.hrtime.bigint() - start) / 1e9;
      if (rep >= 0) seconds[name].push(elapsed); // rep -1 warms up
    }
  }
  const rate = (s: number[]) => records.length / Math.min(...s);
  return {
    records: records.length,
    projections: rate(seconds.projections),
    store: rate(seconds.store),
    hybrid: rate(seconds.hybrid),
    storeNotifications: notifications.store!,
    hybridNotifications: notifications.hybrid!,
  };
}

/**
 * (c)'s publications wait for durability (a promise): folds yield every `BATCH` records, as the log's group commit
 * does; (a) too, so the two differ by the store alone.
 */
const BATCH = 256;

async function foldProjections(records: Records): Promise<Record<string, number>> {
  const views = new Projections();
  for (let i = 0; i < records.length; i++) {
    views.apply(records[i]!);
    if (i % BATCH === BATCH - 1) await null;
  }
  return {};
}

async function foldHybrid(records: Records, threadId: string): Promise<Record<string, number>> {
  const views = new Projections();
  const models = new ReadModelStore(
    views,
    { durableHead: Number.MAX_SAFE_INTEGER, whenDurable: async () => undefined },
    (error) => {
      throw error;
    },
  );
  const told = { threadList: 0, threadRuns: 0, pendingRequests: 0 };
  const unsubscribe = [
    models.select(
      (s) => s.threadList,
      () => told.threadList++,
    ),
    models.select(
      (s) => s.threads[threadId]?.runs,
      () => told.threadRuns++,
    ),
    models.select(
      (s) => s.pendingRequests,
      () => told.pendingRequests++,
    ),
  ];
  await null; // the selections start (their first value)
  for (let i = 0; i < records.length; i++) {
    views.apply(records[i]!);
    models.apply(records[i]!);
    if (i % BATCH === BATCH - 1) await null;
  }
  await null;
  unsubscribe.forEach((u) => u());
  return told;
}

// ---- (b): every UI read model in one immutable store ------------------------------------

interface FullRun {
  runId: string;
  status: RunStatus;
  reason: string | null;
  items: readonly TurnItem[];
}
interface FullThread {
  threadId: string;
  title: string;
  providerTarget: string;
  model: string | null;
  runs: readonly FullRun[];
}
interface FullState {
  threadList: ReadonlyArray<{ threadId: string; title: string; runs: number; status: "idle" | "active" }>;
  threads: Readonly<Record<string, FullThread>>;
  pendingRequests: readonly RequestView[];
}

async function foldFullStore(records: Records, threadId: string): Promise<Record<string, number>> {
  /** Where each node's item is (a lookup aid beside the store, not UI state). */
  const runOfNode = new Map<string, { threadId: string; runId: string }>();
  const initial: FullState = { threadList: [], threads: {}, pendingRequests: [] };
  const store = createStore({
    context: initial,
    on: { record: (state, { record }: { record: LogRecord<DomainEvent> }) => foldFull(state, record, runOfNode) },
  });
  const told = { threadList: 0, threadItems: 0, pendingRequests: 0 };
  const subscriptions = [
    store.select((s) => s.threadList).subscribe(() => told.threadList++),
    store.select((s) => s.threads[threadId]?.runs).subscribe(() => told.threadItems++),
    store.select((s) => s.pendingRequests).subscribe(() => told.pendingRequests++),
  ];
  for (const record of records) store.trigger.record({ record });
  subscriptions.forEach((s) => s.unsubscribe());
  return told;
}

function foldFull(
  state: FullState,
  { seq, event }: LogRecord<DomainEvent>,
  runOfNode: Map<string, { threadId: string; runId: string }>,
): FullState {
  switch (event.type) {
    case "thread.created": {
      const thread: FullThread = {
        threadId: event.threadId,
        title: event.title,
        providerTarget: event.providerTarget,
        model: event.model,
        runs: [],
      };
      return {
        ...state,
        threads: { ...state.threads, [event.threadId]: thread },
        threadList: [...state.threadList, { threadId: event.threadId, title: event.title, runs: 0, status: "idle" }],
      };
    }
    case "run.created": {
      const thread = state.threads[event.threadId];
      if (!thread) return state;
      const item: TurnItem = {
        id: event.userMessageId,
        kind: "user_message",
        status: "complete",
        attemptId: null,
        parentId: null,
        seq,
        text: event.text,
      };
      const runs: FullRun[] = [...thread.runs, { runId: event.runId, status: "queued", reason: null, items: [item] }];
      return withList(
        { ...state, threads: { ...state.threads, [event.threadId]: { ...thread, runs } } },
        event.threadId,
      );
    }
    case "run.state":
      return updateRun(state, event.threadId, event.runId, (run) => ({ ...run, status: event.status }));
    case "run.terminal":
      return withList(
        updateRun(state, event.threadId, event.runId, (run) => ({
          ...run,
          status: event.status,
          reason: event.reason,
        })),
        event.threadId,
      );
    case "node.started": {
      const kind = TURN_ITEM_KIND_OF_NODE[event.kind];
      if (!kind || runOfNode.has(event.nodeId)) return state;
      runOfNode.set(event.nodeId, { threadId: event.threadId, runId: event.runId });
      const item: TurnItem = {
        id: event.nodeId,
        kind,
        status: "streaming",
        attemptId: event.attemptId,
        parentId: event.parentNodeId,
        seq,
      };
      return updateRun(state, event.threadId, event.runId, (run) => ({ ...run, items: [...run.items, item] }));
    }
    case "node.delta":
      return updateItem(state, event.nodeId, runOfNode, (item) =>
        event.stream === "text"
          ? { ...item, text: (item.text ?? "") + event.delta }
          : { ...item, output: (item.output ?? "") + event.delta },
      );
    case "node.completed":
      return updateItem(state, event.nodeId, runOfNode, (item) => ({
        ...item,
        status: "complete",
        ...(event.text !== null ? { text: event.text } : {}),
        ...(event.output !== null ? { output: event.output } : {}),
      }));
    case "request.opened": {
      const { requestId, threadId, runId, nodeId, payload, responseCapability } = event;
      const view: RequestView = {
        requestId,
        threadId,
        runId,
        nodeId,
        kind: payload.kind,
        payload,
        status: "pending",
        responseCapability,
        response: null,
        closedReason: null,
      };
      return { ...state, pendingRequests: [...state.pendingRequests, view] };
    }
    case "request.resolved":
    case "request.closed":
      return { ...state, pendingRequests: state.pendingRequests.filter((r) => r.requestId !== event.requestId) };
    default:
      return state; // the workload has no other record a UI shows
  }
}

function updateRun(state: FullState, threadId: string, runId: string, change: (run: FullRun) => FullRun): FullState {
  const thread = state.threads[threadId];
  const at = thread ? thread.runs.findLastIndex((r) => r.runId === runId) : -1;
  if (!thread || at < 0) return state;
  const runs = thread.runs.slice();
  runs[at] = change(runs[at]!);
  return { ...state, threads: { ...state.threads, [threadId]: { ...thread, runs } } };
}

function updateItem(
  state: FullState,
  nodeId: string,
  runOfNode: Map<string, { threadId: string; runId: string }>,
  change: (item: TurnItem) => TurnItem,
): FullState {
  const where = runOfNode.get(nodeId);
  if (!where) return state;
  return updateRun(state, where.threadId, where.runId, (run) => {
    const at = run.items.findLastIndex((i) => i.id === nodeId);
    if (at < 0) return run;
    const items = run.items.slice();
    items[at] = change(items[at]!);
    return { ...run, items };
  });
}

function withList(state: FullState, threadId: string): FullState {
  const thread = state.threads[threadId]!;
  const status = thread.runs.some((r) => !isTerminalRunStatus(r.status)) ? ("active" as const) : ("idle" as const);
  return {
    ...state,
    threadList: state.threadList.map((t) => (t.threadId === threadId ? { ...t, runs: thread.runs.length, status } : t)),
  };
}
