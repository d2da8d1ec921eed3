import { maskCredentials, opensKeyBlock } from "../../src/domain/credentials.js";

/**
 * Longest stretch of one item's stream held to be judged (the current line, or an open private
 * key block). Past it the item's later deltas are withheld: its `node.completed` carries the
 * whole text, masked. It bounds the work per delta (each delta masks the stretch again).
 */
const MAX_WINDOW_CHARS = 16 * 1024;

interface Stream {
  runId: string;
  /** Raw text of the item since the last settled line end. */
  window: string;
  /** What the page was sent of the masked `window`. */
  sent: string;
  withheld: boolean;
}

type Event = { type: string; [key: string]: unknown };

/**
 * Deltas as the page may see them. A credential can arrive in pieces (`sk-proj-Ab`, then
 * `Cd3...`) and no piece looks like one, so the page never gets a raw delta: it gets what the
 * item's assembled text, masked as a whole, has gained up to its last whitespace. Text after
 * that could still turn out to be part of a credential; it waits for the next delta. This is
 * sound because of the rules the credential table keeps (src/domain/credentials.ts): a value is
 * a whitespace-free run or masked to its end (header line, quote, key block), and a mask keeps
 * the name before the value, so what was sent is always a prefix of the masked whole. Should
 * that ever fail, the item's deltas are withheld rather than sent unmasked. Assembled text is
 * kept per item from its last complete line (no mask crosses a line end but a private key
 * block's) and forgotten when the item or its run ends.
 */
export class AssembledStreams {
  #streams = new Map<string, Stream>();

  /** `event` as the page may see it: a `node.delta`'s text replaced as above; other events unchanged. */
  apply<E extends Event>(event: E): E {
    switch (event.type) {
      case "node.delta":
        return {
          ...event,
          delta: this.#delta(
            `${String(event.nodeId)}:${String(event.stream)}`,
            String(event.runId ?? ""),
            String(event.delta ?? ""),
          ),
        };
      case "node.completed":
        for (const stream of ["text", "output"]) this.#streams.delete(`${String(event.nodeId)}:${stream}`);
        return event;
      case "run.terminal":
        for (const [key, stream] of this.#streams) if (stream.runId === event.runId) this.#streams.delete(key);
        return event;
      default:
        return event;
    }
  }

  #delta(key: string, runId: string, delta: string): string {
    let stream = this.#streams.get(key);
    if (!stream) this.#streams.set(key, (stream = { runId, window: "", sent: "", withheld: false }));
    if (stream.withheld) return "";
    stream.window += delta;
    const boundary = lastWhitespace(stream.window) + 1;
    const stable = maskCredentials(stream.window.slice(0, boundary));
    if (!stable.startsWith(stream.sent)) return this.#withhold(stream);
    const fresh = stable.slice(stream.sent.length);
    stream.sent = stable;
    this.#settle(stream, boundary);
    if (stream.window.length > MAX_WINDOW_CHARS) this.#withhold(stream);
    return fresh;
  }

  /**
   * Forgets the complete lines before `boundary` (outside a private key block): later text cannot change their mask.
   */
  #settle(stream: Stream, boundary: number): void {
    const lineEnd = stream.window.lastIndexOf("\n", boundary - 1);
    if (lineEnd < 0) return;
    const settled = stream.window.slice(0, lineEnd + 1);
    if (opensKeyBlock(settled)) return;
    const masked = maskCredentials(settled);
    if (!stream.sent.startsWith(masked)) return;
    stream.window = stream.window.slice(lineEnd + 1);
    stream.sent = stream.sent.slice(masked.length);
  }

  #withhold(stream: Stream): string {
    stream.withheld = true;
    stream.window = "";
    stream.sent = "";
    return "";
  }
}

function lastWhitespace(text: string): number {
  for (let i = text.length - 1; i >= 0; i--) if (/\s/.test(text[i]!)) return i;
  return -1;
}
