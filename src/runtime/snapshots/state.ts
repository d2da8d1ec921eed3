import type { ProjectionState } from "../projectionState.js";
import type { RunView, ThreadView, TurnItem } from "../projectionTypes.js";
import { decodeGraph, encodeGraph, SnapshotShapeError } from "./codec.js";
import { ItemIndex, itemsUnread } from "./itemIndex.js";
import { LazyMap, LazySet } from "./lazyCollections.js";
import { lazyText, unreadTexts, type TextSink } from "./texts.js";
import { parseJson, readJson, type TextRef, type TextStore } from "./textStore.js";

/**
 * The projections' state as a snapshot body: plain JSON, so reading it back is one `JSON.parse` and a short walk.
 * It holds the threads with their runs; the runs map is rebuilt from positions in the threads' runs (the very
 * objects, as the fold shares them). What open does not need is in the text file (texts.ts), read on first use:
 * each run's items (JSON), the items map's places (ItemIndex: an item is looked up in its run's items, the same
 * objects), the receipts and the known ids (lazyCollections.ts), and the long texts of runs and items. What was not
 * read since the last snapshot is referred to again where it is. The rest (provider threads, handoffs, checkpoints,
 * trackers... small) goes through the graph codec, which keeps whatever sharing it has.
 */

/** The fields of runs and items that may hold long texts (always strings, or absent, in the fold). */
const TEXT_FIELDS = ["text", "output"] as const;

interface Body {
  threads: ThreadView[];
  /** Runs no thread holds (a run of an unknown thread): kept apart. */
  orphanRuns: RunView[];
  /** The runs map, in order: key, thread index (-1: orphan), run index. */
  runs: Array<string | number>;
  /** The items map's places (in the text file): key, thread index (-1: orphan run), run index, item index. */
  items: { ref: [number, number] };
  /** The known ids and the receipts: their place in the text file (read on first use). */
  knownIds: { ref: [number, number] };
  receipts: { ref: [number, number] };
  head: number;
  rest: unknown;
}

/** A copy of `target` whose long texts are where `texts` puts them (unread ones where they already are). */
function withTexts<T extends object>(target: T, texts: TextSink): T {
  let copy: Record<string, unknown> | undefined;
  for (const key of TEXT_FIELDS) {
    const at = Object.hasOwn(target, key) ? texts.field(target, key) : null;
    if (at) (copy ??= fieldsOf(target) as Record<string, unknown>)[key] = at;
  }
  return (copy as T | undefined) ?? target;
}

/** The fields of `target` without reading an unread one (null in its place, for the caller to fill). */
function fieldsOf<T extends object>(target: T): T {
  const unread = unreadTexts(target);
  const out: Record<string, unknown> = {};
  for (const key of Object.keys(target)) out[key] = unread?.has(key) ? null : (target as Record<string, unknown>)[key];
  return out as T;
}

/** A run as the body holds it: its items in the text file (`{ ref: [start, bytes] }`), as JSON. */
function runOut(run: RunView, texts: TextSink): RunView {
  const withText = withTexts(run, texts);
  const out = withText === run ? fieldsOf(run) : withText;
  const ref = unreadTexts(run)?.get("items");
  // Items not read since are where they are, unless this snapshot starts a new text file (their texts move too);
  // items read and unchanged since too (`again`).
  const items =
    ref && texts.holds(ref)
      ? texts.keep(ref)
      : texts.again(run, "items", JSON.stringify(run.items.map((i) => withTexts(i, texts))));
  return { ...out, items: { ref: items } as unknown as TurnItem[] };
}

