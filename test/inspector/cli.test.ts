import { stat } from "node:fs/promises";
import { join } from "node:path";
import { describe, expect, it } from "vitest";
import { runInspect } from "../../src/cli/inspect.js";
import type { PageMessage } from "../../inspector/server/protocol.js";
import { tempDir } from "../support/files.js";
import { pageClient, pageSocketUrl, WAIT } from "./helpers.js";

type View = Extract<PageMessage, { kind: "view" }>;

describe("tiller inspect (live)", () => {
  it(
    "tours a scripted session: an approval, " +
      "then a steer that degrades to interrupt-restart, and serves until stopped",
    async () => {
      const { dir, cleanup } = await tempDir("tiller-inspect-cli-");
      const stop = new AbortController();
      let output = "";
      const serving = runInspect({
        port: 0,
        dataDir: dir,
        replay: null,
        showText: false,
        yes: true,
        chunkDelayMs: 1,
        write: (t) => (output += t),
        signal: stop.signal,
      });
      try {
        await expect.poll(() => output.includes("The tour is over"), WAIT).toBe(true);
        const url = /Inspector: (http:\S+)/.exec(output)![1]!;
        const client = await pageClient(pageSocketUrl(url));
        try {
          const view = await client.until(
            (m): m is View =>
              m.kind === "view" &&
              m.capabilities.degradations.length > 0 &&
              m.tree.some(
                (n) => n.kind === "thread" && n.children.filter((r) => r.status === "completed").length === 2,
              ),
          );
          expect(view.capabilities.degradations.map((d) => [d.policy, d.capability, d.outcome])).toEqual([
            ["steer_by_interrupt_restart", "turns.supportsActiveSteering", "fallback"],
          ]);
          expect(
            view.tree
              .find((n) => n.kind === "thread")!
              .children.flatMap((r) => r.children.filter((c) => c.kind === "request").map((c) => c.status)),
          ).toEqual(["resolved"]);
        } finally {
          client.close();
        }
      } finally {
        stop.abort();
        await serving;
        await cleanup();
      }
      expect(output).toContain("Steered the second run");
    },
  );

  it(
    "stops cleanly when stopped before the second run streams: " + "the runtime closes and gives back its lock",
    async () => {
      const { dir, cleanup } = await tempDir("tiller-inspect-cli-stop-");
      const stop = new AbortController();
      let output = "";
      // The second run never streams, so the tour waits for it until stopped.
      const story = {
        "[fix]": [{ type: "text" as const, text: "Fixed." }],
        "[changelog]": [{ type: "hang" as const }],
      };
      const serving = runInspect({
        port: 0,
        dataDir: dir,
        replay: null,
        showText: false,
        yes: true,
        chunkDelayMs: 1,
        story,
        write: (t) => (output += t),
        signal: stop.signal,
      });
      try {
        await expect.poll(() => output.includes("Second run"), WAIT).toBe(true);
        expect(await stat(join(dir, "LOCK"))).toBeTruthy();
        stop.abort();
        await serving; // before the fix this never returned: the tour waited for a delta that would not come
        await expect(stat(join(dir, "LOCK"))).rejects.toMatchObject({ code: "ENOENT" });
        expect(output).not.toContain("Steered");
        expect(output).not.toContain("The tour is over");
      } finally {
        stop.abort();
        await serving.catch(() => undefined);
        await cleanup();
      }
    },
  );
});
