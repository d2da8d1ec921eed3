import { PassThrough } from "node:stream";
import { describe, expect, it } from "vitest";
import { readLines } from "../../src/adapters/kit/lines.js";
import { loopTurns } from "../support/loopTurns.js";

/**
 * A host that always has more to send must not hold the event loop: its frames are taken one read at a time, and
 * timers and immediates (the log's commits, the runtime's replies) run between two reads. Here 20 reads are waiting at
 * once; an immediate that re-arms itself counts the turns of the event loop the lines arrive in.
 */
describe("readLines", () => {
  it("takes one read's lines per turn of the event loop, however many reads are waiting", async () => {
    const stream = new PassThrough();
    const reads = 20;
    for (let r = 0; r < reads; r++)
      stream.write(`${Array.from({ length: 5 }, (_, i) => `read ${r} line ${i}`).join("\n")}\n`);
    stream.end();

    const loop = loopTurns();
    const turnOfRead = new Map<number, Set<number>>();
    const done = new Promise<void>((resolve) => stream.once("end", resolve));
    readLines(stream, {
      maxLineBytes: 1024,
      onLine: (line) => {
        const read = Number(/^read (\d+)/.exec(line)![1]);
        (turnOfRead.get(read) ?? turnOfRead.set(read, new Set()).get(read)!).add(loop.turn);
      },
      onOverflow: () => undefined,
    });
    await done;
    loop.stop();

    expect(turnOfRead.size).toBe(reads);
    // Each read's lines come in one turn, and no two reads share one.
    for (const turns of turnOfRead.values()) expect(turns.size).toBe(1);
    expect(new Set([...turnOfRead.values()].map((turns) => [...turns][0])).size).toBe(reads);
  });

  it("drains what is left once stopped, whether stopped from a line or between two reads", async () => {
    for (const when of ["from a line", "between reads"] as const) {
      const stream = new PassThrough();
      for (let r = 0; r < 20; r++) stream.write(`read ${r}\n`);
      stream.end();
      const lines: string[] = [];
      const reader = readLines(stream, {
        maxLineBytes: 1024,
        onLine: (line) => {
          lines.push(line);
          if (when === "from a line") reader.stop();
          // Stopped while the stream waits, paused, for its next turn of the event loop.
          else queueMicrotask(() => reader.stop());
        },
        onOverflow: () => undefined,
      });
      await new Promise((resolve) => stream.once("end", resolve));
      expect(lines, when).toEqual(["read 0"]);
    }
  });
});
