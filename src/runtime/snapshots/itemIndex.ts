import type { RunView, TurnItem } from "../projectionTypes.js";
import { unreadTexts } from "./texts.js";
import { type TextRef } from "./textStore.js";

/**
 * The items-by-id map of projections loaded from a snapshot. A run's items are read from the text file the first
 * time something reads them (texts.ts); until then the map knows only where each of its items is (the run, the
 * index in its items), and reads the run when one is asked for. To everyone else it is the complete map: asking
 * for an item, or walking the map, reads what it needs. Only the snapshot writer sees the two parts apart.
 */
export class ItemIndex extends Map<string, TurnItem> {
  /** Items not read yet: each one's run and index in that run's items. */
  readonly #pending = new Map<string, { run: RunView; index: number }>();
  /** Where the items are, as the snapshot lists them, until the first lookup indexes them (open needs none). */
  #unindexed: { ref: TextRef; places: () => Iterable<[string, RunView, number]> } | null;

  /**
   * `source.places`: each item's id, run and index in the run's items (not read yet), read from `source.ref` in the
   * text file when first needed.
   */
  constructor(source: { ref: TextRef; places: () => Iterable<[string, RunView, number]> } | null = null) {
    super();
    this.#unindexed = source;
  }

  /** The snapshot's list of places while nothing asked this map anything (it is then unchanged). */
  get unread(): TextRef | null {
    return this.#unindexed?.ref ?? null;
  }

  #index(): void {
    const source = this.#unindexed;
    if (!source) return;
    this.#unindexed = null;
    for (const [id, run, index] of source.places()) {
      if (super.has(id)) continue; // set since
      this.#pending.set(id, { run, index });
    }
  }

  #resolve(id: string): void {
    this.#index();
    const place = this.#pending.get(id);
    if (!place) return;
    this.#pending.delete(id);
    const item = place.run.items[place.index];
    if (item && !super.has(id)) super.set(id, item);
  }

  #resolveAll(): void {
    this.#index();
    for (const id of [...this.#pending.keys()]) this.#resolve(id);
  }

  override get(id: string): TurnItem | undefined {
    this.#resolve(id);
    return super.get(id);
  }

  override has(id: string): boolean {
    this.#index();
    return this.#pending.has(id) || super.has(id);
  }

  override set(id: string, item: TurnItem): this {
    this.#index();
    this.#pending.delete(id);
    return super.set(id, item);
  }

  override delete(id: string): boolean {
    this.#index();
    const pending = this.#pending.delete(id);
    return super.delete(id) || pending;
  }

  override clear(): void {
    this.#unindexed = null;
    this.#pending.clear();
    super.clear();
  }

  override get size(): number {
    this.#resolveAll();
    return super.size;
  }

  override entries(): MapIterator<[string, TurnItem]> {
    this.#resolveAll();
    return super.entries();
  }

  override keys(): MapIterator<string> {
    this.#resolveAll();
    return super.keys();
  }

  override values(): MapIterator<TurnItem> {
    this.#resolveAll();
    return super.values();
  }

  override forEach(fn: (value: TurnItem, key: string, map: Map<string, TurnItem>) => void, thisArg?: unknown): void {
    this.#resolveAll();
    super.forEach(fn, thisArg);
  }

  override [Symbol.iterator](): MapIterator<[string, TurnItem]> {
    return this.entries();
  }

  /**
   * For the snapshot writer, without reading anything: each entry as [id, run, index in its items] (a run whose
   * items were read gives the item's place there).
   */
  places(): Array<[string, RunView, number]> {
    if (this.#unindexed) return [...this.#unindexed.places()];
    const out: Array<[string, RunView, number]> = [];
    for (const [id, { run, index }] of this.#pending) out.push([id, run, index]);
    return out;
  }

  /** The entries read so far (for the writer: with `places`, the whole map). */
  read(): IterableIterator<[string, TurnItem]> {
    return super.entries();
  }
}

/** Whether a run's items are still in the text file (reading `run.items` would read them). */
export const itemsUnread = (run: RunView): boolean => unreadTexts(run)?.has("items") ?? false;
