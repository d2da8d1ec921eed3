import { expect } from "vitest";
import type { RuntimeOptions } from "../../src/runtime/options.js";
import type { Runtime } from "../../src/runtime/runtime.js";
import type { Reply } from "../../src/simulator/index.js";
import { patch, sawInNextRequest, shell, until } from "../codex/harness.js";

/**
 * Codex scenarios that run both against the real binary (recording a transcript with
 * `record-codex.ts`) and against the replay host (`codex.replay.test.ts`). They assert only on
 * runtime state (run status, items, request payloads, receipts): never on files in the
 * workspace or on the model simulator, so the same function passes recorded and replayed.
 * The model replies are those of test/codex/codex.test.ts.
 */

export interface ScenarioWorld {
  rt: Runtime;
  /** The thread the scenario opened (set by the scenario, for diagnostics). */
  threadId?: string;
  /** Scripts model replies: the simulator's queue when recording, a no-op when replaying. */
  push(...replies: Reply[]): void;
  workspace: string;
}

export interface Scenario {
  /** Runtime options the scenario needs (the same when recording and replaying). */
  runtime?: Partial<RuntimeOptions>;
  run(world: ScenarioWorld): Promise<void>;
}

export { until };

/** Opens the scenario's thread on `target`. */
export async function openThread(w: ScenarioWorld, target: string): Promise<string> {
  w.threadId = (await w.rt.createThread({ providerTarget: target, cwd: w.workspace })).threadId;
  return w.threadId;
}

const thread = (w: ScenarioWorld) => openThread(w, "codex");

export async function pendingRequest(w: ScenarioWorld, threadId: string) {
  await until("a request", () => w.rt.views.pendingRequests(threadId).length === 1);
  return w.rt.views.pendingRequests(threadId)[0]!;
}

export const streaming = (w: ScenarioWorld, runId: string) =>
  until("streaming", () => w.rt.views.runs.get(runId)!.items.some((i) => i.kind === "assistant_message"));

export const scenarios: Record<string, Scenario> = {
  "text-turn": {
    async run(w) {
      const threadId = await thread(w);
      w.push({ text: "Hello from the simulator!" });
      const run = await w.rt.waitForRun((await w.rt.sendMessage({ threadId, text: "say hi" })).runId);
      expect(run.status).toBe("completed");
      expect(run.items.map((i) => [i.kind, i.text])).toEqual([
        ["user_message", "say hi"],
        ["assistant_message", "Hello from the simulator!"],
      ]);
      const started = [...w.rt.actors.sessions.values()][0]!.getSnapshot().context;
      expect(started.capabilities?.turns.supportsActiveSteering).toBe(true);
      w.push({ text: "again" });
      const again = await w.rt.waitForRun((await w.rt.sendMessage({ threadId, text: "again" })).runId);
      expect(again.status).toBe("completed");
      expect(again.items.at(-1)?.text).toBe("again");
    },
  },

  "command-approval-accept": {
    async run(w) {
      const threadId = await thread(w);
      w.push(shell("echo approved > ran.txt && echo OUT-42"), sawInNextRequest("OUT-42"));
      const { runId } = await w.rt.sendMessage({ threadId, text: "run it" });
      const request = await pendingRequest(w, threadId);
      expect(request.payload).toMatchObject({ kind: "command", command: expect.stringContaining("echo approved") });
      await w.rt.respond({ requestId: request.requestId, response: { kind: "decision", decision: "accept" } });
      const run = await w.rt.waitForRun(runId);
      expect(run.status).toBe("completed");
      expect(run.items.find((i) => i.kind === "command")?.output).toContain("OUT-42");
      expect(run.items.at(-1)?.text).toBe("saw OUT-42");
      expect(w.rt.views.requests.get(request.requestId)?.status).toBe("resolved");
    },
  },

  "command-approval-decline": {
    async run(w) {
      const threadId = await thread(w);
      w.push(shell("echo declined > nope.txt"), sawInNextRequest("rejected"));
      const { runId } = await w.rt.sendMessage({ threadId, text: "run this too" });
      const request = await pendingRequest(w, threadId);
      expect(request.payload).toMatchObject({ kind: "command", command: expect.stringContaining("echo declined") });
      await w.rt.respond({ requestId: request.requestId, response: { kind: "decision", decision: "decline" } });
      const run = await w.rt.waitForRun(runId);
      expect(run.status).toBe("completed");
      expect(w.rt.views.requests.get(request.requestId)?.status).toBe("resolved");
      expect(run.items.find((i) => i.kind === "command")?.output ?? "").not.toContain("declined");
      expect(run.items.at(-1)?.text).toBe("saw rejected");
    },
  },

  "interrupt-mid-stream": {
    async run(w) {
      const threadId = await thread(w);
      w.push({ hang: true, text: "working on it" });
      const { runId } = await w.rt.sendMessage({ threadId, text: "long task" });
      await streaming(w, runId);
      const receipt = await w.rt.interrupt({ runId });
      expect(receipt.via).toBe("native");
      const run = await w.rt.waitForRun(runId);
      expect(run.status).toBe("interrupted");
      expect(run.items.find((i) => i.kind === "assistant_message")?.text).toContain("working on it");
    },
  },

  "steer-native": {
    async run(w) {
      const threadId = await thread(w);
      w.push({ hang: true, text: "thinking" }, sawInNextRequest("also consider this"));
      const { runId } = await w.rt.sendMessage({ threadId, text: "long" });
      await streaming(w, runId);
      const steer = await w.rt.sendMessage({ threadId, text: "also consider this", mode: "steer" });
      expect(steer).toMatchObject({ disposition: "steered", via: "native", runId });
      const run = await w.rt.waitForRun(runId);
      expect(run.status).toBe("completed");
      expect(run.attempts).toHaveLength(1);
      expect(run.items.map((i) => [i.kind, i.intent ?? null, i.text ?? null])).toContainEqual([
        "user_message",
        "steer",
        "also consider this",
      ]);
      // A replay acknowledges the steer after the answer arrived; the transcript still shows
      // the steer where it was sent (steer.applied's sentAfterSeq), before the answer.
      expect(run.items.at(-1)?.text).toBe("saw also consider this");
      const steerAt = run.items.findIndex((i) => i.intent === "steer");
      expect(steerAt).toBeLessThan(run.items.length - 1);
    },
  },

  "file-change-read-only": {
    runtime: { sandbox: "read-only" },
    async run(w) {
      const threadId = await thread(w);
      w.push(patch("new.txt", "brand new"), { text: "patched" });
      const { runId } = await w.rt.sendMessage({ threadId, text: "add a file" });
      const request = await pendingRequest(w, threadId);
      expect(request.payload).toMatchObject({ kind: "file_change", path: expect.stringContaining("new.txt") });
      await w.rt.respond({ requestId: request.requestId, response: { kind: "decision", decision: "accept" } });
      const run = await w.rt.waitForRun(runId);
      expect(run.status).toBe("completed");
      expect(run.items.some((i) => i.kind === "file_change")).toBe(true);
      expect(run.items.at(-1)?.text).toBe("patched");
    },
  },
};

export const scenarioNames = Object.keys(scenarios);