/** A collection as the body holds it: its contents' place in the text file (`{ ref: [start, bytes] }`). */
function collection(of: Map<unknown, unknown> | Set<unknown>, texts: TextSink): { ref: [number, number] } {
  const unread = of instanceof LazyMap || of instanceof LazySet ? of.unread : null;
  return { ref: unread && texts.holds(unread) ? texts.keep(unread) : texts.put(JSON.stringify([...of])) };
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
  const runOf = (run: RunView) => at.get(run) ?? bad("an item's run is in no thread");
  const bad = (why: string): never => {
    throw new SnapshotShapeError(why);
  };
  const index = state.items;
  const unindexed = index instanceof ItemIndex ? index.unread : null;
  const places = (): Array<string | number> => {
    const itemAt = new Map<TurnItem, [number, number, number]>();
    for (const [run, [t, r]] of at) {
      if (!itemsUnread(run)) run.items.forEach((item, i) => itemAt.has(item) || itemAt.set(item, [t, r, i]));
    }
    const out: Array<string | number> = [];
    for (const [key, item] of index instanceof ItemIndex ? index.read() : index) {
      out.push(key, ...(itemAt.get(item) ?? bad(`item ${key} is in no run`)));
    }
    if (index instanceof ItemIndex) for (const [key, run, i] of index.places()) out.push(key, ...runOf(run), i);
    return out;
  };
  // Untouched since it was read back: the same places (runs are only ever appended, so their positions hold).
  const items = {
    ref: unindexed && texts.holds(unindexed) ? texts.keep(unindexed) : texts.put(JSON.stringify(places())),
  };
  const { threads: _t, runs: _r, items: _i, knownIds, receipts, head, ...rest } = state;
  const body: Body = {
    threads: threads.map((thread) => ({ ...thread, runs: thread.runs.map((run) => runOut(run, texts)) })),
    orphanRuns: orphanRuns.map((run) => runOut(run, texts)),
    runs,
    items,
    knownIds: collection(knownIds, texts),
    receipts: collection(receipts, texts),
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
  for (const list of [threads, orphanRuns, runs]) if (!Array.isArray(list)) return bad("its body lacks a part");
  const refOf = (part: { ref?: unknown } | undefined): TextRef => {
    const [start, bytes] = (Array.isArray(part?.ref) ? part.ref : []) as unknown[];
    if (!fits(start) || !fits(bytes) || start + bytes > texts.bytes) return bad("a part out of its file");
    return { store: texts.store, start, bytes };
  };
  const fits = (n: unknown): n is number => typeof n === "number" && Number.isInteger(n) && n >= 0;
  const lazy = (target: object) => {
    for (const key of TEXT_FIELDS) {
      const value = (target as Record<string, unknown>)[key];
      if (!Array.isArray(value)) continue;
      const [start, bytes] = value as unknown[];
      if (!fits(start) || !fits(bytes) || start + bytes > texts.bytes) return bad("a text out of its file");
      lazyText(target as Record<string, unknown>, key, { store: texts.store, start, bytes });
    }
  };
  const runAt = (t: unknown, r: unknown): RunView =>
    (t === -1 ? orphanRuns[r as number] : threads[t as number]?.runs?.[r as number]) ?? bad("a run out of place");
  const parseItems = (json: string): TurnItem[] => {
    const list = parseJson(json, "a run's items") as TurnItem[];
    if (!Array.isArray(list)) return bad("a run's items are not a list");
    for (const item of list) lazy(item);
    return list;
  };
  const runMap = new Map<string, RunView>();
  for (const run of [...threads.flatMap((thread) => thread.runs ?? bad("a thread without runs")), ...orphanRuns]) {
    lazy(run);
    const [start, bytes] = ((run.items as unknown as { ref?: unknown[] } | undefined)?.ref ?? []) as unknown[];
    if (!fits(start) || !fits(bytes) || start + bytes > texts.bytes) return bad("a run's items out of their file");
    lazyText(run as unknown as Record<string, unknown>, "items", {
      store: texts.store,
      start,
      bytes,
      parse: parseItems,
    });
  }
  for (let i = 0; i < runs.length; i += 3) runMap.set(runs[i] as string, runAt(runs[i + 1], runs[i + 2]));
  const placesRef = refOf(items);
  const itemMap = new ItemIndex({
    ref: placesRef,
    *places() {
      const list = readJson(placesRef) as unknown[];
      if (!Array.isArray(list)) return bad("the items' places are not a list");
      for (let i = 0; i < list.length; i += 4) {
        const index = list[i + 3];
        if (typeof list[i] !== "string" || !fits(index)) return bad("an item out of place");
        yield [list[i] as string, runAt(list[i + 1], list[i + 2]), index];
      }
    },
  });
  const rest = decodeGraph(body.rest, texts) as Omit<ProjectionState, keyof Body | "threads" | "runs" | "items">;
  return {
    ...rest,
    head: body.head,
    threads: new Map(threads.map((thread) => [thread.threadId, thread])),
    runs: runMap,
    items: itemMap,
    knownIds: new LazySet(refOf(knownIds)),
    receipts: new LazyMap(refOf(receipts)),
  } as ProjectionState;
}
