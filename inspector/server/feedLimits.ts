import type { LogEntry } from "./protocol.js";

/**
 * Sizes on the feed (runtime -> inspector server). The server drops a feed socket that sends
 * a message over its limit; the feed then reconnects and sends the log again from seq 1, so a
 * single record over the limit used to loop forever (drop, reconnect, resend, drop). The feed
 * therefore never sends a message over the limit: records are cut to a size the page can show
 * (with a marker saying what was cut and how big it was), and log messages are batched by
 * bytes as well as by count.
 */
export const FEED_LIMITS = {
  /** The largest WebSocket message the server takes from a feed (its maxPayload). */
  messageBytes: 64 * 1024 * 1024,
  /** A log record larger than this (as JSON) is sent cut. */
  recordBytes: 1024 * 1024,
  /** A `log` message gathers records up to this many bytes (and 500 records). */
  batchBytes: 8 * 1024 * 1024,
  /** What a cut string keeps. */
  keptChars: 4 * 1024,
} as const;

/** What the feed cut from a record, on its event as `feedCut`. */
export interface FeedCut {
  /** The record's size as JSON before the cut, in bytes. */
  recordBytes: number;
  limitBytes: number;
  /**
   * Each value cut, by path in the event ("output", "payload.questions.0.text"): strings by length in chars, other
   * values by JSON bytes.
   */
  fields: Record<string, { chars: number } | { bytes: number }>;
}

const utf8Bytes = (text: string): number => Buffer.byteLength(text);

/** Fits when even three bytes per char would: no need to count. */
const fits = (json: string, maxBytes: number): boolean => json.length * 3 <= maxBytes || utf8Bytes(json) <= maxBytes;

/**
 * A record as JSON of at most `maxBytes`: unchanged when it fits; else its long strings are
 * cut to their first `keptChars` (with an inline marker), then, if that is not enough, its
 * largest remaining values are replaced by a marker, largest first. The event keeps its type,
 * ids and every small field, so the page still folds it; `event.feedCut` lists the cuts.
 */
export function fitRecord(
  record: LogEntry,
  maxBytes: number = FEED_LIMITS.recordBytes,
  keptChars: number = FEED_LIMITS.keptChars,
): string {
  const json = JSON.stringify(record);
  if (fits(json, maxBytes)) return json;
  const cut: FeedCut = { recordBytes: utf8Bytes(json), limitBytes: maxBytes, fields: {} };
  const event = cutStrings(record.event, "", keptChars, cut.fields) as LogEntry["event"];
  let fitted = { ...record, event: { ...event, feedCut: cut } };
  let text = JSON.stringify(fitted);
  if (fits(text, maxBytes)) return text;
  // Still too big (many small values): drop whole values, largest first, keeping the type and ids.
  const sizes = Object.entries(fitted.event)
    .filter(([key]) => !KEPT.has(key))
    .map(([key, value]) => [key, utf8Bytes(JSON.stringify(value) ?? "")] as const)
    .sort((a, b) => b[1] - a[1]);
  const event2: Record<string, unknown> = { ...fitted.event };
  for (const [key, bytes] of sizes) {
    event2[key] = `‹cut by the inspector feed: ${bytes} bytes›`;
    cut.fields[key] = { bytes };
    fitted = { ...record, event: { ...(event2 as LogEntry["event"]), feedCut: cut } };
    text = JSON.stringify(fitted);
    if (fits(text, maxBytes)) return text;
  }
  return text; // only the type, ids and the marker are left: small
}

/** Fields that make a record what it is to the page: never cut. */
const KEPT = new Set(["type", "threadId", "runId", "attemptId", "requestId", "nodeId", "sessionId", "seq", "feedCut"]);

function cutStrings(value: unknown, path: string, keptChars: number, fields: FeedCut["fields"]): unknown {
  if (typeof value === "string") {
    if (value.length <= keptChars) return value;
    fields[path] = { chars: value.length };
    return `${value.slice(0, keptChars)}… [cut by the inspector feed: ${value.length} chars in all]`;
  }
  if (Array.isArray(value)) return value.map((v, i) => cutStrings(v, join(path, String(i)), keptChars, fields));
  if (value && typeof value === "object") {
    return Object.fromEntries(
      Object.entries(value).map(([k, v]) => [k, cutStrings(v, join(path, k), keptChars, fields)]),
    );
  }
  return value;
}

const join = (path: string, key: string): string => (path ? `${path}.${key}` : key);

/**
 * Records (already fitted JSON) into `log` messages of at most `batchBytes` and `maxRecords`
 * each: `add` returns the message text to send when the next record would not fit.
 */
export class LogBatcher {
  #records: string[] = [];
  #bytes = 0;

  constructor(
    private readonly batchBytes: number = FEED_LIMITS.batchBytes,
    private readonly maxRecords = 500,
  ) {}

  get size(): number {
    return this.#records.length;
  }

  /** Adds a record; returns a full message to send first, if the record does not fit beside what is held. */
  add(recordJson: string): string | null {
    const bytes = utf8Bytes(recordJson) + 1;
    const full =
      this.#records.length > 0 && (this.#bytes + bytes > this.batchBytes || this.#records.length >= this.maxRecords)
        ? this.take()
        : null;
    this.#records.push(recordJson);
    this.#bytes += bytes;
    return full;
  }

  /** The held records as one `log` message (null when none). */
  take(): string | null {
    if (this.#records.length === 0) return null;
    const message = `{"kind":"log","records":[${this.#records.join(",")}]}`;
    this.#records = [];
    this.#bytes = 0;
    return message;
  }
}
