import { keyBlockEnd, opensKeyBlock, REDACTED } from "../../domain/credentials.js";
import { redact } from "../../domain/redact.js";

/**
 * What a host sent that no one could use. Each is counted and sampled into the ring (never
 * dropped unseen): a line that is not JSON, JSON that is not a JSON-RPC message, a
 * notification the channel does not expect or whose params the adapter cannot read, a reply
 * to an id no call waits for, a request nobody handles, a listener that threw on a message, a
 * line or frame over the size cap.
 */
export type FrameAnomaly =
  | "not_json"
  | "not_rpc"
  | "unknown_notification"
  | "invalid_params"
  | "unknown_reply"
  | "unhandled_request"
  | "listener_error"
  | "frame_too_large";

/** How much of an anomalous frame its ring entry keeps. */
const SAMPLE_CHARS = 200;
/** How much of it is redacted to get there (a redacted secret is shorter than the secret). */
const SAMPLE_SOURCE_CHARS = 64 * 1024;

/** Raw text an entry keeps at most, all entries together (the cleaned entries are bounded apart, by `maxBytes`). */
const RAW_BYTES_MAX = 1024 * 1024;

/**
 * Recent raw frames and stderr lines of one host, for failure reports: bounded in count and bytes, each entry
 * truncated, secrets redacted (so a report can be logged as is). Redaction runs when entries are read (`tail`), not
 * for every frame that passes: a host streams thousands of frames for every report anyone reads. Until then the
 * entries stay in this process's memory only, like the frames themselves. Anomalies are counted by kind (`counts`)
 * and sampled in as `note` entries.
 *
 * The entries live in fixed-size circular columns (one slot per entry, no object or array shift per frame): a push
 * is on every frame's path.
 */
export class FrameRing {
  readonly #kinds: string[];
  /** Each entry's text as it came, at most SAMPLE_SOURCE_CHARS of it. */
  readonly #raws: string[];
  readonly #maxChars: Float64Array;
  /** What each entry takes at most once cleaned (see `bound`). */
  readonly #bounds: Float64Array;
  /** An earlier entry of its kind opened a private key block this entry's text may close. */
  readonly #inKeyBlockAt: Uint8Array;
  /** The slot of the oldest entry, and how many there are. */
  #head = 0;
  #size = 0;
  /** What the cleaned entries take at most (each is cut to its `maxChars`). */
  #bytes = 0;
  #rawBytes = 0;
  #counts = new Map<FrameAnomaly, number>();
  /** Entry kinds whose last entry opened a private key block: their next lines are the key. */
  #inKeyBlock = new Set<string>();

  constructor(
    maxEntries = 200,
    private readonly maxBytes = 64 * 1024,
    private readonly maxEntryBytes = 2 * 1024,
    /** Values that must never appear (the host's token): masked in every entry. */
    private readonly secrets: readonly string[] = [],
  ) {
    const capacity = Math.max(0, Math.floor(maxEntries));
    this.#kinds = new Array<string>(capacity).fill("");
    this.#raws = new Array<string>(capacity).fill("");
    this.#maxChars = new Float64Array(capacity);
    this.#bounds = new Float64Array(capacity);
    this.#inKeyBlockAt = new Uint8Array(capacity);
  }

