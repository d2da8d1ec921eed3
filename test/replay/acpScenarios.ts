import { expect } from "vitest";
import type { Reply } from "../../src/simulator/index.js";
import {
  claude,
  codex,
  gemini,
  sawInNextRequest as saw,
  todoWrite,
  updatePlan,
  type AgentUnderTest,
} from "../acp/harness.js";
import { openThread, pendingRequest, streaming, type Scenario, type ScenarioWorld } from "./scenarios.js";

/**
 * ACP scenarios that run both against the real agents (Gemini CLI, claude-agent-acp, codex-acp; recording a
 * transcript with `record-acp.ts`) and against the replay host (`acp.replay.test.ts`). They are those of
 * scenarios.ts, spelled for each agent: how its model runs a shell command (`shell`), how a refused permission ends
 * its turn, how it steers, whether it shares a plan. Each uses one agent process, and asserts only on runtime state
 * (never on the workspace or the simulator), so the same function passes recorded and replayed. What each agent does
 * is data here, as measured against the real agent: never computed by the adapter's code.
 */

export interface AcpCase {
  /** The fixtures' directory (test/replay/fixtures/acp/<name>) and the recorder's argument. */
  name: "gemini" | "claude" | "codex";
  agent: AgentUnderTest;
  /**
   * The command item shows what the command printed (codex-acp's in its raw output, `aggregated_output`, never its
   * permission request's prompt). Gemini sends no tool output.
   */
  commandOutput: boolean;
  /** It steers natively (`_session/steering`); else the runtime steers by interrupt-restart. */
  nativeSteer: boolean;
  /** The reply that makes it share a plan, and the steps it shows (none: it shares no plan over ACP). */
  plan?: { reply: Reply; steps: Array<{ step: string; status: string }> };
}

export const acpCases: AcpCase[] = [
  { name: "gemini", agent: gemini, commandOutput: false, nativeSteer: false },
  {
    name: "claude",
    agent: claude,
    commandOutput: true,
    nativeSteer: true,
    // claude-agent-acp shows a step in progress by its active form, the others by their content.
    plan: {
      reply: todoWrite,
      steps: [
        { step: "look", status: "completed" },
        { step: "Editing", status: "in_progress" },
      ],
    },
  },
  {
    name: "codex",
    agent: codex,
    commandOutput: true,
    nativeSteer: false,
    plan: {
      reply: updatePlan,
      steps: [
        { step: "look", status: "completed" },
        { step: "edit", status: "in_progress" },
      ],
    },
  },
];

/** A run's items as kinds and texts (a tool's item has no text). */
const shape = (run: { items: Array<{ kind: string; text?: string }> }) => run.items.map((i) => [i.kind, i.text]);

