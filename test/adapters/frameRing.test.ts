import fc from "fast-check";
import { describe, expect, it } from "vitest";
import { FrameRing } from "../../src/adapters/kit/ring.js";

/**
 * The ring keeps the newest entries that fit all its bounds at once (count, cleaned bytes, raw bytes): after any
 * sequence of pushes, exactly the longest run of the last pushes within them. The expectation is that statement,
 * computed from the pushes alone, never the ring's own bookkeeping. Texts here hold no secrets, so an entry reads
 * back as its kind and its text cut to `maxChars`.
 */
const RAW_BYTES_MAX = 1024 * 1024;
type Kind = "in" | "out" | "stderr" | "note";
interface Push {
  kind: Kind;
  text: string;
  maxChars: number | undefined;
}

function expectedTail(pushes: Push[], maxEntries: number, maxBytes: number, maxEntryBytes: number): string[] {
  const kept: Push[] = [];
  let bytes = 0;
  let raw = 0;
  for (let i = pushes.length - 1; i >= 0 && kept.length < maxEntries; i--) {
    const { kind, text, maxChars = maxEntryBytes } = pushes[i]!;
    const source = text.slice(0, 64 * 1024);
    const entryBytes = kind.length + 2 + Math.min(source.length, maxChars);
    if (bytes + entryBytes > maxBytes || raw + source.length > RAW_BYTES_MAX) break;
    bytes += entryBytes;
    raw += source.length;
    kept.unshift({ kind, text: source, maxChars });
  }
  return kept.map(
    ({ kind, text, maxChars = maxEntryBytes }) =>
      `${kind} ${text.length > maxChars ? `${text.slice(0, maxChars)}…` : text}`,
  );
}

const push: fc.Arbitrary<Push> = fc.record({
  kind: fc.constantFrom<Kind>("in", "out", "stderr", "note"),
  // Plain words (nothing the redactor masks), short or long.
  text: fc.oneof(
    fc.stringMatching(/^[a-z ]{0,40}$/),
    fc.tuple(fc.constantFrom("a", "b c"), fc.nat({ max: 70_000 })).map(([unit, n]) => unit.repeat(n)),
  ),
  maxChars: fc.option(fc.integer({ min: 1, max: 300 }), { nil: undefined }),
});

describe("FrameRing", () => {
  it("keeps exactly the newest entries within its count, byte and raw-byte bounds, in order", () => {
    fc.assert(
      fc.property(
        fc.array(push, { maxLength: 120 }),
        fc.integer({ min: 1, max: 12 }),
        fc.integer({ min: 1, max: 4_000 }),
        fc.integer({ min: 1, max: 500 }),
        (pushes, maxEntries, maxBytes, maxEntryBytes) => {
          const ring = new FrameRing(maxEntries, maxBytes, maxEntryBytes);
          for (const { kind, text, maxChars } of pushes) ring.push(kind, text, maxChars);
          const expected = expectedTail(pushes, maxEntries, maxBytes, maxEntryBytes);
          expect(ring.tail(1_000)).toEqual(expected);
          expect(ring.tail(3)).toEqual(expected.slice(-3));
          expect(ring.tail(0)).toEqual(expected.slice(-0));
        },
      ),
      { numRuns: 300 },
    );
  });

  it("wraps around its slots many times over and still reads the last entries oldest first", () => {
    const ring = new FrameRing(7);
    for (let i = 0; i < 1_000; i++) ring.push("in", `frame ${i}`);
    expect(ring.tail(3)).toEqual(["in frame 997", "in frame 998", "in frame 999"]);
    expect(ring.tail(100)).toHaveLength(7);
  });

  it("bounds the raw bytes by the texts kept, however little of each a report shows", () => {
    const ring = new FrameRing(200, 1e9, 10);
    for (let i = 0; i < 20; i++) ring.push("in", "x".repeat(64 * 1024));
    expect(ring.tail(100)).toHaveLength(16); // 16 × 64 KiB is the raw bound
    ring.push("in", "small");
    expect(ring.tail(100)).toHaveLength(16);
    expect(ring.tail(1)).toEqual(["in small"]);
  });

  it("keeps an entry whole when it may take any length", () => {
    const ring = new FrameRing(5, 1e9);
    ring.push("note", "y".repeat(5_000), Infinity);
    expect(ring.tail(1)).toEqual([`note ${"y".repeat(5_000)}`]);
  });

  it("masks a private key that comes line by line, across a wrap of its slots", () => {
    const ring = new FrameRing(3);
    ring.push("stderr", "-----BEGIN PRIVATE KEY-----");
    ring.push("stderr", "MIIEvQIBADANBgkqhkiG9w0BAQEFAASC");
    ring.push("stderr", "b3BlbnNzaC1rZXktdjEAAAAABG5vbmUAAAAEbm9uZQ");
    ring.push("stderr", "-----END PRIVATE KEY----- then the rest");
    const tail = ring.tail(10).join("\n");
    expect(tail).not.toContain("MIIEvQIBADANBgkqhkiG9w0BAQEFAASC");
    expect(tail).not.toContain("b3BlbnNzaC1rZXktdjEAAAAABG5vbmUAAAAEbm9uZQ");
    expect(tail).toContain("then the rest");
  });
});