  push(kind: "in" | "out" | "stderr" | "note", text: string, maxChars = this.maxEntryBytes): void {
    // Cut before redaction only this far out: a secret cut in half would no longer look like one.
    const raw = text.length > SAMPLE_SOURCE_CHARS ? text.slice(0, SAMPLE_SOURCE_CHARS) : text;
    const inKeyBlock = this.#trackKeyBlock(kind, raw);
    const capacity = this.#kinds.length;
    if (capacity === 0) return;
    let slot = this.#head + this.#size;
    if (this.#size === capacity) {
      // Full: the oldest entry's slot takes the new one.
      slot = this.#head;
      this.#bytes -= this.#bounds[slot]!;
      this.#rawBytes -= this.#raws[slot]!.length;
      this.#head = slot + 1 === capacity ? 0 : slot + 1;
    } else {
      if (slot >= capacity) slot -= capacity;
      this.#size++;
    }
    const entryBytes = bound(kind, Math.min(raw.length, maxChars));
    this.#kinds[slot] = kind;
    this.#raws[slot] = raw;
    this.#maxChars[slot] = maxChars;
    this.#bounds[slot] = entryBytes;
    this.#inKeyBlockAt[slot] = inKeyBlock ? 1 : 0;
    this.#bytes += entryBytes;
    this.#rawBytes += raw.length;
    while (this.#size > 0 && (this.#bytes > this.maxBytes || this.#rawBytes > RAW_BYTES_MAX)) this.#dropOldest();
  }

  #dropOldest(): void {
    const slot = this.#head;
    this.#bytes -= this.#bounds[slot]!;
    this.#rawBytes -= this.#raws[slot]!.length;
    this.#raws[slot] = ""; // the dropped text is not kept alive
    this.#head = slot + 1 === this.#kinds.length ? 0 : slot + 1;
    this.#size--;
  }

  /**
   * Whether `text` comes inside a private key block an earlier entry of this kind opened (stderr comes line by line),
   * and whether one stays open after it.
   */
  #trackKeyBlock(kind: string, text: string): boolean {
    const inside = this.#inKeyBlock.size > 0 && this.#inKeyBlock.has(kind);
    let rest = text;
    if (inside) {
      const end = keyBlockEnd(text);
      if (end < 0) return true;
      this.#inKeyBlock.delete(kind);
      rest = text.slice(end);
    }
    if (opensKeyBlock(rest)) this.#inKeyBlock.add(kind);
    return inside;
  }

  #clean(slot: number): string {
    const raw = this.#raws[slot]!;
    const maxChars = this.#maxChars[slot]!;
    let clean = redact(this.#inKeyBlockAt[slot] ? outsideKeyBlock(raw) : raw);
    for (const secret of this.secrets) if (secret) clean = clean.split(secret).join("[redacted]");
    return `${this.#kinds[slot]!} ${clean.length > maxChars ? `${clean.slice(0, maxChars)}…` : clean}`;
  }

  /** Counts one anomaly and keeps a sample of it (`note <kind> #<n>: <sample>`). */
  note(kind: FrameAnomaly, sample: string): void {
    const n = (this.#counts.get(kind) ?? 0) + 1;
    this.#counts.set(kind, n);
    // Cut after redaction (a secret cut in half would no longer look like one), from a bounded slice.
    this.push("note", `${kind} #${n}: ${sample.slice(0, SAMPLE_SOURCE_CHARS)}`, SAMPLE_CHARS);
  }

  /** Anomalies seen so far, by kind (only kinds seen at least once). */
  get counts(): Readonly<Partial<Record<FrameAnomaly, number>>> {
    return Object.fromEntries(this.#counts);
  }

  /** The last `count` entries, oldest first, cleaned. */
  tail(count = 20): string[] {
    // Which entries, as `entries.slice(-count)` takes them.
    const from = Math.trunc(-count) || 0;
    const start = from < 0 ? Math.max(this.#size + from, 0) : Math.min(from, this.#size);
    const out: string[] = [];
    for (let i = start; i < this.#size; i++) out.push(this.#clean((this.#head + i) % this.#kinds.length));
    return out;
  }
}

/** What an entry may take once cleaned: its kind, a space, and at most `maxChars` and an ellipsis. */
function bound(kind: string, cutChars: number): number {
  return kind.length + 2 + cutChars;
}

/** A text that comes inside a private key block: the key lines masked, up to the block's END line if it has one. */
function outsideKeyBlock(text: string): string {
  const end = keyBlockEnd(text);
  return end < 0 ? REDACTED : `${REDACTED}${text.slice(end)}`;
}
