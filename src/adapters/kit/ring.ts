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

/** A frame as it came: cleaned (redacted, cut) only when someone reads it. */
interface RawEntry {
  kind: string;
  /** At most SAMPLE_SOURCE_CHARS of the text. */
  raw: string;
  maxChars: number;
  /** An earlier entry of this kind opened a private key block this text may close. */
  inKeyBlock: boolean;
}

/**
 * Recent raw frames and stderr lines of one host, for failure reports: bounded in count and bytes, each entry
 * truncated, secrets redacted (so a report can be logged as is). Redaction runs when entries are read (`tail`), not
 * for every frame that passes: a host streams thousands of frames for every report anyone reads. Until then the
 * entries stay in this process's memory only, like the frames themselves. Anomalies are counted by kind (`counts`)
 * and sampled in as `note` entries.
 */
export class FrameRing {
  #entries: RawEntry[] = [];
  /** What the cleaned entries take at most (each is cut to its `maxChars`). */
  #bytes = 0;
  #rawBytes = 0;
  #counts = new Map<FrameAnomaly, number>();
  /** Entry kinds whose last entry opened a private key block: their next lines are the key. */
  #inKeyBlock = new Set<string>();

  constructor(
    private readonly maxEntries = 200,
    private readonly maxBytes = 64 * 1024,
    private readonly maxEntryBytes = 2 * 1024,
    /** Values that must never appear (the host's token): masked in every entry. */
    private readonly secrets: readonly string[] = [],
  ) {}

  push(kind: "in" | "out" | "stderr" | "note", text: string, maxChars = this.maxEntryBytes): void {
    // Cut before redaction only this far out: a secret cut in half would no longer look like one.
    const raw = text.length > SAMPLE_SOURCE_CHARS ? text.slice(0, SAMPLE_SOURCE_CHARS) : text;
    const entry: RawEntry = { kind, raw, maxChars, inKeyBlock: this.#trackKeyBlock(kind, raw) };
    this.#entries.push(entry);
    this.#bytes += bound(entry);
    this.#rawBytes += raw.length;
    while (this.#entries.length > this.maxEntries || this.#bytes > this.maxBytes || this.#rawBytes > RAW_BYTES_MAX) {
      const dropped = this.#entries.shift()!;
      this.#bytes -= bound(dropped);
      this.#rawBytes -= dropped.raw.length;
    }
  }

  /**
   * Whether `text` comes inside a private key block an earlier entry of this kind opened (stderr comes line by line),
   * and whether one stays open after it.
   */
  #trackKeyBlock(kind: string, text: string): boolean {
    const inside = this.#inKeyBlock.has(kind);
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

  #clean({ kind, raw, maxChars, inKeyBlock }: RawEntry): string {
    let clean = redact(inKeyBlock ? outsideKeyBlock(raw) : raw);
    for (const secret of this.secrets) if (secret) clean = clean.split(secret).join("[redacted]");
    return `${kind} ${clean.length > maxChars ? `${clean.slice(0, maxChars)}…` : clean}`;
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
    return this.#entries.slice(-count).map((entry) => this.#clean(entry));
  }
}

/** What an entry may take once cleaned: its kind, a space, and at most `maxChars` and an ellipsis. */
function bound(entry: RawEntry): number {
  return entry.kind.length + 2 + Math.min(entry.raw.length, entry.maxChars);
}

/** A text that comes inside a private key block: the key lines masked, up to the block's END line if it has one. */
function outsideKeyBlock(text: string): string {
  const end = keyBlockEnd(text);
  return end < 0 ? REDACTED : `${REDACTED}${text.slice(end)}`;
}
