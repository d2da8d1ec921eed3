import { describe, expect, it } from "vitest";
import { createScriptedAdapter } from "../../src/index.js";
import type { ProviderAdapterEvent } from "../../src/index.js";
import { ofType, openTestRuntime, override } from "../support/runtime.js";

/**
 * A provider frame the runtime cannot take (it fails validation, or carries a value that is not
 * JSON) is reported as a protocol_error warning and skipped: the event pump goes on, and the log
 * stays readable.
 */

describe("a bad provider frame is a protocol_error warning, never the end of the event pump", () => {
  it("skips frames that fail validation and keeps delivering the target's events (review a14/a15)", async () => {
    const base = createScriptedAdapter();
    let injected = false;
    const adapter = override(base, {
      streamEvents: () => ({
        async *[Symbol.asyncIterator]() {
          for await (const e of base.streamEvents()) {
            if (!injected) {
              injected = true;
              const bad: unknown[] = [
                { sessionId: e.sessionId, event: null },
                null,
                { sessionId: e.sessionId, event: { type: "no.such.event" } },
                { event: { type: "turn.started" } }, // valid event, no session id
              ];
              for (const frame of bad) yield frame as ProviderAdapterEvent;
            }
            yield e;
          }
        },
      }),
    });
    const { rt, events, cleanup } = await openTestRuntime({ s: adapter });
    try {
      const { threadId } = await rt.createThread({ providerTarget: "s" });
      const first = await rt.waitForRun((await rt.sendMessage({ threadId, text: "hello" })).runId);
      expect(first.status).toBe("completed");
      expect(injected).toBe(true);
      const warnings = ofType(events, "warning").map((w) => w.message);
      expect(warnings).toHaveLength(4);
      for (const w of warnings) expect(w).toMatch(/^protocol_error: s sent an invalid/);
      // The pump is still alive: a later run on the same target completes.
      const second = await rt.waitForRun((await rt.sendMessage({ threadId, text: "again" })).runId);
      expect([second.status, second.items.at(-1)?.text]).toEqual(["completed", "You said: again"]);
    } finally {
      await cleanup();
    }
  });

  it(
    "rejects a non-JSON-serializable tool input without crashing, " + "and the log stays readable (review a14/a15)",
    async () => {
      const base = createScriptedAdapter({
        script: () => [
          { type: "tool", name: "t", output: "o" },
          { type: "text", text: "done" },
        ],
      });
      const adapter = override(base, {
        streamEvents: () => ({
          async *[Symbol.asyncIterator]() {
            for await (const e of base.streamEvents()) {
              if (e.event.type === "item.started" && e.event.kind === "tool_call") {
                const input: Record<string, unknown> = { a: 1 };
                input.self = input; // e.g. an SDK object handed through as tool input
                yield { ...e, event: { ...e.event, detail: { ...e.event.detail, input } } };
              } else yield e;
            }
          },
        }),
      });
      const first = await openTestRuntime({ s: adapter });
      let threadId: string;
      try {
        ({ threadId } = await first.rt.createThread({ providerTarget: "s" }));
        const run = await first.rt.waitForRun((await first.rt.sendMessage({ threadId, text: "hello" })).runId);
        expect(run.status).toBe("completed");
        expect(run.items.find((i) => i.kind === "assistant_message")?.text).toBe("done");
        const warnings = ofType(first.events, "warning").map((w) => w.message);
        expect(warnings).toEqual([
          expect.stringMatching(/^protocol_error: s sent an invalid item\.started event: must be JSON-serializable/),
        ]);
        expect(first.rt.actors.runs.has(run.runId)).toBe(false);
        const again = await first.rt.waitForRun((await first.rt.sendMessage({ threadId, text: "again" })).runId);
        expect(again.status).toBe("completed");
      } finally {
        await first.rt.close();
      }

      // Nothing unserializable reached the log: it reopens.
      const second = await openTestRuntime({ s: createScriptedAdapter() }, { dataDir: first.dataDir });
      try {
        expect(second.rt.listThreads()).toEqual([expect.objectContaining({ threadId, runs: 2 })]);
      } finally {
        await second.cleanup();
      }
    },
  );
});
