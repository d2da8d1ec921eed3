import { createHash, randomFillSync } from "node:crypto";
import { InvalidInputError } from "./errors.js";

/** Prefixes make an app id's entity readable at a glance (`run_…`, `req_…`). */
export type IdPrefix =
  | "thr" // app thread
  | "run"
  | "att" // run attempt
  | "nod" // execution node
  | "req" // runtime request
  | "ses" // provider session
  | "pth" // provider thread
  | "ptu" // provider turn
  | "msg" // user message
  | "cmd" // command
  | "hnd" // context handoff
  | "xfr" // context transfer (fork)
  | "chk"; // filesystem checkpoint

/** Where top-level ids come from: a boundary, so tests can make them deterministic. */
export interface IdSource {
  next(prefix: IdPrefix): string;
}

/** Random bytes of an id's tail. */
const RANDOM_BYTES = 6;
/** Random bytes drawn at once: one call to the system's generator for many ids, not one each. */
const POOL_BYTES = RANDOM_BYTES * 512;

/** Time-ordered, collision-resistant ids for production use. */
export function randomIds(now: () => number = Date.now): IdSource {
  const pool = Buffer.alloc(POOL_BYTES);
  let used = POOL_BYTES;
  return {
    next(prefix) {
      const time = now().toString(36).padStart(9, "0");
      if (used === POOL_BYTES) {
        randomFillSync(pool);
        used = 0;
      }
      used += RANDOM_BYTES;
      return `${prefix}_${time}${pool.toString("hex", used - RANDOM_BYTES, used)}`;
    },
  };
}

/** Counter-based ids (`run_1`, `run_2`, …) for tests and replays. */
export function sequentialIds(): IdSource {
  const counters = new Map<IdPrefix, number>();
  return {
    next(prefix) {
      const n = (counters.get(prefix) ?? 0) + 1;
      counters.set(prefix, n);
      return `${prefix}_${n}`;
    },
  };
}

/**
 * An id derived from its scope: the same scope and key always give the same id. This is
 * what makes normalization replay-deterministic (nodes, requests and provider turns are
 * never drawn from a random source).
 */
export function derivedId(prefix: IdPrefix, ...scope: ReadonlyArray<string | number>): string {
  const hash = createHash("sha256").update(scope.join("\u0000")).digest("base64url");
  return `${prefix}_${hash.slice(0, 16)}`;
}

/** An app id's tail, after its entity's prefix (`run_…`): letters, digits, `_` or `-` (what the API takes back). */
const ID_TAIL = /^[A-Za-z0-9_-]+$/;

/**
 * Wraps a source so it never returns an id already in use (a deterministic source restarts at 1 every life), and
 * never one of another shape. The source is the embedder's, so what it gives is checked like any input
 * (`invalid_input` naming `ids`): an id that is not a string of the prefix's shape (it would be written, and make the
 * log unreadable), and a source that gives back an id it already gave in this search (it would be asked forever,
 * and the embedder's event loop never run again). A source of fresh ids ends the search: the ids in use are finite.
 */
export function unusedIds(source: IdSource, inUse: (id: string) => boolean): IdSource {
  const draw = (prefix: IdPrefix): string => {
    const id: unknown = source.next(prefix);
    if (typeof id !== "string" || !id.startsWith(`${prefix}_`) || !ID_TAIL.test(id.slice(prefix.length + 1)))
      throw new InvalidInputError(
        "ids",
        `next("${prefix}") returned ${describe(id)}: expected "${prefix}_" then letters, digits, _ or -`,
      );
    return id;
  };
  return {
    next(prefix) {
      let id = draw(prefix);
      if (!inUse(id)) return id;
      const tried = new Set<string>();
      while (inUse(id)) {
        if (tried.has(id))
          throw new InvalidInputError("ids", `next("${prefix}") keeps returning ${id}, which is already in use`);
        tried.add(id);
        id = draw(prefix);
      }
      return id;
    },
  };
}

function describe(value: unknown): string {
  if (typeof value !== "string") return value === null ? "null" : `a ${typeof value}`;
  return JSON.stringify(value.length > 40 ? `${value.slice(0, 40)}…` : value);
}
