import type { ProjectionState } from "../projectionState.js";
import type { RunView, ThreadView, TurnItem } from "../projectionTypes.js";
import { decodeGraph, encodeGraph, SnapshotShapeError } from "./codec.js";
import { LAZY_TEXT_MIN, lazyText, unreadTexts, type TextSink, type TextStore } from "./texts.js";

/**
 * The projections' state as a snapshot body. The bulk of it (threads with their runs and items, the known ids, the
 * receipts) is plain JSON, so reading it back is one `JSON.parse` and a walk that rebuilds the maps: the runs map and
 * the items map hold the very objects the threads' runs and the runs' items hold (positions, not copies), as the fold
 * made them. Long texts of runs and items are `[start, bytes]` in the text file (texts.ts), read on first access.
 * The rest (provider threads, handoffs, checkpoints, trackers... small) goes through the graph codec, which keeps
 * whatever sharing it has.
 */

/** The fields of runs and items that may hold long texts (always strings, or absent, in the fold). */
const TEXT_FIELDS = ["text", "output"] as const;

interface Body {
  threads: ThreadView[];
  /** Runs no thread holds (a run of an unknown thread): kept apart. */
  orphanRuns: RunView[];
  /** The runs map, in order: key, thread index (-1: orphan), run index. */
  runs: Array<string | number>;
  /** The items map, in order: key, thread index (-1: orphan run), run index, item index. */
  items: Array<string | number>;
  knownIds: string[];
  receipts: Array<[string, { command: string; receipt: unknown }]>;
  head: number;
  rest: unknown;
}

/** A copy of `target` whose long texts are where `texts` puts them (unread ones where they already are). */
function withTexts<T extends object>(target: T, texts: TextSink): T {
  const unread = unreadTexts(target);
  let copy: Record<string, unknown> | undefined;
  const own = () => {
    const out: Record<string, unknown> = {};
    for (const key of Object.keys(target))
      out[key] = unread?.has(key) ? null : (target as Record<string, unknown>)[key];
    return out;
  };
  for (const key of TEXT_FIELDS) {
    const ref = unread?.get(key);
    if (ref) {
      (copy ??= own())[key] = texts.keep(ref);
      continue;
    }
    const value = (target as Record<string, unknown>)[key];
    if (typeof value === "string" && value.length >= LAZY_TEXT_MIN)
      (copy ??= own())[key] = texts.put(value, { target, key });
  }
  return (copy as T | undefined) ?? target;
}

export function encodeState(state: ProjectionState, texts: TextSink): string {
  const at = new Map<RunView, [number, number]>();
  const threads = [...state.threads.values()];
  threads.forEach((thread, t) => thread.runs.forEach((run, r) => at.has(run) || at.set(run, [t, r])));
  const orphanRuns: RunView[] = [];
  const runs: Array<string | number> = [];
  for (const [key, run] of state.runs) {
    let place = at.get(run);
    if (!place) at.set(run, (place = [-1, orphanRuns.push(run) - 1]));
    runs.push(key, ...place);
  }
  const itemAt = new Map<TurnItem, [number, number, number]>();
  for (const [run, [t, r]] of at) run.items.forEach((item, i) => itemAt.has(item) || itemAt.set(item, [t, r, i]));
  const items: Array<string | number> = [];
  for (const [key, item] of state.items) {
    const place = itemAt.get(item);
    if (!place) throw new SnapshotShapeError(`item ${key} is in no run`);
    items.push(key, ...place);
  }
  const runOut = (run: RunView): RunView => ({
    ...withTexts(run, texts),
    items: run.items.map((i) => withTexts(i, texts)),
  });
  const { threads: _t, runs: _r, items: _i, knownIds, receipts, head, ...rest } = state;
  const body: Body = {
    threads: threads.map((thread) => ({ ...thread, runs: thread.runs.map(runOut) })),
    orphanRuns: orphanRuns.map(runOut),
    runs,
    items,
    knownIds: [...knownIds],
    receipts: [...receipts],
    head,
    rest: encodeGraph(rest, texts),
  };
  return JSON.stringify(body);
}

export function decodeState(json: string, texts: { store: TextStore; bytes: number }): ProjectionState {
  const bad = (why: string): never => {
    throw new SnapshotShapeError(why);
  };
  const body = JSON.parse(json) as Body;
  if (typeof body !== "object" || body === null) return bad("its body is not an object");
  const { threads, orphanRuns, runs, items, knownIds, receipts } = body;
  for (const list of [threads, orphanRuns, runs, items, knownIds, receipts])
    if (!Array.isArray(list)) return bad("its body lacks a part");
  const lazy = (target: object) => {
    for (const key of TEXT_FIELDS) {
      const value = (target as Record<string, unknown>)[key];
      if (!Array.isArray(value)) continue;
      const [start, bytes] = value as unknown[];
      const fits = (n: unknown): n is number => typeof n === "number" && Number.isInteger(n) && n >= 0;
      if (!fits(start) || !fits(bytes) || start + bytes > texts.bytes) return bad("a text out of its file");
      lazyText(target as Record<string, unknown>, key, { store: texts.store, start, bytes });
    }
  };
  const runAt = (t: unknown, r: unknown): RunView =>
    (t === -1 ? orphanRuns[r as number] : threads[t as number]?.runs?.[r as number]) ?? bad("a run out of place");
  const runMap = new Map<string, RunView>();
  for (const run of [...threads.flatMap((thread) => thread.runs ?? bad("a thread without runs")), ...orphanRuns]) {
    lazy(run);
    for (const item of run.items ?? bad("a run without items")) lazy(item);
  }
  for (let i = 0; i < runs.length; i += 3) runMap.set(runs[i] as string, runAt(runs[i + 1], runs[i + 2]));
  const itemMap = new Map<string, TurnItem>();
  for (let i = 0; i < items.length; i += 4) {
    const item = runAt(items[i + 1], items[i + 2]).items[items[i + 3] as number] ?? bad("an item out of place");
    itemMap.set(items[i] as string, item);
  }
  const rest = decodeGraph(body.rest, texts) as Omit<ProjectionState, keyof Body | "threads" | "runs" | "items">;
  return {
    ...rest,
    head: body.head,
    threads: new Map(threads.map((thread) => [thread.threadId, thread])),
    runs: runMap,
    items: itemMap,
    knownIds: new Set(knownIds),
    receipts: new Map(receipts),
  } as ProjectionState;
}
