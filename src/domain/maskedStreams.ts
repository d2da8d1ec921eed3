import { maskCredentials, mayHoldCredential, opensKeyBlock } from "./credentials.js";

/**
 * Longest stretch of one stream held to be judged (the current line, or an open private key block). Past it the
 * stream's deltas are withheld until a line end lets it settle (tried each time the stretch has doubled, so a long
 * line costs linear time); what was withheld comes at the stream's end. It bounds the work per delta (each delta
 * that ends a word masks the stretch again).
 */
const MAX_WINDOW_CHARS = 16 * 1024;

interface Stream {
  group: string;
  /** Raw text of the stream since its last settled line end. */
  window: string;
  /** Where the last whitespace of `window` is (-1: none). */
  lastSpace: number;
  /** How much of `window` `sent` is the mask of: to just after its last whitespace, or all of it (a plain word). */
  boundary: number;
  /** What was given out of the masked `window`. */
  sent: string;
  /** The masked text of the settled lines: what was given out before `window`. */
  settled: string;
  /** Deltas are held back: the window outgrew its bound (`size`), or the masked text stopped growing by appends. */
  withheld: null | "size" | "broken";
  /** The window's length when a withheld stream last tried to settle. */
  triedAt: number;
}

/**
 * What an ended stream still owes: the masked rest to give out (null when what was given cannot grow into the whole)
 * and the whole masked text.
 */
export interface StreamEnd {
  rest: string | null;
  whole: string;
}

/**
 * Streamed text as it may be given out, masked. A credential can arrive in pieces (`sk-proj-Ab`, then `Cd3...`) and
 * no piece looks like one, so no raw delta is given out: a delta gives what the stream's assembled text, masked as a
 * whole, has gained up to its last whitespace (or to its end, when the last word is a plain word no mask can take
 * in: see `plainWordMasked`). Text after that could still turn out to be part of a credential; it waits for the next
 * delta, or the stream's end. This is sound because of the rules the credential table keeps
 * (src/domain/credentials.ts): a value is a whitespace-free run or masked to its end (header line, quote, key
 * block), and a mask keeps the name before the value, so what was given is always a prefix of the masked whole.
 * Should that ever fail, the stream's deltas are withheld rather than given unmasked, and its end carries the whole.
 * Assembled text is kept per stream from its last complete line (no mask crosses a line end but a private key
 * block's) and forgotten when the stream ends.
 *
 * One implementation for the log (the dispatcher masks every stored delta) and the inspector's page.
 */
export class MaskedStreams {
  #streams = new Map<string, Stream>();

  /** What a delta of stream `key` (one of `group`'s) adds to the masked text given out so far: often "". */
  delta(key: string, group: string, delta: string): string {
    let stream = this.#streams.get(key);
    if (!stream) {
      stream = { group, window: "", lastSpace: -1, boundary: 0, sent: "", settled: "", withheld: null, triedAt: 0 };
      this.#streams.set(key, stream);
    }
    stream.window += delta;
    const space = lastWhitespace(delta);
    if (space >= 0) stream.lastSpace = stream.window.length - delta.length + space;
    if (stream.withheld) return stream.withheld === "size" ? this.#resume(stream, delta) : "";
    const wordLength = stream.window.length - stream.lastSpace - 1;
    // (A long word is no plain word: it is not cut out of the window, which would copy a long run at every delta.)
    // (A private key's BEGIN line has spaces in it: no word of a window holding one is settled.)
    if (wordLength <= PLAIN_WORD_MAX && !stream.window.includes("-----BEGIN")) {
      const word = stream.window.slice(stream.lastSpace + 1);
      const stable = word === "" || isPlainWord(word) ? clearOfValues(stream.window, word) : null;
      const headLength = stream.lastSpace + 1;
      if (stable !== null)
        return this.#giveAndSettle(stream, stable.slice(0, stable.length - word.length), headLength, word);
    }
    // The word being written could still be (part of) a credential: it waits for its end.
    const end = stream.lastSpace + 1;
    if (end <= stream.boundary) return "";
    const head = stream.window.slice(0, end);
    // What comes before it is settled if it ends in no value's place (then only that word is masked again).
    const clear = stream.window.includes("-----BEGIN") ? null : clearOfValues(head, "");
    if (clear !== null) return this.#giveAndSettle(stream, clear, end, "");
    const stable = maskCredentials(head);
    if (!stable.startsWith(stream.sent)) return this.#withhold(stream, "broken");
    const fresh = stable.slice(stream.sent.length);
    stream.sent = stable;
    stream.boundary = end;
    this.#settle(stream);
    if (stream.window.length > MAX_WINDOW_CHARS) this.#withhold(stream, "size");
    return fresh;
  }

