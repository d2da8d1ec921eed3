import { redact } from "../../domain/redact.js";

/**
 * Recent raw frames and stderr lines of one host, for failure reports: bounded in count and
 * bytes, each entry truncated, secrets redacted before they are kept (so a report can be
 * logged as is).
 */
export class FrameRing {
  #entries: string[] = [];
  #bytes = 0;

  constructor(
    private readonly maxEntries = 200,
    private readonly maxBytes = 64 * 1024,
    private readonly maxEntryBytes = 2 * 1024,
    /** Values that must never appear (the host's token): masked in every entry. */
    private readonly secrets: readonly string[] = [],
  ) {}

  push(kind: "in" | "out" | "stderr", text: string): void {
    let clean = redact(text);
    for (const secret of this.secrets) if (secret) clean = clean.split(secret).join("[redacted]");
    const entry = `${kind} ${clean.length > this.maxEntryBytes ? `${clean.slice(0, this.maxEntryBytes)}…` : clean}`;
    this.#entries.push(entry);
    this.#bytes += entry.length;
    while (this.#entries.length > this.maxEntries || this.#bytes > this.maxBytes) this.#bytes -= this.#entries.shift()!.length;
  }

  /** The last `count` entries, oldest first. */
  tail(count = 20): string[] {
    return this.#entries.slice(-count);
  }
}
