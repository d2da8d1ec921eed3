import { expect } from "vitest";
import { sawInNextRequest as saw } from "../codex/harness.js";
import { openThread, pendingRequest, streaming, type Scenario, type ScenarioWorld } from "./scenarios.js";

/**
 * Claude scenarios that run both against the real binary (recording its stream-json with
 * `record-claude.ts`) and against the replay host (`claude.replay.test.ts`). Each uses one
 * Claude process (no resume, fork or rollback, which start another), and asserts only on
 * runtime state, so the same function passes recorded and replayed.
 */

const thread = (w: ScenarioWorld) => openThread(w, "claude");
const bash = (command: string) => ({
  tools: [{ name: "Bash", args: { command, description: "needed for the test" } }],
});

export const claudeScenarios: Record<string, Scenario> = {
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
    },
  },

  "bash-allow-deny": {
    // Under workspace-write (Claude's acceptEdits) a write in the cwd runs unasked; read-only (default) asks.
    runtime: { sandbox: "read-only" },
    async run(w) {
      const threadId = await thread(w);
      w.push(
        bash("echo allowed > ran.txt && echo OUT-42"),
        saw("OUT-42"),
        bash("echo denied > nope.txt"),
        saw("declined"),
      );
      const allowed = await w.rt.sendMessage({ threadId, text: "run it" });
      const first = await pendingRequest(w, threadId);
      expect(first.payload).toMatchObject({ kind: "command", command: expect.stringContaining("echo allowed") });
      await w.rt.respond({ requestId: first.requestId, response: { kind: "decision", decision: "accept" } });
      const run = await w.rt.waitForRun(allowed.runId);
      expect(run.items.find((i) => i.kind === "command")?.output).toContain("OUT-42");
      const denied = await w.rt.sendMessage({ threadId, text: "and this" });
      const second = await pendingRequest(w, threadId);
      await w.rt.respond({ requestId: second.requestId, response: { kind: "decision", decision: "decline" } });
      const run2 = await w.rt.waitForRun(denied.runId);
      expect(run2.status).toBe("completed");
      expect(run2.items.find((i) => i.kind === "command")?.detail).toMatchObject({ status: "failed" });
    },
  },

  "interrupt-mid-stream": {
    async run(w) {
      const threadId = await thread(w);
      w.push({ hang: true, text: "working on it" });
      const { runId } = await w.rt.sendMessage({ threadId, text: "long task" });
      await streaming(w, runId);
      await w.rt.interrupt({ runId });
      const run = await w.rt.waitForRun(runId);
      expect(run.status).toBe("interrupted");
    },
  },

  "steer-interrupt-restart": {
    async run(w) {
      const threadId = await thread(w);
      w.push({ hang: true, text: "working" }, saw("also consider this"));
      const { runId } = await w.rt.sendMessage({ threadId, text: "a task" });
      await streaming(w, runId);
      const steer = await w.rt.sendMessage({ threadId, text: "also consider this", mode: "steer" });
      expect(steer).toMatchObject({ disposition: "steered", via: "interrupt_restart", runId });
      const run = await w.rt.waitForRun(runId);
      expect(run.attempts.map((a) => [a.reason, a.status])).toEqual([
        ["initial", "superseded"],
        ["steering_restart", "completed"],
      ]);
      expect(run.fallbacks.map((f) => f.policy)).toEqual(["steer_by_interrupt_restart"]);
      expect(run.items.at(-1)?.text).toBe("saw also consider this");
    },
  },

  "todo-list": {
    async run(w) {
      const threadId = await thread(w);
      const todos = [{ content: "Fix it", status: "in_progress", activeForm: "Fixing" }];
      w.push({ tools: [{ name: "TodoWrite", args: { todos } }] }, { text: "planned" });
      const run = await w.rt.waitForRun((await w.rt.sendMessage({ threadId, text: "plan the work" })).runId);
      expect(run.items.find((i) => i.kind === "todo_list")?.detail).toMatchObject({
        items: [{ text: "Fix it", status: "in_progress" }],
      });
    },
  },

  subagent: {
    async run(w) {
      const threadId = await thread(w);
      const agent = {
        description: "look around",
        prompt: "report SUB",
        subagent_type: "general-purpose",
        run_in_background: false,
      };
      w.push({ tools: [{ name: "Agent", args: agent }] }, { text: "SUB-RESULT" }, { text: "parent done" });
      const run = await w.rt.waitForRun((await w.rt.sendMessage({ threadId, text: "delegate it" })).runId);
      expect(run.status).toBe("completed");
      const subagent = run.items.find((i) => i.kind === "subagent");
      expect(subagent?.result).toBe("SUB-RESULT");
      expect(run.items.find((i) => i.parentId === subagent?.id)?.text).toBe("SUB-RESULT");
      expect(run.items.at(-1)?.text).toBe("parent done");
    },
  },

  "ask-user-question": {
    async run(w) {
      const threadId = await thread(w);
      const question = {
        question: "Which colour?",
        header: "Colour",
        options: [
          { label: "Red", description: "warm" },
          { label: "Blue", description: "cool" },
        ],
        multiSelect: false,
      };
      w.push(
        { tools: [{ name: "AskUserQuestion", args: { questions: [question] } }] },
        saw('\\"Which colour?\\"=\\"Blue\\"'),
      );
      const { runId } = await w.rt.sendMessage({ threadId, text: "ask me" });
      const request = await pendingRequest(w, threadId);
      expect(request.payload).toMatchObject({
        kind: "user_input",
        questions: [{ id: "Which colour?", header: "Colour" }],
      });
      await w.rt.respond({
        requestId: request.requestId,
        response: { kind: "answers", answers: { "Which colour?": "Blue" } },
      });
      const run = await w.rt.waitForRun(runId);
      expect(run.items.at(-1)?.text).toMatch(/^saw /);
    },
  },

  "model-switch": {
    async run(w) {
      const threadId = await thread(w);
      w.push({ text: "one" }, { text: "two" });
      await w.rt.waitForRun((await w.rt.sendMessage({ threadId, text: "first", model: "claude-sonnet-4-5" })).runId);
      const run = await w.rt.waitForRun(
        (await w.rt.sendMessage({ threadId, text: "second", model: "claude-haiku-4-5" })).runId,
      );
      expect(run.items.at(-1)?.text).toBe("two");
      expect(w.rt.views.sessions.size).toBe(1);
    },
  },
};

export const claudeScenarioNames = Object.keys(claudeScenarios);