  /**
   * Gives out the window's first `headLength` characters, masked `maskedHead`, then `tail` (the rest of the window,
   * raw: a plain word; or nothing), and settles the head: no mask reaches across the start of a word in no value's
   * place.
   */
  #giveAndSettle(stream: Stream, maskedHead: string, headLength: number, tail: string): string {
    const given = maskedHead + tail;
    if (!given.startsWith(stream.sent)) return this.#withhold(stream, "broken");
    const fresh = given.slice(stream.sent.length);
    stream.settled += maskedHead;
    stream.window = stream.window.slice(headLength);
    stream.lastSpace -= headLength;
    stream.sent = tail;
    stream.boundary = tail.length;
    return fresh;
  }

  /** Stream `key` ended: what it still owes (null when nothing of it came). Forgets it. */
  end(key: string): StreamEnd | null {
    const stream = this.#streams.get(key);
    if (!stream) return null;
    this.#streams.delete(key);
    const masked = maskCredentials(stream.window);
    const grows = stream.withheld !== "broken" && masked.startsWith(stream.sent);
    return { rest: grows ? masked.slice(stream.sent.length) : null, whole: stream.settled + masked };
  }

  /** Every stream of `group` ended (its run did): the keys and what each still owes. Forgets them. */
  endGroup(group: string): Array<[string, StreamEnd]> {
    const ended: Array<[string, StreamEnd]> = [];
    for (const [key, stream] of this.#streams) if (stream.group === group) ended.push([key, this.end(key)!]);
    return ended;
  }

  /** Forgets the complete lines before the boundary (outside a private key block): later text cannot change them. */
  #settle(stream: Stream): void {
    const lineEnd = stream.window.lastIndexOf("\n", stream.boundary - 1);
    if (lineEnd < 0) return;
    const settledRaw = stream.window.slice(0, lineEnd + 1);
    if (opensKeyBlock(settledRaw)) return;
    const masked = maskCredentials(settledRaw);
    if (!stream.sent.startsWith(masked)) return;
    stream.window = stream.window.slice(lineEnd + 1);
    stream.boundary -= lineEnd + 1;
    stream.lastSpace -= lineEnd + 1;
    stream.sent = stream.sent.slice(masked.length);
    stream.settled += masked;
  }

  /**
   * A stream withheld for its size gives out again once a line end lets its window settle: tried on a delta with a line
   * end, each time the window has doubled since the last try.
   */
  #resume(stream: Stream, delta: string): string {
    if (!delta.includes("\n") || stream.window.length < 2 * stream.triedAt) return "";
    stream.triedAt = stream.window.length;
    const lineEnd = stream.window.lastIndexOf("\n");
    const lines = stream.window.slice(0, lineEnd + 1);
    if (opensKeyBlock(lines)) return "";
    const masked = maskCredentials(lines);
    if (!masked.startsWith(stream.sent)) return this.#withhold(stream, "broken");
    const fresh = masked.slice(stream.sent.length);
    stream.settled += masked;
    stream.window = stream.window.slice(lineEnd + 1);
    stream.lastSpace -= lineEnd + 1;
    stream.boundary = 0;
    stream.sent = "";
    stream.withheld = null;
    return fresh;
  }

  #withhold(stream: Stream, why: "size" | "broken"): string {
    stream.withheld = why;
    stream.triedAt = stream.window.length;
    return "";
  }
}

/**
 * A word of letters and digits (and closing punctuation) being written, say `working` or `42`, is given out before its
 * end where no mask can ever take it in: it is not in a value's place (after `password: `, `Bearer `, `--token `, an
 * open quote, a private key's BEGIN line), shown by a credential-like run (`PROBE`) appended to it coming out of the
 * mask untouched, and it is not the start of a vendor token that a mask replaces from inside the word (`TOKEN_START`:
 * a JWT's `eyJ`, an AWS or Google key id; every other vendor prefix has a `_` or `-` a plain word lacks, and a mask
 * keeps the prefix). Prose then streams word by word, the last word included, while a credential still waits for its
 * end. What comes before such a word (or all of a window that ends with whitespace and passes the same test) is
 * settled: no mask that starts there can reach past it, so the window masked at each delta stays a word long in prose.
 */
const PLAIN_WORD = /^(?=.)[A-Za-z0-9]{0,64}[.,!?;:)]{0,3}$/;
const PLAIN_WORD_MAX = 67;
const TOKEN_START = /^(?:ey?|(?:eyJ|AKIA|ASIA|AGPA|AIDA|AROA|ANPA|ANVA|APKA|ABIA|ACCA|AIza).*)$/;
/**
 * Appended to a window, it is eaten by the mask wherever the window ends in a value's place, or could go on into a
 * name's `=` or `:` (`password ` then `= x`) or a `curl -u` user's `:`: credential-like on both sides of them.
 */
const PROBE = "=Zq0Zq0Zq0:Zq0Zq0Zq0";
if (mayHoldCredential(PROBE.slice(1))) throw new Error("internal: the probe holds what the credential table looks for");

const isPlainWord = (word: string) => PLAIN_WORD.test(word) && !TOKEN_START.test(word);

/**
 * `window` masked, when it ends with `word` (plain, or none) in no value's place: a credential-like run appended comes
 * out of the mask untouched, and so does `word`. Else null.
 */
function clearOfValues(window: string, word: string): string | null {
  // (Nothing the table looks for in the window, nor where it meets the probe: no pattern's word holds a `=`.)
  if (!mayHoldCredential(window)) return window;
  const probed = maskCredentials(window + PROBE);
  if (!probed.endsWith(PROBE)) return null;
  const stable = probed.slice(0, -PROBE.length);
  return stable.endsWith(word) ? stable : null;
}

function lastWhitespace(text: string): number {
  for (let i = text.length - 1; i >= 0; i--) {
    const c = text.charCodeAt(i);
    // The characters \s matches below U+0100 answer at once; any other goes to the regular expression.
    if (c === 32 || (c >= 9 && c <= 13) || c === 160) return i;
    if (c > 255 && /\s/.test(text[i]!)) return i;
  }
  return -1;
}
