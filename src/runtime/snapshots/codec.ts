/**
 * A JSON form of an object graph (plain objects, arrays, Maps, Sets, primitives) that keeps its sharing: an object
 * reached twice is written once and referenced after, so the graph read back has the same identities (a transcript
 * item that is both in its run's `items` and in the items-by-id map is still one object, and later folds mutate it
 * in both places, as a live fold would).
 *
 * Every non-primitive value becomes an array led by a tag:
 * `["o", {key: value}]` object, `["a", [values]]` array, `["m", [k, v, k, v...]]` Map, `["s", [values]]` Set,
 * `["r", n]` the n-th object met (0-based, counted in the order written), `["u"]` undefined.
 * Objects are numbered when first met, before their contents, on both sides: the reader rebuilds the numbering by
 * walking in the writer's order.
 * With a text file (texts.ts), an object's field holding a long string is `["t", start, bytes]`: read back as a
 * field that reads its text on first access; a field of that kind not read (or not changed) since is written as where
 * it already is.
 */

import { lazyText, type TextSink } from "./texts.js";
import { type TextRef, type TextStore } from "./textStore.js";

/** Why a snapshot's graph cannot be read back (a file on disk is untrusted). */
export class SnapshotShapeError extends Error {}

export function encodeGraph(root: unknown, texts?: TextSink): unknown {
  const ids = new Map<object, number>();
  const encode = (value: unknown): unknown => {
    if (value === null || typeof value === "string" || typeof value === "boolean") return value;
    if (typeof value === "number") {
      if (!Number.isFinite(value)) throw new SnapshotShapeError(`cannot keep the number ${value}`);
      return value;
    }
    if (value === undefined) return ["u"];
    if (typeof value !== "object") throw new SnapshotShapeError(`cannot keep a ${typeof value}`);
    const seen = ids.get(value);
    if (seen !== undefined) return ["r", seen];
    ids.set(value, ids.size);
    if (Array.isArray(value)) return ["a", value.map(encode)];
    if (value instanceof Map) {
      const pairs: unknown[] = [];
      for (const [k, v] of value) pairs.push(encode(k), encode(v));
      return ["m", pairs];
    }
    if (value instanceof Set) return ["s", [...value].map(encode)];
    const proto = Object.getPrototypeOf(value) as unknown;
    if (proto !== Object.prototype && proto !== null) throw new SnapshotShapeError("cannot keep a class instance");
    const out: Record<string, unknown> = {};
    for (const key of Object.keys(value)) {
      const at = texts?.field(value, key);
      define(out, key, at ? ["t", ...at] : encode((value as Record<string, unknown>)[key]));
    }
    return ["o", out];
  };
  return encode(root);
}

export function decodeGraph(data: unknown, texts?: { store: TextStore; bytes: number }): unknown {
  const objects: unknown[] = [];
  const bad = (why: string): never => {
    throw new SnapshotShapeError(why);
  };
  const textRef = ([, start, bytes]: unknown[]): TextRef => {
    if (!texts) return bad("a text field without a text file");
    const fits = (n: unknown): n is number => typeof n === "number" && Number.isInteger(n) && n >= 0;
    if (!fits(start) || !fits(bytes) || start + bytes > texts.bytes) return bad("a text field out of its file");
    return { store: texts.store, start, bytes };
  };
  const decode = (node: unknown): unknown => {
    if (node === null || typeof node === "string" || typeof node === "boolean" || typeof node === "number") return node;
    if (!Array.isArray(node) || typeof node[0] !== "string") return bad("a node is not a tagged array");
    const body: unknown = node[1];
    switch (node[0]) {
      case "u":
        return undefined;
      case "r":
        if (typeof body !== "number" || !Number.isInteger(body) || body < 0 || body >= objects.length)
          return bad(`a reference to an unknown object ${String(body)}`);
        return objects[body];
      case "a": {
        if (!Array.isArray(body)) return bad("an array node without its values");
        const out: unknown[] = [];
        objects.push(out);
        for (const item of body) out.push(decode(item));
        return out;
      }
      case "m": {
        if (!Array.isArray(body) || body.length % 2 !== 0) return bad("a map node without its pairs");
        const out = new Map<unknown, unknown>();
        objects.push(out);
        for (let i = 0; i < body.length; i += 2) {
          const key = decode(body[i]);
          out.set(key, decode(body[i + 1]));
        }
        return out;
      }
      case "s": {
        if (!Array.isArray(body)) return bad("a set node without its values");
        const out = new Set<unknown>();
        objects.push(out);
        for (const item of body) out.add(decode(item));
        return out;
      }
      case "o": {
        if (typeof body !== "object" || body === null || Array.isArray(body))
          return bad("an object node without fields");
        const out: Record<string, unknown> = {};
        objects.push(out);
        for (const key of Object.keys(body)) {
          const field = (body as Record<string, unknown>)[key];
          if (Array.isArray(field) && field[0] === "t") lazyText(out, key, textRef(field));
          else define(out, key, decode(field));
        }
        return out;
      }
      default:
        return bad(`an unknown tag ${node[0]}`);
    }
  };
  return decode(data);
}

/** Sets an own field, `__proto__` included (an assignment to it would change the prototype instead). */
function define(target: Record<string, unknown>, key: string, value: unknown): void {
  if (key === "__proto__")
    Object.defineProperty(target, key, { value, enumerable: true, writable: true, configurable: true });
  else target[key] = value;
}
