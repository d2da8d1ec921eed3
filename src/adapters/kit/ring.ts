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

/**
 * Recent raw frames and stderr lines of one host, for failure reports: bounded in count and
 * bytes, each entry truncated, secrets redacted before they are kept (so a report can be
 * logged as is). Anomalies are counted by kind (`counts`) and sampled in as `note` entries.
 */
export class FrameRing {
  #entries: string[] = [];
  #bytes = 0;
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
    let clean = redact(this.#outsideKeyBlock(kind, text));
    for (const secret of this.secrets) if (secret) clean = clean.split(secret).join("[redacted]");
    const entry = `${kind} ${clean.length > maxChars ? `${clean.slice(0, maxChars)}…` : clean}`;
    this.#entries.push(entry);
    this.#bytes += entry.length;
    while (this.#entries.length > this.maxEntries || this.#bytes > this.maxBytes)
      this.#bytes -= this.#entries.shift()!.length;
  }

  /**
   * `text` without the lines of a private key block an earlier entry of this kind opened (stderr comes line by line).
   */
  #outsideKeyBlock(kind: string, text: string): string {
    let rest = text;
    if (this.#inKeyBlock.has(kind)) {
      const end = keyBlockEnd(text);
      if (end < 0) return REDACTED;
      this.#inKeyBlock.delete(kind);
      rest = `${REDACTED}${text.slice(end)}`;
    }
    if (opensKeyBlock(rest)) this.#inKeyBlock.add(kind);
    return rest;
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

  /** The last `count` entries, oldest first. */
  tail(count = 20): string[] {
    return this.#entries.slice(-count);
  }
}
