import fc from "fast-check";
import { mkdtemp, rm } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { describe, expect, it } from "vitest";
import { createScriptedHostAdapter } from "../../src/adapters/scripted/adapter.js";
import { sequentialIds } from "../../src/index.js";
import { BoundedLineSplitter } from "../../src/adapters/kit/lines.js";
import { isRunning } from "../../src/runtime/hosts/process.js";
import { nextEvent } from "../support/runtime.js";
import { tallyChaos } from "./tally.js";
import { openRuntime } from "../support/internals.js";

/**
 * The endless host line (issue 12, item 4), standing: (1) the splitter every host channel
 * reads through never holds or builds more than its cap, whatever it is fed; (2) real scripted
 * hosts, stdio and WebSocket, that break a cap at random points between healthy runs: each
 * over-long line or message fails exactly the run in flight, with its reason, and the next run
 * is served by a new host, in this very process. (The crash itself, which took the embedding
 * process down, is checked in a child process by test/faults/hostLine.test.ts.)
 */

const FRAME_CAP = 256 * 1024;
const STDERR_CAP = 64 * 1024;

describe("chaos: host line", () => {
  it("the splitter holds at most its cap and loses no line within it, for any input and chunking", () => {
    let runs = 0;
    const piece = fc.oneof(
      fc.string({ maxLength: 30 }).map((s) => s.replace(/\n/g, "")),
      fc.integer({ min: 1, max: 5_000 }).map((n) => "z".repeat(n)), // often over the cap
      fc.constant("\n"),
      fc.constant("\r\n"),
    );
    fc.assert(
      fc.property(
        fc.array(piece, { maxLength: 60 }),
        fc.integer({ min: 1, max: 2_000 }),
        fc.integer({ min: 1, max: 700 }),
        (pieces, cap, chunk) => {
          runs++;
          const text = pieces.join("");
          const bytes = Buffer.from(text);
          const lines: string[] = [];
          let overflows = 0;
          const splitter = new BoundedLineSplitter({
            maxLineBytes: cap,
            onLine: (l) => lines.push(l),
            onOverflow: (o) => void (overflows++, expect(Buffer.byteLength(o.head)).toBeLessThanOrEqual(256)),
          });
          for (let at = 0; at < bytes.length; at += chunk) {
            splitter.write(bytes.subarray(at, at + chunk));
            expect(splitter.pendingBytes).toBeLessThanOrEqual(cap);
          }
          splitter.end();
          const all = text.split("\n");
          if (all.at(-1) === "") all.pop();
          // The cap counts a line's bytes before its CR is taken off.
          const kept = all.filter((l) => Buffer.byteLength(l) <= cap).map((l) => l.replace(/\r$/, ""));
          expect(lines).toEqual(kept);
          expect(overflows).toBe(all.length - kept.length);
        },
      ),
      { numRuns: 400 },
    );
    tallyChaos("host line: splitter", { properties: 1, runs, violations: 0 });
  });

  it(
    "hosts that break a cap at random points fail only the run in flight; " +
      "the embedder and the target keep serving",
    async () => {
      type Step = { kind: "ok" } | { kind: "flood"; stream: "stdout" | "stderr" | "websocket"; factor: number };
      const flood = (streams: Array<"stdout" | "stderr" | "websocket">) =>
        fc.record({
          kind: fc.constant("flood" as const),
          stream: fc.constantFrom(...streams),
          factor: fc.integer({ min: 1, max: 8 }),
        });
      const scenario = fc.oneof(
        fc.record({
          transport: fc.constant("stdio" as const),
          steps: fc.array(fc.oneof(fc.constant({ kind: "ok" as const }), flood(["stdout", "stderr"])), {
            minLength: 1,
            maxLength: 4,
          }),
        }),
        fc.record({
          transport: fc.constant("websocket" as const),
          steps: fc.array(fc.oneof(fc.constant({ kind: "ok" as const }), flood(["stdout", "stderr", "websocket"])), {
            minLength: 1,
            maxLength: 4,
          }),
        }),
      );
      let runs = 0;
      let floods = 0;
      await fc.assert(
        fc.asyncProperty(scenario, async ({ transport, steps }) => {
          runs++;
          const dataDir = await mkdtemp(join(tmpdir(), "tiller-chaos-line-"));
          const adapter = createScriptedHostAdapter({
            transport,
            scripts: {
              "[gate]": [
                { type: "text", text: "working" },
                { type: "gate", name: "g" },
              ],
            },
            limits: { maxFrameBytes: FRAME_CAP, maxStderrLineBytes: STDERR_CAP },
            policy: { restartBudget: 100, backoffMs: [0] },
            heartbeat: { intervalMs: 0 },
          });
          const rt = await openRuntime({ ids: sequentialIds(), dataDir, providers: { s: adapter } });
          const pids = new Set<number>();
          try {
            const { threadId } = await rt.createThread({ providerTarget: "s" });
            for (const step of steps as Step[]) {
              if (step.kind === "ok") {
                const run = await rt.waitForRun((await rt.sendMessage({ threadId, text: "hello" })).runId);
                expect(run.status).toBe("completed");
                continue;
              }
              floods++;
              const { runId } = await rt.sendMessage({ threadId, text: "[gate] hold" });
              await nextEvent(rt, "node.delta", (e) => e.runId === runId);
              const sessionId = [...rt.views.sessions.keys()].find((id) => adapter.hostPid(id) !== null)!;
              pids.add(adapter.hostPid(sessionId)!);
              const cap =
                step.stream === "stderr" || (transport === "websocket" && step.stream === "stdout")
                  ? STDERR_CAP
                  : FRAME_CAP;
              await adapter.debug("debug.flood", { stream: step.stream, bytes: cap * step.factor + 1 });
              const run = await rt.waitForRun(runId);
              expect(run.status).toBe("failed");
              const what = step.stream === "websocket" ? "a WebSocket message" : `a ${step.stream} line`;
              expect(run.failure?.message).toContain(`the host sent ${what} over`);
            }
          } finally {
            await rt.close();
            await rm(dataDir, { recursive: true, force: true });
          }
          for (const pid of pids) expect(isRunning(pid)).toBe(false);
        }),
        { numRuns: 6 },
      );
      tallyChaos("host line: hosts", { properties: 1, runs, violations: 0 });
      console.info(`chaos host line: ${runs} scenarios, ${floods} floods`);
    },
    180_000,
  );
});
