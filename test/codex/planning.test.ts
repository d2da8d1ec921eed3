import { afterEach, describe, expect, it } from "vitest";
import type { DomainEvent, LogRecord } from "../../src/index.js";
import type { SimulatorRequest } from "../../src/simulator/index.js";
import { codexWorld, sawInNextRequest, until, type CodexWorld } from "./harness.js";

/**
 * Plans and questions on the real Codex binary, through the runtime, against the model
 * simulator. What the pinned binary does (src/adapters/codex/mapper.ts, collaborationMode): in Default mode an
 * `update_plan` call is a `turn/plan/updated` and `request_user_input` is refused; in Plan mode
 * (a thread sent `runtimeMode: { interaction: "plan" }`) `request_user_input` asks the client and a
 * `<proposed_plan>` block is a plan item, while `update_plan` is refused. Codex cannot switch
 * modes in a session, so a mode change gets a new session, on the same app-server.
 */

let world: CodexWorld | null = null;
afterEach(async () => {
  await world?.cleanup();
  world = null;
});

async function thread(w: CodexWorld): Promise<string> {
  return (await w.rt.createThread({ providerTarget: "codex", cwd: w.workspace })).threadId;
}

const planCall = (explanation: string, plan: Array<{ step: string; status: string }>) => ({
  tools: [{ name: "update_plan", args: { explanation, plan } }],
});
const question = {
  id: "colour",
  header: "Colour",
  question: "Which colour?",
  options: [
    { label: "Red", description: "warm" },
    { label: "Blue", description: "cool" },
  ],
};
const ask = (id: string) => ({ tools: [{ name: "request_user_input", id, args: { questions: [question] } }] });

/** What Codex handed the model as the output of one of its tool calls. */
function toolOutput(req: SimulatorRequest, callId: string): string {
  const input = (req.body as { input?: Array<{ type?: string; call_id?: string; output?: unknown }> }).input ?? [];
  const output = input.find((i) => i.type === "function_call_output" && i.call_id === callId)?.output;
  return typeof output === "string" ? output : "(no output)";
}
const echoOutput = (callId: string) => (req: SimulatorRequest) => ({ text: `output: ${toolOutput(req, callId)}` });
const toolNames = (req: SimulatorRequest) =>
  ((req.body as { tools?: Array<{ name?: string }> }).tools ?? []).map((t) => t.name);

/** A world that keeps the frames from and to the app-server, and the runtime's log. */
async function tappedWorld() {
  const frames: { in: Array<Record<string, unknown>>; out: Array<Record<string, unknown>> } = { in: [], out: [] };
  world = await codexWorld({
    adapter: { tap: (direction, line) => frames[direction].push(JSON.parse(line) as Record<string, unknown>) },
  });
  const records: LogRecord<DomainEvent>[] = [];
  world.rt.subscribe({ afterSeq: 0 }, (r) => records.push(r));
  return { w: world, frames, records };
}

const inPlan = { runtimeMode: { interaction: "plan" as const } };
const inDefault = { runtimeMode: { interaction: "default" as const } };

/** The session actors' contexts, oldest first. */
const sessionsOf = (w: CodexWorld) => [...w.rt.actors.sessions.values()].map((a) => a.getSnapshot().context);
const sessionRecord = (w: CodexWorld) => sessionsOf(w).at(-1)!.capabilities!;

/** The collaboration mode each `turn/start` named, in order. */
const turnModes = (out: Array<Record<string, unknown>>) =>
  out
    .filter((f) => f.method === "turn/start")
    .map((f) => (f.params as { collaborationMode: { mode: string } }).collaborationMode.mode);

