import { StoreCorruptError } from "../../domain/errors.js";
import { readJson, type TextRef } from "./textStore.js";

/**
 * A Map, or a Set, whose contents a snapshot keeps in its text file (texts.ts): read the first time anything uses
 * it (open uses neither the receipts nor the known ids); until then the snapshot writer refers to them where they
 * are (`unread`).
 */

/** Where a collection's contents are until it is first used; `take` reads them, once. */
class Unread<T> {
  constructor(public ref: TextRef | null) {}

  take(): T[] {
    const ref = this.ref;
    if (!ref) return [];
    this.ref = null;
    const list = readJson(ref, "collections");
    if (!Array.isArray(list)) throw new StoreCorruptError(`${ref.store.path}: a collection is not a list`, {});
    return list as T[];
  }
}

export class LazyMap<K, V> extends Map<K, V> {
  readonly #unread: Unread<[K, V]>;

  constructor(ref: TextRef) {
    super();
    this.#unread = new Unread(ref);
  }

  /** Where its entries are while none was read. */
  get unread(): TextRef | null {
    return this.#unread.ref;
  }

  #load(): void {
    for (const [key, value] of this.#unread.take()) super.set(key, value);
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
    this.#unread.ref = null;
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
  readonly #unread: Unread<T>;

  constructor(ref: TextRef) {
    super();
    this.#unread = new Unread(ref);
  }

  /** Where its values are while none was read. */
  get unread(): TextRef | null {
    return this.#unread.ref;
  }

  #load(): void {
    for (const value of this.#unread.take()) super.add(value);
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
    this.#unread.ref = null;
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
