import { PassThrough } from "node:stream";
import fc from "fast-check";
import { describe, expect, it } from "vitest";
import { BoundedLineSplitter, readLines, type LineOverflow } from "../../src/adapters/kit/lines.js";

/** The bounded splitter every host channel reads through (issue 12, item 4). */

function collect(maxLineBytes: number) {
  const lines: string[] = [];
  const overflows: LineOverflow[] = [];
  const splitter = new BoundedLineSplitter({
    maxLineBytes,
    onLine: (l) => lines.push(l),
    onOverflow: (o) => overflows.push(o),
  });
  return { splitter, lines, overflows };
}

describe("BoundedLineSplitter", () => {
  it("splits across chunk boundaries, takes CRLF, and ends an unterminated last line", () => {
    const { splitter, lines, overflows } = collect(64);
    for (const chunk of ["al", "pha\nbe", "ta\r\n", "\n", "gam", "ma"]) splitter.write(Buffer.from(chunk));
    expect(lines).toEqual(["alpha", "beta", ""]);
    splitter.end();
    expect(lines).toEqual(["alpha", "beta", "", "gamma"]);
    expect(overflows).toEqual([]);
  });

  it("decodes a multi-byte character split between chunks", () => {
    const { splitter, lines } = collect(64);
    const bytes = Buffer.from("héllo ✓\n");
    for (let i = 0; i < bytes.length; i++) splitter.write(bytes.subarray(i, i + 1));
    expect(lines).toEqual(["héllo ✓"]);
  });

  it(
    "a line of exactly the cap passes; one byte more is dropped with a sample, " +
      "reported once, and splitting resumes after its newline",
    () => {
      const { splitter, lines, overflows } = collect(8);
      splitter.write(Buffer.from("12345678\n"));
      splitter.write(Buffer.from("123456789"));
      expect(splitter.pendingBytes).toBe(0);
      for (let i = 0; i < 1000; i++) splitter.write(Buffer.from("more bytes of the same endless line "));
      splitter.write(Buffer.from("still it\nnext\n"));
      expect(lines).toEqual(["12345678", "next"]);
      expect(overflows).toEqual([{ limitBytes: 8, head: "123456789" }]);
      expect(splitter.overflows).toBe(1);
    },
  );

  it("keeps at most 256 bytes of an over-long line as its sample", () => {
    const { splitter, overflows } = collect(1024);
    splitter.write(Buffer.alloc(4096, 0x78));
    expect(overflows).toHaveLength(1);
    expect(overflows[0]!.head).toBe("x".repeat(256));
  });

  it("refuses a cap that is not a positive integer within 256 MiB", () => {
    for (const bad of [0, -1, 1.5, Number.NaN, 512 * 1024 * 1024]) {
      expect(() => collect(bad)).toThrow(/maxLineBytes must be an integer from 1 to/);
    }
  });

  it(
    "property: any chunking of any lines yields exactly the lines within the cap, " +
      "in order, and never holds more than the cap",
    () => {
      const line = fc.string({ unit: fc.constantFrom("a", "b", "é", "✓", "😀", " ", "{", '"', "\r"), maxLength: 40 });
      let runs = 0;
      fc.assert(
        fc.property(
          fc.array(line, { maxLength: 30 }),
          fc.integer({ min: 1, max: 64 }),
          fc.array(fc.integer({ min: 1, max: 50 }), { minLength: 1, maxLength: 20 }),
          fc.boolean(),
          (input, cap, cuts, terminated) => {
            runs++;
            const text = input.join("\n") + (terminated && input.length > 0 ? "\n" : "");
            const bytes = Buffer.from(text);
            const { splitter, lines, overflows } = collect(cap);
            let at = 0;
            for (let i = 0; at < bytes.length; i++) {
              const size = cuts[i % cuts.length]!;
              splitter.write(bytes.subarray(at, at + size));
              at += size;
              expect(splitter.pendingBytes).toBeLessThanOrEqual(cap);
            }
            splitter.end();
            // An empty input, or a final empty string after the last newline, is no line.
            const expected = text === "" ? [] : text.split("\n").slice(0, terminated ? -1 : undefined);
            if (!terminated && expected.at(-1) === "") expected.pop();
            // The cap counts a line's bytes as sent; a line's one trailing carriage return is cut.
            const uncr = (l: string) => (l.endsWith("\r") ? l.slice(0, -1) : l);
            expect(lines).toEqual(expected.filter((l) => Buffer.byteLength(l) <= cap).map(uncr));
            expect(overflows.length).toBe(expected.filter((l) => Buffer.byteLength(l) > cap).length);
            for (const l of lines) expect(Buffer.byteLength(l)).toBeLessThanOrEqual(cap);
          },
        ),
        { numRuns: 300 },
      );
      expect(runs).toBe(300);
    },
  );
});

describe("readLines", () => {
  it("stops at an overflow by default and drains the rest of the stream into the void", async () => {
    const stream = new PassThrough();
    const lines: string[] = [];
    let overflowed = 0;
    readLines(stream, { maxLineBytes: 4, onLine: (l) => lines.push(l), onOverflow: () => void overflowed++ });
    stream.write("ok\n");
    stream.write("far too long\nignored\n");
    stream.end("also ignored\n");
    await new Promise((resolve) => stream.once("end", resolve));
    expect(lines).toEqual(["ok"]);
    expect(overflowed).toBe(1);
  });

  it("continues after an overflow when asked to, and absorbs stream errors", async () => {
    const stream = new PassThrough();
    const lines: string[] = [];
    readLines(stream, { maxLineBytes: 4, onLine: (l) => lines.push(l), onOverflow: () => "continue" });
    stream.write("far too long\nok\n");
    stream.destroy(new Error("EPIPE, say"));
    await new Promise((resolve) => stream.once("close", resolve));
    expect(lines).toEqual(["ok"]);
  });
});