describe("codex: Default mode", () => {
  it("shows update_plan as the run's live plan: its steps and explanation, one node updated in place", async () => {
    const { w } = await tappedWorld();
    const threadId = await thread(w);
    w.sim.push(
      planCall("start", [
        { step: "Reproduce", status: "in_progress" },
        { step: "Fix", status: "pending" },
      ]),
      planCall("reproduced it", [
        { step: "Reproduce", status: "completed" },
        { step: "Fix", status: "in_progress" },
      ]),
      { text: "fixing" },
    );
    const run = await w.rt.waitForRun((await w.rt.sendMessage({ threadId, text: "fix the bug" })).runId);
    expect(run.status).toBe("completed");
    expect(toolNames(w.sim.requests.find((r) => r.url === "/v1/responses")!)).toContain("update_plan");
    const plans = run.items.filter((i) => i.kind === "plan");
    expect(plans).toHaveLength(1);
    expect(plans[0]!.detail).toMatchObject({
      explanation: "reproduced it",
      steps: [
        { step: "Reproduce", status: "completed" },
        { step: "Fix", status: "in_progress" },
      ],
    });
    expect(w.rt.affordances(threadId).panels.plan).toBe(true);
    expect(sessionRecord(w).planning).toMatchObject({ emitsPlanUpdated: true, supportsStructuredQuestions: false });
  });

  it("refuses request_user_input and keeps <proposed_plan> as text: no request opens, no proposed plan", async () => {
    const { w } = await tappedWorld();
    const threadId = await thread(w);
    const proposal = "Here it is.\n<proposed_plan>\n1. do A\n</proposed_plan>\n";
    w.sim.push(ask("call_ask"), echoOutput("call_ask"), { text: proposal });
    const asked = await w.rt.waitForRun((await w.rt.sendMessage({ threadId, text: "ask me" })).runId);
    expect(asked.items.at(-1)?.text).toBe("output: request_user_input is unavailable in Default mode");
    const proposed = await w.rt.waitForRun((await w.rt.sendMessage({ threadId, text: "plan it" })).runId);
    expect(proposed.items.map((i) => [i.kind, i.text])).toEqual([
      ["user_message", "plan it"],
      ["assistant_message", proposal],
    ]);
    expect([...w.rt.views.requests.values()].filter((r) => r.threadId === threadId)).toEqual([]);
  });
});

