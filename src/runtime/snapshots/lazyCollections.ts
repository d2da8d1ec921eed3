import type { TextRef } from "./texts.js";

/**
 * A Map, or a Set, whose contents a snapshot keeps in its text file (texts.ts): read the first time anything uses
 * it (open uses neither the receipts nor the known ids); until then the snapshot writer refers to them where they
 * are (`unread`).
 */

function parsed(ref: TextRef): unknown[] {
  const list: unknown = JSON.parse(ref.store.read(ref.start, ref.bytes));
  if (!Array.isArray(list)) throw new Error(`${ref.store.path}: a collection is not a list`);
  return list;
}

export class LazyMap<K, V> extends Map<K, V> {
  #unread: TextRef | null;

  constructor(ref: TextRef) {
    super();
    this.#unread = ref;
  }

  /** Where its entries are while none was read. */
  get unread(): TextRef | null {
    return this.#unread;
  }

  #load(): void {
    const ref = this.#unread;
    if (!ref) return;
    this.#unread = null;
    for (const [key, value] of parsed(ref) as Array<[K, V]>) super.set(key, value);
  }

  override get(key: K): V | undefined {
    this.#load();
    return super.get(key);
  }
  override has(key: K): boolean {
    this.#load();
    return super.has(key);
  }
  override set(key: K, value: V): this {
    this.#load();
    return super.set(key, value);
  }
  override delete(key: K): boolean {
    this.#load();
    return super.delete(key);
  }
  override clear(): void {
    this.#unread = null;
    super.clear();
  }
  override get size(): number {
    this.#load();
    return super.size;
  }
  override entries(): MapIterator<[K, V]> {
    this.#load();
    return super.entries();
  }
  override keys(): MapIterator<K> {
    this.#load();
    return super.keys();
  }
  override values(): MapIterator<V> {
    this.#load();
    return super.values();
  }
  override forEach(fn: (value: V, key: K, map: Map<K, V>) => void, thisArg?: unknown): void {
    this.#load();
    super.forEach(fn, thisArg);
  }
  override [Symbol.iterator](): MapIterator<[K, V]> {
    return this.entries();
  }
}

export class LazySet<T> extends Set<T> {
  #unread: TextRef | null;

  constructor(ref: TextRef) {
    super();
    this.#unread = ref;
  }

  /** Where its values are while none was read. */
  get unread(): TextRef | null {
    return this.#unread;
  }

  #load(): void {
    const ref = this.#unread;
    if (!ref) return;
    this.#unread = null;
    for (const value of parsed(ref) as T[]) super.add(value);
  }

  override has(value: T): boolean {
    this.#load();
    return super.has(value);
  }
  override add(value: T): this {
    this.#load();
    return super.add(value);
  }
  override delete(value: T): boolean {
    this.#load();
    return super.delete(value);
  }
  override clear(): void {
    this.#unread = null;
    super.clear();
  }
  override get size(): number {
    this.#load();
    return super.size;
  }
  override values(): SetIterator<T> {
    this.#load();
    return super.values();
  }
  override keys(): SetIterator<T> {
    return this.values();
  }
  override entries(): SetIterator<[T, T]> {
    this.#load();
    return super.entries();
  }
  override forEach(fn: (value: T, key: T, set: Set<T>) => void, thisArg?: unknown): void {
    this.#load();
    super.forEach(fn, thisArg);
  }
  override [Symbol.iterator](): SetIterator<T> {
    return this.values();
  }
}
