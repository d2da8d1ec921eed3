import { existsSync } from "node:fs";
import { readFile } from "node:fs/promises";
import { join } from "node:path";
import { afterAll, afterEach, beforeAll, describe, expect, it } from "vitest";
import { createScriptedAdapter } from "../../src/index.js";
import type { ProviderCapabilities } from "../../src/capabilities/schema.js";
import * as conformance from "../providers/conformance.js";
import { acpWorld, asProvider, sawInNextRequest as saw, until, type AcpWorld, type AgentUnderTest } from "./harness.js";

/**
 * The scenarios every ACP agent passes the same way under Tiller's one ACP adapter, against its real binary: a text
 * turn with thoughts, a permission allowed and refused, cancel mid-stream and with a permission pending, a plan where
 * the agent shares one, resume in a new process, a steer (natively where the agent advertises steering, else by
 * interrupt-restart), a handoff in from another provider, SIGKILL mid-turn. One world (one agent process at a time)
 * per agent. What the agents' records say is the expectation each is held to (`expected`), from their handshakes as
 * measured: never computed by the adapter's own code.
 */

export interface ExpectedRecord {
  /** Fields of the record as the agent's `initialize` advertises them. */
  fields: Record<string, boolean>;
  /** The agent shares a plan: the reply that makes it share one, and the steps it shows. */
  plan?: { reply: Parameters<AcpWorld["sim"]["push"]>[0]; steps: Array<{ step: string; status: string }> };
}

const fixture = (target: string) => join(import.meta.dirname, "fixtures", `${target}.initialize.json`);

const report = (target: string, name: string, ms: number) =>
  console.info(`${target} timing: ${name}: ${ms.toFixed(0)} ms`);

const field = (caps: ProviderCapabilities, path: string): unknown => {
  const [group, name] = path.split(".") as [keyof ProviderCapabilities, string];
  return (caps[group] as unknown as Record<string, unknown>)[name];
};