describe("codex: Plan mode (runtimeMode interaction: plan)", () => {
  it("asks request_user_input as a structured question and hands the answer to Codex", async () => {
    const { w } = await tappedWorld();
    const threadId = await thread(w);
    w.sim.push(ask("call_ask"), echoOutput("call_ask"));
    const { runId } = await w.rt.sendMessage({ threadId, text: "ask me", ...inPlan });
    await until("a question", () => w.rt.views.pendingRequests(threadId).length === 1);
    const request = w.rt.views.pendingRequests(threadId)[0]!;
    expect(request.payload).toEqual({ kind: "user_input", questions: [question] });
    await w.rt.respond({ requestId: request.requestId, response: { kind: "answers", answers: { colour: "Blue" } } });
    const run = await w.rt.waitForRun(runId);
    expect(run.status).toBe("completed");
    expect(run.items.at(-1)?.text).toBe(`output: ${JSON.stringify({ answers: { colour: { answers: ["Blue"] } } })}`);
    expect(w.rt.views.requests.get(request.requestId)?.status).toBe("resolved");
    expect(sessionRecord(w).planning).toMatchObject({ supportsStructuredQuestions: true, emitsPlanUpdated: false });
  });

  it("shows <proposed_plan> as a proposed plan whose node is Codex's plan item", async () => {
    const { w, frames, records } = await tappedWorld();
    const threadId = await thread(w);
    w.sim.push({ text: "Here is the plan.\n<proposed_plan>\n# Plan\n1. do A\n2. do B\n</proposed_plan>\n" });
    const run = await w.rt.waitForRun((await w.rt.sendMessage({ threadId, text: "plan it", ...inPlan })).runId);
    expect(run.status).toBe("completed");
    expect(run.items.map((i) => [i.kind, i.text])).toEqual([
      ["user_message", "plan it"],
      ["assistant_message", "Here is the plan.\n"],
      ["proposed_plan", "# Plan\n1. do A\n2. do B\n"],
    ]);
    // The plan's deltas and its item carry one native id: the plan node is that item.
    const deltaIds = frames.in
      .filter((f) => f.method === "item/plan/delta")
      .map((f) => (f.params as { itemId: string }).itemId);
    expect(new Set(deltaIds).size).toBe(1);
    const planNode = records.find((r) => r.event.type === "node.started" && r.event.kind === "plan")?.event;
    expect(planNode).toMatchObject({ nativeRef: deltaIds[0] });
    expect(w.rt.affordances(threadId).panels.plan).toBe(true);
    expect(sessionRecord(w).planning).toMatchObject({ emitsProposedPlan: true, planDeltasHaveItemIds: true });
  });

  it("update_plan is refused in Plan mode: no live plan", async () => {
    const { w } = await tappedWorld();
    const threadId = await thread(w);
    w.sim.push(planCall("x", [{ step: "one", status: "pending" }]), sawInNextRequest("not allowed in Plan mode"));
    const run = await w.rt.waitForRun((await w.rt.sendMessage({ threadId, text: "plan", ...inPlan })).runId);
    expect(run.items.at(-1)?.text).toBe("saw not allowed in Plan mode");
    expect(run.items.some((i) => i.kind === "plan")).toBe(false);
  });

  it("a thread switched to Plan mode gets a new session on the same app-server; back, Default again", async () => {
    const { w, frames, records } = await tappedWorld();
    const threadId = await thread(w);
    w.sim.push({ text: "hello" });
    await w.rt.waitForRun((await w.rt.sendMessage({ threadId, text: "hi" })).runId);

    w.sim.push(ask("call_plan"), echoOutput("call_plan"));
    const planned = await w.rt.sendMessage({ threadId, text: "ask me", ...inPlan });
    await until("a question", () => w.rt.views.pendingRequests(threadId).length === 1);
    const request = w.rt.views.pendingRequests(threadId)[0]!;
    expect(request.payload).toEqual({ kind: "user_input", questions: [question] });
    await w.rt.respond({ requestId: request.requestId, response: { kind: "answers", answers: { colour: "Red" } } });
    expect((await w.rt.waitForRun(planned.runId)).status).toBe("completed");

    w.sim.push(ask("call_back"), echoOutput("call_back"));
    const back = await w.rt.waitForRun((await w.rt.sendMessage({ threadId, text: "ask again", ...inDefault })).runId);
    expect(back.items.at(-1)?.text).toBe("output: request_user_input is unavailable in Default mode");
    expect(w.rt.views.pendingRequests(threadId)).toEqual([]);

    const switches = records.filter((r) => r.event.type === "policy.applied" && r.event.threadId === threadId);
    expect(switches.map((r) => r.event)).toEqual([
      expect.objectContaining({ policy: "mode_switch_new_session", detail: expect.stringContaining("mode plan") }),
      expect.objectContaining({ policy: "mode_switch_new_session", detail: expect.stringContaining("mode default") }),
    ]);
    // A session per mode, each announcing its mode's record; one app-server serves both.
    const [inDefaultMode, inPlanMode] = sessionsOf(w);
    expect(inDefaultMode!.runtimeMode.interaction).toBe("default");
    expect(inDefaultMode!.capabilities!.planning.supportsStructuredQuestions).toBe(false);
    expect(inPlanMode!.runtimeMode.interaction).toBe("plan");
    expect(inPlanMode!.capabilities!.planning.supportsStructuredQuestions).toBe(true);
    expect(w.adapter.hostPid(inPlanMode!.sessionId)).toBe(w.adapter.hostPid(inDefaultMode!.sessionId));
    expect(turnModes(frames.out)).toEqual(["default", "plan", "default"]);
  });

  it("every turn names its mode: a Plan-mode thread resumed by a new app-server in Default asks no more", async () => {
    const { w, frames } = await tappedWorld();
    const threadId = await thread(w);
    w.sim.push(ask("call_first"), { text: "thanks" });
    const { runId } = await w.rt.sendMessage({ threadId, text: "ask me", ...inPlan });
    await until("a question", () => w.rt.views.pendingRequests(threadId).length === 1);
    const request = w.rt.views.pendingRequests(threadId)[0]!;
    await w.rt.respond({ requestId: request.requestId, response: { kind: "answers", answers: { colour: "Red" } } });
    await w.rt.waitForRun(runId);

    // Codex keeps a turn's mode for the turns after it, across a resume: only naming it changes it.
    await w.reopen();
    w.sim.push(ask("call_again"), echoOutput("call_again"));
    const again = await w.rt.waitForRun((await w.rt.sendMessage({ threadId, text: "ask again", ...inDefault })).runId);
    expect(again.items.at(-1)?.text).toBe("output: request_user_input is unavailable in Default mode");
    expect(turnModes(frames.out)).toEqual(["plan", "default"]);
  });

  it("a Plan-mode thread stays in Plan mode: later messages without a mode are asked in Plan mode", async () => {
    const { w, frames } = await tappedWorld();
    const threadId = await thread(w);
    w.sim.push({ text: "planning" }, ask("call_later"), echoOutput("call_later"));
    await w.rt.waitForRun((await w.rt.sendMessage({ threadId, text: "plan", ...inPlan })).runId);
    const { runId } = await w.rt.sendMessage({ threadId, text: "ask me" });
    await until("a question", () => w.rt.views.pendingRequests(threadId).length === 1);
    const request = w.rt.views.pendingRequests(threadId)[0]!;
    await w.rt.respond({ requestId: request.requestId, response: { kind: "answers", answers: { colour: "Blue" } } });
    expect((await w.rt.waitForRun(runId)).status).toBe("completed");
    expect(turnModes(frames.out)).toEqual(["plan", "plan"]);
    expect(sessionsOf(w)).toHaveLength(1);
  });
});