/** The scenarios of one agent (the plan scenario only where it shares a plan). */
export function acpScenarios(c: AcpCase): Record<string, Scenario> {
  const { agent } = c;
  const thread = (w: ScenarioWorld) => openThread(w, agent.target);
  const scenarios: Record<string, Scenario> = {
    "text-turn": {
      async run(w) {
        const threadId = await thread(w);
        w.push({ reasoning: "**Greeting**\n\na greeting is due", text: "Hello from the simulator!" });
        const run = await w.rt.waitForRun((await w.rt.sendMessage({ threadId, text: "say hi" })).runId);
        expect(run.status).toBe("completed");
        expect(run.items.map((i) => [i.kind, i.text])).toEqual([
          ["user_message", "say hi"],
          ["reasoning", expect.stringContaining("a greeting is due")],
          ["assistant_message", "Hello from the simulator!"],
        ]);
        // The record is the one the recorded `initialize` advertises.
        const started = [...w.rt.actors.sessions.values()][0]!.getSnapshot().context;
        expect(started.capabilities?.turns.supportsActiveSteering).toBe(c.nativeSteer);
        w.push({ text: "again" });
        const again = await w.rt.waitForRun((await w.rt.sendMessage({ threadId, text: "again" })).runId);
        expect(again.status).toBe("completed");
        expect(again.items.map((i) => [i.kind, i.text])).toEqual([
          ["user_message", "again"],
          ["assistant_message", "again"],
        ]);
      },
    },

    "command-approval-accept": {
      async run(w) {
        const threadId = await thread(w);
        // The output (OUT-42) is not in the command's text: the model sees it only if the command ran.
        w.push(agent.shell("echo approved > ran.txt && printf 'OUT-%s\\n' 42"), saw("OUT-42"));
        const { runId } = await w.rt.sendMessage({ threadId, text: "run it" });
        const request = await pendingRequest(w, threadId);
        expect(request.payload).toMatchObject({ kind: "command", command: expect.stringContaining("echo approved") });
        await w.rt.respond({ requestId: request.requestId, response: { kind: "decision", decision: "accept" } });
        const run = await w.rt.waitForRun(runId);
        expect(run.status).toBe("completed");
        expect(shape(run)).toEqual([
          ["user_message", "run it"],
          ["command", undefined],
          ["approval", undefined],
          ["assistant_message", "saw OUT-42"],
        ]);
        const command = run.items.find((i) => i.kind === "command");
        expect(command).toMatchObject({ status: "complete" });
        if (c.commandOutput) expect(command?.output).toContain("OUT-42");
        expect(run.items.at(-1)?.text).toBe("saw OUT-42");
        expect(w.rt.views.requests.get(request.requestId)?.status).toBe("resolved");
      },
    },

    "command-approval-decline": {
      async run(w) {
        const threadId = await thread(w);
        // An agent that goes on after a refusal asks the model again; one that cancels the turn does not.
        w.push(agent.shell("echo declined > nope.txt"));
        if (agent.refusalEnds === "completed") w.push({ text: "did not run it" });
        const { runId } = await w.rt.sendMessage({ threadId, text: "run this too" });
        const request = await pendingRequest(w, threadId);
        expect(request.payload).toMatchObject({ kind: "command", command: expect.stringContaining("echo declined") });
        await w.rt.respond({ requestId: request.requestId, response: { kind: "decision", decision: "decline" } });
        const run = await w.rt.waitForRun(runId);
        expect(run.status).toBe(agent.refusalEnds);
        expect(w.rt.views.requests.get(request.requestId)?.status).toBe("resolved");
        expect(run.items.find((i) => i.kind === "command")?.output ?? "").not.toContain("declined");
        // The agent's own cancel is said so (an error item), never taken for the user's interrupt.
        expect(shape(run)).toEqual([
          ["user_message", "run this too"],
          ["command", undefined],
          ["approval", undefined],
          agent.refusalEnds === "completed"
            ? ["assistant_message", "did not run it"]
            : ["error", "the agent stopped: cancelled"],
        ]);
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
        expect(shape(run)).toEqual([
          ["user_message", "long task"],
          ["assistant_message", "working on it"],
          ["interrupt_request", undefined],
        ]);
        // The session outlives the cancel.
        w.push({ text: "still here" });
        const next = await w.rt.waitForRun((await w.rt.sendMessage({ threadId, text: "next" })).runId);
        expect(next.status).toBe("completed");
        expect(shape(next)).toEqual([
          ["user_message", "next"],
          ["assistant_message", "still here"],
        ]);
      },
    },

    "interrupt-request-pending": {
      async run(w) {
        const threadId = await thread(w);
        w.push(agent.shell("echo never > never.txt"));
        const { runId } = await w.rt.sendMessage({ threadId, text: "run then stop" });
        const request = await pendingRequest(w, threadId);
        expect(request.payload).toMatchObject({ kind: "command", command: expect.stringContaining("never.txt") });
        await w.rt.interrupt({ runId });
        const run = await w.rt.waitForRun(runId);
        expect(run.status).toBe("interrupted");
        expect(run.items.map((i) => i.kind)).toEqual(["user_message", "command", "approval", "interrupt_request"]);
        expect(w.rt.views.requests.get(request.requestId)?.status).not.toBe("pending");
      },
    },

    steer: {
      async run(w) {
        const threadId = await thread(w);
        w.push({ hang: true, text: "working" }, saw("also consider this"));
        const { runId } = await w.rt.sendMessage({ threadId, text: "a task" });
        await streaming(w, runId);
        const steer = await w.rt.sendMessage({ threadId, text: "also consider this", mode: "steer" });
        expect(steer).toMatchObject({
          disposition: "steered",
          via: c.nativeSteer ? "native" : "interrupt_restart",
          runId,
        });
        const run = await w.rt.waitForRun(runId);
        expect(run.status).toBe("completed");
        expect(shape(run)).toEqual([
          ["user_message", "a task"],
          ["assistant_message", "working"],
          ["user_message", "also consider this"],
          ["assistant_message", "saw also consider this"],
        ]);
        if (c.nativeSteer) expect(run.attempts).toHaveLength(1);
        else {
          expect(run.attempts.map((a) => [a.reason, a.status])).toEqual([
            ["initial", "superseded"],
            ["steering_restart", "completed"],
          ]);
          expect(run.fallbacks.map((f) => f.policy)).toEqual(["steer_by_interrupt_restart"]);
        }
      },
    },
  };
  const plan = c.plan;
  if (plan)
    scenarios.plan = {
      async run(w) {
        const threadId = await thread(w);
        w.push(plan.reply, { text: "planned" });
        const run = await w.rt.waitForRun((await w.rt.sendMessage({ threadId, text: "plan it" })).runId);
        expect(run.status).toBe("completed");
        expect(shape(run)).toEqual([
          ["user_message", "plan it"],
          ["plan", undefined],
          ["assistant_message", "planned"],
        ]);
        expect(run.items.find((i) => i.kind === "plan")?.detail).toMatchObject({ steps: plan.steps });
      },
    };
  return scenarios;
}