export function agentSuite(agent: AgentUnderTest, expected: ExpectedRecord): void {
  const target = agent.target;
  let world: AcpWorld;
  const rt = () => world.rt;
  const thread = async () => (await rt().createThread({ providerTarget: target, cwd: world.workspace })).threadId;
  const pendingRequest = async (threadId: string) => {
    await until("a permission request", () => rt().views.pendingRequests(threadId).length === 1);
    return rt().views.pendingRequests(threadId)[0]!;
  };
  /** The record the agent's live session announced. */
  const sessionCaps = () =>
    [...rt().actors.sessions.values()].at(-1)!.getSnapshot().context.capabilities as ProviderCapabilities;
  const streaming = (runId: string) =>
    until("streaming", () =>
      rt()
        .views.runs.get(runId)!
        .items.some((i) => i.kind === "assistant_message"),
    );

  /** The agent's answers to `initialize`, as they came (one per agent process). */
  const initialized: unknown[] = [];
  let initializeId: unknown = null;
  const tap = (direction: "in" | "out", line: string) => {
    const frame = JSON.parse(line) as { id?: unknown; method?: string; result?: unknown };
    if (direction === "out" && frame.method === "initialize") initializeId = frame.id;
    else if (direction === "in" && frame.id === initializeId && "result" in frame) initialized.push(frame.result);
  };

  beforeAll(async () => {
    world = await acpWorld(agent, {
      adapter: { tap },
      runtime: {
        providers: { other: createScriptedAdapter({ script: () => [{ type: "text", text: "other says PAPAYA" }] }) },
      },
    });
  }, 120_000);
  afterAll(async () => world?.cleanup());
  // Every scenario takes the replies it scripts, no more, no fewer: the next one starts from an empty queue.
  afterEach(() => expect(world.sim.pending()).toBe(0));

  describe(`${target} over ACP: turns`, () => {
    it("runs a text turn with thoughts; the session's record is the one its initialize advertises", async () => {
      const threadId = await thread();
      world.sim.push({ reasoning: "**Greeting**\n\na greeting is due", text: "Hello from the simulator!" });
      const t0 = performance.now();
      const run = await rt().waitForRun((await rt().sendMessage({ threadId, text: "say hi" })).runId);
      report(target, "agent start + text turn", performance.now() - t0);
      expect(run.status).toBe("completed");
      expect(run.items.map((i) => i.kind)).toEqual(["user_message", "reasoning", "assistant_message"]);
      expect(run.items[1]!.text).toContain("a greeting is due");
      expect(run.items[2]!.text).toBe("Hello from the simulator!");
      // The handshake is the one recorded in test/acp/fixtures (what the docs' capability table is made from).
      expect(initialized[0]).toEqual(JSON.parse(await readFile(fixture(agent.target), "utf8")));
      const caps = sessionCaps();
      expect(Object.fromEntries(Object.keys(expected.fields).map((f) => [f, field(caps, f)]))).toEqual(expected.fields);
    });

    it("asks before a command: allowed runs it, refused does not, and each answer reaches the agent", async () => {
      const threadId = await thread();
      world.sim.push(agent.shell("echo allowed > allowed.txt"), { text: "ran it" });
      const allowed = await rt().sendMessage({ threadId, text: "run it" });
      const asked = await pendingRequest(threadId);
      expect(asked.payload).toMatchObject({ kind: "command", command: expect.stringContaining("allowed.txt") });
      await rt().respond({ requestId: asked.requestId, response: { kind: "decision", decision: "accept" } });
      const ran = await rt().waitForRun(allowed.runId);
      expect(ran.status).toBe("completed");
      expect(existsSync(join(world.workspace, "allowed.txt"))).toBe(true);
      expect(ran.items.find((i) => i.kind === "command")).toMatchObject({ status: "complete" });

      // An agent that goes on after a refusal asks the model again; one that cancels the turn does not.
      world.sim.push(agent.shell("echo refused > refused.txt"));
      if (agent.refusalEnds === "completed") world.sim.push({ text: "did not run it" });
      const refused = await rt().sendMessage({ threadId, text: "run another" });
      const second = await pendingRequest(threadId);
      await rt().respond({ requestId: second.requestId, response: { kind: "decision", decision: "decline" } });
      const done = await rt().waitForRun(refused.runId);
      expect(done.status).toBe(agent.refusalEnds);
      expect(existsSync(join(world.workspace, "refused.txt"))).toBe(false);
      expect(rt().views.requests.get(second.requestId)?.status).not.toBe("pending");
    });

    it("shares a plan where the agent has one; where it has none, its record says so", async () => {
      const threadId = await thread();
      if (!expected.plan) {
        world.sim.push({ text: "no plan" });
        await rt().waitForRun((await rt().sendMessage({ threadId, text: "plan it" })).runId);
        return expect(sessionCaps().planning.emitsPlanUpdated).toBe(false);
      }
      world.sim.push(expected.plan.reply, { text: "planned" });
      const run = await rt().waitForRun((await rt().sendMessage({ threadId, text: "plan it" })).runId);
      expect(run.status, JSON.stringify(run.items)).toBe("completed");
      expect(run.items.find((i) => i.kind === "plan")?.detail).toMatchObject({ steps: expected.plan.steps });
    });

    it("takes a handoff from another provider as user context, then a delta when it comes back", async () => {
      await conformance.takesHandoff(asProvider(world, target));
    });
  });

  describe(`${target} over ACP: cancel and steer`, () => {
    it("cancels mid-stream: session/cancel is no terminal, the prompt's cancelled response is", async () => {
      const threadId = await thread();
      world.sim.push({ hang: true, text: "working on it" });
      const { runId } = await rt().sendMessage({ threadId, text: "long task" });
      await streaming(runId);
      const t0 = performance.now();
      expect((await rt().interrupt({ runId })).via).toBe("native");
      const run = await rt().waitForRun(runId);
      report(target, "cancel -> terminal (mid-stream)", performance.now() - t0);
      expect(run.status).toBe("interrupted");
      world.sim.push({ text: "still here" });
      const next = await rt().waitForRun((await rt().sendMessage({ threadId, text: "next" })).runId);
      expect(next.status).toBe("completed");
    });

    it("cancels with a permission pending: the request is answered cancelled, the command never runs", async () => {
      await conformance.interruptWhileRequestPending(asProvider(world, target), agent.shell("echo never > never.txt"));
    });

    it("steers as its record says: natively where it advertises steering, else by interrupt-restart", async () => {
      const threadId = await thread();
      world.sim.push({ hang: true, text: "working" }, saw("also consider this"));
      const { runId } = await rt().sendMessage({ threadId, text: "a task" });
      await streaming(runId);
      const native = expected.fields["turns.supportsActiveSteering"] === true;
      const steer = await rt().sendMessage({ threadId, text: "also consider this", mode: "steer" });
      expect(steer).toMatchObject({ disposition: "steered", via: native ? "native" : "interrupt_restart", runId });
      const run = await rt().waitForRun(runId);
      expect(run.status).toBe("completed");
      expect(run.items.at(-1)?.text).toBe("saw also consider this");
      if (native) expect(run.attempts).toHaveLength(1);
      else {
        expect(run.attempts.map((a) => [a.reason, a.status])).toEqual([
          ["initial", "superseded"],
          ["steering_restart", "completed"],
        ]);
        expect(run.fallbacks.map((f) => f.policy)).toEqual(["steer_by_interrupt_restart"]);
      }
    });
  });

  describe(`${target} over ACP: processes`, () => {
    it("resumes a thread in a new agent process with its history", async () => {
      await conformance.resumesInNewHost(asProvider(world, target));
    });

    it("SIGKILL of the agent mid-turn fails the run and expires its permission; the thread goes on", async () => {
      await conformance.survivesHostSigkill(asProvider(world, target), agent.shell("echo never > never.txt"));
    });
  });
}
