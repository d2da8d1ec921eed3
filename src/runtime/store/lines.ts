/**
 * The event log's lines: `{"seq":…,"at":"…","event":<json>}\n`, written around the event's json straight into one
 * buffer per batch (no line or joined text is made first: at thousands of records a second, those copies were a good
 * part of what the log allocated).
 */

/** What a line is made of: the event's json is made at append (where a value that is not JSON is refused). */
export interface LineOf {
  seq: number;
  at: string;
  json: string | null;
}

/** The event's JSON; throws a TypeError for a value that has none. */
export function jsonOf(event: unknown): string {
  const json = JSON.stringify(event) as string | undefined;
  if (json === undefined) throw new TypeError("the event is not JSON");
  return json;
}

/** A line's characters besides its event's json, at most: `{"seq":`, 16 digits, `,"at":"`, an ISO time, `","event":`,
 * `}\n`. */
const ENVELOPE_CHARS = 7 + 16 + 7 + 27 + 11 + 2;
/** The buffer kept for the next batch is at most this big (a larger batch gets one of its own). */
const KEPT_BUFFER_BYTES = 1024 * 1024;

/** Writes batches' lines into a buffer it keeps and reuses: one batch at a time (the log has one write in flight). */
export class BatchLines {
  #buffer = Buffer.alloc(0);

  /** The batch's lines (every `json` made) and where each line ends in them; valid until the next call. */
  write(batch: readonly LineOf[]): { data: Buffer; ends: number[] } {
    let chars = 0;
    for (const line of batch) chars += line.json!.length + ENVELOPE_CHARS;
    const bytes = chars * 3; // UTF-8 takes at most 3 bytes for a UTF-16 unit
    let buffer = this.#buffer;
    if (bytes > buffer.length) {
      buffer = Buffer.allocUnsafeSlow(Math.max(bytes, 64 * 1024));
      if (buffer.length <= KEPT_BUFFER_BYTES) this.#buffer = buffer;
    }
    const ends: number[] = new Array(batch.length);
    let end = 0;
    for (let i = 0; i < batch.length; i++) {
      const { seq, at, json } = batch[i]!;
      end += buffer.write(`{"seq":${seq},"at":"${at}","event":`, end, "latin1");
      end += buffer.write(json!, end, "utf8");
      buffer[end++] = 0x7d; // }
      buffer[end++] = 0x0a; // \n
      ends[i] = end;
    }
    return { data: buffer.subarray(0, end), ends };
  }
}
