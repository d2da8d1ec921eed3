import { existsSync, readFileSync } from "node:fs";
import { writeFile } from "node:fs/promises";
import { join } from "node:path";
import { afterEach, describe, expect, it } from "vitest";
import { createScriptedAdapter } from "../../src/index.js";
import { sawInNextRequest } from "../codex/harness.js";
import * as conformance from "../providers/conformance.js";
import { claudeProcesses, claudeWorld, until, untilWrittenDown, type ClaudeWorld } from "./harness.js";

const asProvider = (w: ClaudeWorld): conformance.ProviderWorld => ({
  get rt() {
    return w.rt;
  },
  sim: w.sim,
  workspace: w.workspace,
  target: "claude",
  hostPid: (id) => w.adapter.hostPid(id),
  get adapter() {
    return w.adapter;
  },
  reopen: () => w.reopen(),
  untilWrittenDown: (threadId, prompt) => untilWrittenDown(w, threadId, prompt),
});

/**
 * The real Claude Code binary (shipped by the pinned Agent SDK) under Tiller, offline against
 * the model simulator. Claude has no native steering and no turn ids, so these scenarios are
 * also where the degradation transitions meet a real binary. Timings are printed, never asserted.
 */

let world: ClaudeWorld | null = null;
afterEach(async () => {
  await world?.cleanup();
  world = null;
});

const report = (name: string, ms: number) => console.info(`claude timing: ${name}: ${ms.toFixed(0)} ms`);
const bash = (command: string) => ({
  tools: [{ name: "Bash", args: { command, description: "needed for the test" } }],
});
const saw = sawInNextRequest;
/**
 * Runtime options under which Claude asks before every write, file tool or command (the read-only sandbox): for the
 * tests that need a permission prompt. (Under the default workspace-write sandbox, writes in the cwd go ahead.)
 */
const asking = { sandbox: "read-only" } as const;

async function thread(w: ClaudeWorld): Promise<string> {
  return (await w.rt.createThread({ providerTarget: "claude", cwd: w.workspace })).threadId;
}

async function pendingRequest(w: ClaudeWorld, threadId: string) {
  await until("a permission prompt", () => w.rt.views.pendingRequests(threadId).length === 1);
  return w.rt.views.pendingRequests(threadId)[0]!;
}

describe("claude: turns and permissions", () => {
  it("runs a text turn", async () => {
    world = await claudeWorld();
    const threadId = await thread(world);
    world.sim.push({ text: "Hello from the simulator!" });
    const t0 = performance.now();
    const run = await world.rt.waitForRun((await world.rt.sendMessage({ threadId, text: "say hi" })).runId);
    report("host start + text turn", performance.now() - t0);
    expect(run.status).toBe("completed");
    expect(run.items.map((i) => [i.kind, i.text])).toEqual([
      ["user_message", "say hi"],
      ["assistant_message", "Hello from the simulator!"],
    ]);
    expect(world.sim.requests.at(-1)?.url).toMatch(/^\/v1\/messages/);
  });

  it("streams thinking as a reasoning item before the answer", async () => {
    world = await claudeWorld();
    const threadId = await thread(world);
    world.sim.push({ text: "the answer", reasoning: "pondering deeply" });
    const run = await world.rt.waitForRun((await world.rt.sendMessage({ threadId, text: "think first" })).runId);
    expect(run.items.map((i) => [i.kind, i.text])).toEqual([
      ["user_message", "think first"],
      ["reasoning", "pondering deeply"],
      ["assistant_message", "the answer"],
    ]);
  });

  it(
    "asks before Bash under a read-only sandbox: " +
      "allowed runs it and its output reaches the model; denied does not run it",
    async () => {
      world = await claudeWorld(asking);
      const threadId = await thread(world);
      world.sim.push(bash("echo allowed > ran.txt && echo OUT-42"), saw("OUT-42"));
      const allowed = await world.rt.sendMessage({ threadId, text: "run it" });
      const request = await pendingRequest(world, threadId);
      expect(request.payload).toMatchObject({ kind: "command", command: expect.stringContaining("echo allowed") });
      await world.rt.respond({ requestId: request.requestId, response: { kind: "decision", decision: "accept" } });
      const run = await world.rt.waitForRun(allowed.runId);
      expect(run.items.find((i) => i.kind === "command")?.output).toContain("OUT-42");
      expect(run.items.at(-1)?.text).toBe("saw OUT-42");
      expect(existsSync(join(world.workspace, "ran.txt"))).toBe(true);

      world.sim.push(bash("echo denied > nope.txt"), saw("declined"));
      const denied = await world.rt.sendMessage({ threadId, text: "and this" });
      const second = await pendingRequest(world, threadId);
      await world.rt.respond({ requestId: second.requestId, response: { kind: "decision", decision: "decline" } });
      const run2 = await world.rt.waitForRun(denied.runId);
      expect(run2.status).toBe("completed");
      expect(existsSync(join(world.workspace, "nope.txt"))).toBe(false);
      expect(run2.items.find((i) => i.kind === "command")?.detail).toMatchObject({ status: "failed" });
    },
  );
});

describe("claude: a missing binary", () => {
  it("fails the run loudly, naming the executable", async () => {
    world = await claudeWorld({}, { executable: "/nonexistent/claude-code" });
    const threadId = await thread(world);
    const run = await world.rt.waitForRun((await world.rt.sendMessage({ threadId, text: "hello?" })).runId);
    expect(run.status).toBe("failed");
    expect(run.failure?.message).toContain("/nonexistent/claude-code");
  });
});

describe("claude: files and todos", () => {
  it("under a read-only sandbox, edits a file after reading it, once the Edit is allowed", async () => {
    world = await claudeWorld(asking);
    const threadId = await thread(world);
    const file = join(world.workspace, "notes.txt");
    await writeFile(file, "hello\n");
    world.sim.push(
      { tools: [{ name: "Read", args: { file_path: file } }] },
      { tools: [{ name: "Edit", args: { file_path: file, old_string: "hello", new_string: "hello, edited" } }] },
      { text: "edited" },
    );
    const { runId } = await world.rt.sendMessage({ threadId, text: "edit the notes" });
    const request = await pendingRequest(world, threadId);
    expect(request.payload).toMatchObject({ kind: "file_change", path: file });
    await world.rt.respond({ requestId: request.requestId, response: { kind: "decision", decision: "accept" } });
    const run = await world.rt.waitForRun(runId);
    expect(run.status).toBe("completed");
    expect(readFileSync(file, "utf8")).toBe("hello, edited\n");
    expect(run.items.filter((i) => i.kind === "file_change")).toHaveLength(1);
  });

  it("shows TodoWrite as a todo list", async () => {
    world = await claudeWorld();
    const threadId = await thread(world);
    const todos = [
      { content: "Reproduce the bug", status: "completed", activeForm: "Reproducing" },
      { content: "Fix it", status: "in_progress", activeForm: "Fixing" },
    ];
    world.sim.push({ tools: [{ name: "TodoWrite", args: { todos } }] }, { text: "planned" });
    const run = await world.rt.waitForRun((await world.rt.sendMessage({ threadId, text: "plan the work" })).runId);
    expect(run.status).toBe("completed");
    const list = run.items.find((i) => i.kind === "todo_list");
    expect(list?.detail).toMatchObject({
      items: [
        { text: "Reproduce the bug", status: "completed" },
        { text: "Fix it", status: "in_progress" },
      ],
    });
    expect(world.rt.affordances(threadId).panels.todo).toBe(true);
  });
});

describe("claude: subagents, questions, plans and models", () => {
  it("shows a subagent as a nested node whose completion does not complete the parent run", async () => {
    world = await claudeWorld();
    const threadId = await thread(world);
    // Asked to run in the background, which the adapter turns off: it runs in the foreground, within the turn.
    const agent = {
      description: "look around",
      prompt: "report SUB",
      subagent_type: "general-purpose",
      run_in_background: true,
    };
    // The parent's reply after the subagent hangs: the run must still be running when the subagent is done.
    world.sim.push(
      { tools: [{ name: "Agent", args: agent }] },
      { text: "SUB-RESULT" },
      { hang: true, text: "parent " },
    );
    const { runId } = await world.rt.sendMessage({ threadId, text: "delegate it" });
    const subagentDone = () =>
      world!.rt.views.runs.get(runId)!.items.find((i) => i.kind === "subagent" && i.status === "complete");
    await until("the subagent to complete", () => subagentDone() !== undefined);
    const subagent = subagentDone()!;
    expect(subagent).toMatchObject({
      result: "SUB-RESULT",
      detail: expect.objectContaining({ toolName: "general-purpose" }),
    });
    await until(
      "the parent's next reply to start streaming",
      () => world!.sim.requests.filter((r) => r.url.startsWith("/v1/messages")).length >= 3,
    );
    expect(world.rt.views.runs.get(runId)!.status).toBe("running");
    world.sim.releaseHang();
    const run = await world.rt.waitForRun(runId);
    expect(run.status).toBe("completed");
    const child = run.items.find((i) => i.kind === "assistant_message" && i.parentId === subagent.id);
    expect(child?.text).toBe("SUB-RESULT");
    expect(
      run.items.filter((i) => i.kind === "assistant_message" && i.parentId !== subagent.id).at(-1)?.text,
    ).toContain("parent");
  });

  it("asks AskUserQuestion as a structured question and hands the answer to Claude", async () => {
    world = await claudeWorld();
    const threadId = await thread(world);
    const question = {
      question: "Which colour?",
      header: "Colour",
      options: [
        { label: "Red", description: "warm" },
        { label: "Blue", description: "cool" },
      ],
      multiSelect: false,
    };
    world.sim.push(
      { tools: [{ name: "AskUserQuestion", args: { questions: [question] } }] },
      saw('\\"Which colour?\\"=\\"Blue\\"'),
    );
    const { runId } = await world.rt.sendMessage({ threadId, text: "ask me" });
    const request = await pendingRequest(world, threadId);
    expect(request.payload).toEqual({
      kind: "user_input",
      questions: [{ id: "Which colour?", ...question, options: question.options }],
    });
    await world.rt.respond({
      requestId: request.requestId,
      response: { kind: "answers", answers: { "Which colour?": "Blue" } },
    });
    const run = await world.rt.waitForRun(runId);
    expect(run.status).toBe("completed");
    expect(run.items.at(-1)?.text).toMatch(/^saw /);
  });

  it("shows plan mode's final plan as a proposed plan, approved through ExitPlanMode", async () => {
    world = await claudeWorld();
    const threadId = await thread(world);
    const plan = "# Plan\n1. do A\n2. do B\n";
    // In plan mode Claude names the file the plan goes to; ExitPlanMode then carries that plan.
    const writePlan = (req: { body: unknown }) => {
      const path = /create your plan at (\S+?\.md)/.exec(JSON.stringify(req.body))?.[1] ?? "missing-plan-path.md";
      return { tools: [{ name: "Write", args: { file_path: path, content: plan } }] };
    };
    world.sim.push(
      { tools: [{ name: "EnterPlanMode", args: {} }] },
      writePlan,
      { tools: [{ name: "ExitPlanMode", args: {} }] },
      saw("User has approved your plan"),
    );
    const { runId } = await world.rt.sendMessage({ threadId, text: "plan first" });
    const request = await pendingRequest(world, threadId);
    expect(request.payload).toEqual({ kind: "plan_approval", plan });
    expect(world.rt.views.runs.get(runId)!.items.find((i) => i.kind === "proposed_plan")?.text).toBe(plan);
    await world.rt.respond({ requestId: request.requestId, response: { kind: "decision", decision: "accept" } });
    const run = await world.rt.waitForRun(runId);
    expect(run.items.at(-1)?.text).toBe("saw User has approved your plan");
    expect(world.rt.affordances(threadId).panels.plan).toBe(true);
  });

  it("switches the model inside the session: the next turn asks for the new model, no new session", async () => {
    world = await claudeWorld();
    const threadId = await thread(world);
    world.sim.push({ text: "one" }, { text: "two" });
    const first = await world.rt.waitForRun(
      (await world.rt.sendMessage({ threadId, text: "first", model: "claude-sonnet-4-5" })).runId,
    );
    expect(first.items.at(-1)?.text).toBe("one");
    const before = world.sim.requests.length;
    // Claude checks the new model with a one-token probe, which the simulator answers on its own.
    const run = await world.rt.waitForRun(
      (await world.rt.sendMessage({ threadId, text: "second", model: "claude-haiku-4-5" })).runId,
    );
    expect(run.items.at(-1)?.text).toBe("two");
    const models = (from: number, to: number) =>
      world!.sim.requests
        .slice(from, to)
        .filter((r) => r.url.startsWith("/v1/messages"))
        .map((r) => (r.body as { model?: string }).model);
    expect(models(0, before)).toContain("claude-sonnet-4-5");
    expect(models(before, world.sim.requests.length)).toContain("claude-haiku-4-5");
    // One session and one provider thread for both runs; no `model_switch_new_session`.
    expect(world.rt.views.sessions.size).toBe(1);
    expect(
      new Set(world.rt.views.threads.get(threadId)!.runs.flatMap((r) => r.attempts.map((a) => a.providerThreadId)))
        .size,
    ).toBe(1);
    expect(world.rt.views.threads.get(threadId)!.model).toBe("claude-haiku-4-5");
  });
});

describe("claude: interrupt and steer", () => {
  it("interrupts mid-stream: the terminal arrives after the acknowledgement", async () => {
    world = await claudeWorld();
    const threadId = await thread(world);
    world.sim.push({ hang: true, text: "working on it" });
    const { runId } = await world.rt.sendMessage({ threadId, text: "long task" });
    await until("streaming", () => world!.rt.views.runs.get(runId)!.items.some((i) => i.kind === "assistant_message"));
    const t0 = performance.now();
    await world.rt.interrupt({ runId });
    const run = await world.rt.waitForRun(runId);
    report("interrupt -> terminal (mid-stream)", performance.now() - t0);
    expect(run.status).toBe("interrupted");
    world.sim.push({ text: "still here" });
    expect((await world.rt.waitForRun((await world.rt.sendMessage({ threadId, text: "next" })).runId)).status).toBe(
      "completed",
    );
  });

  it("a silent turn Claude is still working on is vouched for by its host, not failed by the watchdog", async () => {
    world = await claudeWorld({ turnSilenceMs: 100 });
    await conformance.silentTurnVouchedFor(asProvider(world));
  });

  it("interrupts while a permission is pending: the request closes, the command never runs", async () => {
    world = await claudeWorld(asking);
    await conformance.interruptWhileRequestPending(asProvider(world), bash("echo never > never.txt"));
  });

  it(
    "steers by interrupt-restart: a new attempt of the same run carries the steer, " +
      "recorded as the degradation; the old attempt's late events are fenced",
    async () => {
      world = await claudeWorld();
      const threadId = await thread(world);
      world.sim.push({ hang: true, text: "working" }, saw("also consider this"));
      const { runId } = await world.rt.sendMessage({ threadId, text: "a task" });
      await until("streaming", () =>
        world!.rt.views.runs.get(runId)!.items.some((i) => i.kind === "assistant_message"),
      );
      const steer = await world.rt.sendMessage({ threadId, text: "also consider this", mode: "steer" });
      expect(steer).toMatchObject({ disposition: "steered", via: "interrupt_restart", runId });
      const run = await world.rt.waitForRun(runId);
      expect(run.status).toBe("completed");
      expect(run.attempts.map((a) => [a.reason, a.status])).toEqual([
        ["initial", "superseded"],
        ["steering_restart", "completed"],
      ]);
      expect(run.items.at(-1)?.text).toBe("saw also consider this");
      expect(run.fallbacks.map((f) => f.policy)).toEqual(["steer_by_interrupt_restart"]);
      // Claude still reports the superseded attempt's message after the interrupt: fenced, never applied.
      const records: Array<{ seq: number; event: Record<string, unknown> }> = [];
      const stop = world.rt.subscribe({ threadId }, (r) => void records.push(r as never));
      await until("the log replayed", () => records.some((r) => r.event.type === "run.terminal"));
      stop();
      const first = run.attempts[0]!.attemptId;
      const steeredAt = records.find((r) => r.event.type === "policy.applied")!.seq;
      expect(
        records.some((r) => r.seq > steeredAt && r.event.type === "event.fenced" && r.event.attemptId === first),
      ).toBe(true);
      const firstNodes = new Set(
        records
          .filter((r) => r.event.type === "node.started" && r.event.attemptId === first)
          .map((r) => r.event.nodeId),
      );
      const appliedLate = records.filter(
        (r) =>
          r.seq > steeredAt &&
          r.event.type === "node.completed" &&
          firstNodes.has(r.event.nodeId) &&
          r.event.settledBy === "provider",
      );
      expect(appliedLate).toEqual([]);
    },
  );
});

/**
 * Freezes Claude as the next prompt is handed to it and kills it once the host has taken the
 * prompt: Claude dies without having read (so without having written down) that prompt, on any
 * machine. (Claude writes its transcript on a timer of its own, so a kill at any later point
 * may or may not find the prompt on disk.)
 */
function killBeforeClaudeReadsNextPrompt(w: ClaudeWorld): void {
  const adapter = w.adapter;
  const send = adapter.sendRun.bind(adapter);
  adapter.sendRun = async (input) => {
    adapter.sendRun = send;
    const frozen = claudeProcesses(w);
    expect(frozen).toHaveLength(1);
    for (const pid of frozen) process.kill(pid, "SIGSTOP");
    try {
      return await send(input);
    } finally {
      for (const pid of frozen) process.kill(pid, "SIGKILL");
    }
  };
}

describe("claude: its process dies under a live host", () => {
  /**
   * Sends `text`, waits for Claude to ask permission for a command and to write the prompt down, kills Claude: the turn
   * fails.
   */
  async function dieAsking(w: ClaudeWorld, threadId: string, text: string) {
    w.sim.push(bash("echo never > never.txt"));
    const { runId } = await w.rt.sendMessage({ threadId, text });
    await pendingRequest(w, threadId);
    await untilWrittenDown(w, threadId, text);
    for (const pid of claudeProcesses(w)) process.kill(pid, "SIGKILL");
    const run = await w.rt.waitForRun(runId);
    expect(run.status).toBe("failed");
    expect(run.failure?.message).toContain("SIGKILL");
  }

  it(
    "fails the turn Claude had taken; " +
      "the next turn resumes the session in a new Claude process, after an idle death too",
    async () => {
      world = await claudeWorld(asking);
      const threadId = await thread(world);
      world.sim.push({ text: "noted" });
      await world.rt.waitForRun((await world.rt.sendMessage({ threadId, text: "remember DELTA" })).runId);
      await dieAsking(world, threadId, "run something");
      world.sim.push(saw("DELTA"), saw("ECHO"));
      const next = await world.rt.waitForRun(
        (await world.rt.sendMessage({ threadId, text: "what do you remember? ECHO" })).runId,
      );
      expect(next.items.at(-1)?.text).toBe("saw DELTA");
      // Killed while idle (once the turn is on disk): nothing fails, and the next turn still resumes.
      await untilWrittenDown(world, threadId, "what do you remember? ECHO", { answered: true });
      const [idle] = claudeProcesses(world);
      process.kill(idle!, "SIGKILL");
      await until("Claude gone", () => !claudeProcesses(world!).includes(idle!));
      const after = await world.rt.waitForRun((await world.rt.sendMessage({ threadId, text: "and now?" })).runId);
      expect(after.items.at(-1)?.text).toBe("saw ECHO");
      const providerThreads = new Set(
        world.rt.views.threads.get(threadId)!.runs.flatMap((r) => r.attempts.map((a) => a.providerThreadId)),
      );
      expect(providerThreads.size).toBe(1);
    },
  );

  it(
    "gives a prompt Claude had not written down yet to a new Claude process, " +
      "which resumes the session: the turn completes",
    async () => {
      world = await claudeWorld();
      const threadId = await thread(world);
      world.sim.push({ text: "noted" }, saw("GOLF"));
      await world.rt.waitForRun((await world.rt.sendMessage({ threadId, text: "the word is GOLF" })).runId);
      await untilWrittenDown(world, threadId, "the word is GOLF", { answered: true });
      killBeforeClaudeReadsNextPrompt(world);
      const { runId } = await world.rt.sendMessage({ threadId, text: "long task" });
      const run = await world.rt.waitForRun(runId);
      expect(run.status).toBe("completed");
      expect(run.items.at(-1)?.text).toBe("saw GOLF");
      expect(run.attempts).toHaveLength(1);
      await untilWrittenDown(world, threadId, "long task", { answered: true }); // written once, by the new Claude
    },
  );

  it(
    "gives a new Claude process a prompt it had not taken up though an earlier prompt had the same words: " +
      "the host asks Claude's session for the prompt's own id, not for its text",
    async () => {
      world = await claudeWorld();
      const threadId = await thread(world);
      world.sim.push({ text: "first answer" }, { text: "second answer" });
      const first = await world.rt.waitForRun((await world.rt.sendMessage({ threadId, text: "try again" })).runId);
      expect(first.items.at(-1)?.text).toBe("first answer");
      await untilWrittenDown(world, threadId, "try again", { answered: true });
      // The same words again: Claude dies before it reads them, so only the first of the two is in its session.
      killBeforeClaudeReadsNextPrompt(world);
      const { runId } = await world.rt.sendMessage({ threadId, text: "try again" });
      const second = await world.rt.waitForRun(runId);
      expect([second.status, second.items.at(-1)?.text]).toEqual(["completed", "second answer"]);
      expect(second.attempts).toHaveLength(1);
      await untilWrittenDown(world, threadId, "try again", { answered: true, times: 2 });
    },
  );

  it(
    "starts again a Claude that died in a thread's first turn, " +
      "and one resumed after a restart (no 'session in use')",
    async () => {
      world = await claudeWorld(asking);
      const threadId = await thread(world);
      // Killed in a thread's first turn before writing anything down: a new Claude, in a new session of the same id,
      // takes the prompt.
      world.sim.push({ text: "taken again" });
      killBeforeClaudeReadsNextPrompt(world);
      const { runId } = await world.rt.sendMessage({ threadId, text: "first FOXTROT" });
      const first = await world.rt.waitForRun(runId);
      expect([first.status, first.items.at(-1)?.text]).toEqual(["completed", "taken again"]);
      world.sim.push(saw("FOXTROT"));
      expect(
        (await world.rt.waitForRun((await world.rt.sendMessage({ threadId, text: "again" })).runId)).items.at(-1)?.text,
      ).toBe("saw FOXTROT");
      // Resumed in a new host, then killed: the session is on disk, so it is resumed, never recreated.
      await untilWrittenDown(world, threadId, "again", { answered: true });
      await world.reopen();
      await dieAsking(world, threadId, "after a restart");
      world.sim.push(saw("FOXTROT"));
      expect(
        (await world.rt.waitForRun((await world.rt.sendMessage({ threadId, text: "still?" })).runId)).items.at(-1)
          ?.text,
      ).toBe("saw FOXTROT");
    },
  );

  it("rolls back a thread whose Claude died while idle: the cut needs only Claude's transcript", async () => {
    world = await claudeWorld({ checkpoints: true });
    const threadId = await thread(world);
    world.sim.push({ text: "one" }, { text: "two" });
    const first = await world.rt.waitForRun((await world.rt.sendMessage({ threadId, text: "keep ALPHA" })).runId);
    await world.rt.waitForRun((await world.rt.sendMessage({ threadId, text: "drop BRAVO" })).runId);
    await untilWrittenDown(world, threadId, "drop BRAVO", { answered: true });
    const [idle] = claudeProcesses(world);
    process.kill(idle!, "SIGKILL");
    await until("Claude gone", () => !claudeProcesses(world!).includes(idle!));
    expect((await world.rt.rollback({ threadId, toRunId: first.runId })).provider).toBe("rolled_back");
    world.sim.push((req) => ({
      text: `${JSON.stringify(req.body).includes("ALPHA")}/${JSON.stringify(req.body).includes("BRAVO")}`,
    }));
    const run = await world.rt.waitForRun((await world.rt.sendMessage({ threadId, text: "what is left?" })).runId);
    expect(run.items.at(-1)?.text).toBe("true/false");
  });

  it(
    "gives a prompt sent as Claude died to a new Claude process, " +
      "so the turn completes and a later rollback counts it",
    async () => {
      world = await claudeWorld({ checkpoints: true });
      const threadId = await thread(world);
      world.sim.push({ text: "one" }, { text: "two" }, { text: "three" }, { text: "four" });
      await world.rt.waitForRun((await world.rt.sendMessage({ threadId, text: "keep ALPHA" })).runId);
      const second = await world.rt.waitForRun((await world.rt.sendMessage({ threadId, text: "keep BRAVO" })).runId);
      await untilWrittenDown(world, threadId, "keep BRAVO", { answered: true });
      for (const pid of claudeProcesses(world)) process.kill(pid, "SIGKILL");
      const third = await world.rt.waitForRun((await world.rt.sendMessage({ threadId, text: "drop CHARLIE" })).runId);
      expect(third.status).toBe("completed");
      await world.rt.waitForRun((await world.rt.sendMessage({ threadId, text: "drop DELTA" })).runId);
      expect((await world.rt.rollback({ threadId, toRunId: second.runId })).provider).toBe("rolled_back");
      const seen = (req: { body: unknown }, word: string) => JSON.stringify(req.body).includes(word);
      world.sim.push((req) => ({ text: ["ALPHA", "BRAVO", "CHARLIE", "DELTA"].map((w) => seen(req, w)).join("/") }));
      const run = await world.rt.waitForRun((await world.rt.sendMessage({ threadId, text: "what is left?" })).runId);
      expect(run.items.at(-1)?.text).toBe("true/true/false/false");
    },
  );
});

describe("claude: sessions", () => {
  it("resumes the session in a new host process with its history", async () => {
    world = await claudeWorld();
    await conformance.resumesInNewHost(asProvider(world));
  });

  it("takes a handoff from another provider as user context, then a delta when it comes back", async () => {
    world = await claudeWorld({
      providers: { other: createScriptedAdapter({ script: () => [{ type: "text", text: "other says PAPAYA" }] }) },
    });
    await conformance.takesHandoff(asProvider(world));
  });

  it("forks by forking the session: the fork has the history, the parent does not see the fork", async () => {
    world = await claudeWorld();
    await conformance.forksNatively(asProvider(world));
  });

  it("forks after a restart: the fork's tools run in the thread's cwd, not the embedding process's", async () => {
    world = await claudeWorld();
    await conformance.forkAfterReopenRunsInThreadCwd(asProvider(world), bash);
  });

  it(
    "rolls back by resuming at an earlier message (the rollback_by_resume degradation): " +
      "the later turn is gone from the conversation",
    async () => {
      world = await claudeWorld({ checkpoints: true });
      await conformance.rollsBackWithFiles(asProvider(world), ["rollback_by_resume"]);
    },
  );

  it("rolls back turns from before a host restart, reading them from Claude's transcript", async () => {
    world = await claudeWorld({ checkpoints: true });
    const threadId = await thread(world);
    world.sim.push({ text: "one" }, { text: "two" });
    const first = await world.rt.waitForRun((await world.rt.sendMessage({ threadId, text: "keep ALPHA" })).runId);
    await world.rt.waitForRun((await world.rt.sendMessage({ threadId, text: "drop BRAVO" })).runId);
    await untilWrittenDown(world, threadId, "drop BRAVO", { answered: true });
    await world.reopen();
    const receipt = await world.rt.rollback({ threadId, toRunId: first.runId });
    expect(receipt.provider).toBe("rolled_back");
    world.sim.push((req) => ({
      text: `${JSON.stringify(req.body).includes("ALPHA")}/${JSON.stringify(req.body).includes("BRAVO")}`,
    }));
    const run = await world.rt.waitForRun((await world.rt.sendMessage({ threadId, text: "what is left?" })).runId);
    expect(run.items.at(-1)?.text).toBe("true/false");
    expect(world.rt.views.runs.get(first.runId)!.fallbacks.map((f) => f.policy)).toEqual(["rollback_by_resume"]);
  });

  it("rolls back twice in a row, and the cut holds across a restart before the next turn", async () => {
    world = await claudeWorld({ checkpoints: true });
    const threadId = await thread(world);
    world.sim.push({ text: "one" }, { text: "two" }, { text: "three" });
    const first = await world.rt.waitForRun((await world.rt.sendMessage({ threadId, text: "keep ALPHA" })).runId);
    const second = await world.rt.waitForRun((await world.rt.sendMessage({ threadId, text: "drop BRAVO" })).runId);
    await world.rt.waitForRun((await world.rt.sendMessage({ threadId, text: "drop CHARLIE" })).runId);
    expect((await world.rt.rollback({ threadId, toRunId: second.runId })).provider).toBe("rolled_back");
    expect((await world.rt.rollback({ threadId, toRunId: first.runId })).provider).toBe("rolled_back");
    await world.reopen();
    const seen = (req: { body: unknown }, word: string) => JSON.stringify(req.body).includes(word);
    world.sim.push((req) => ({ text: `${seen(req, "ALPHA")}/${seen(req, "BRAVO")}/${seen(req, "CHARLIE")}` }));
    const run = await world.rt.waitForRun((await world.rt.sendMessage({ threadId, text: "what is left?" })).runId);
    expect(run.items.at(-1)?.text).toBe("true/false/false");
    expect((await world.rt.readThread(threadId)).runs.map((r) => r.status)).toEqual([
      "completed",
      "rolled_back",
      "rolled_back",
      "completed",
    ]);
  });

  it("rolls back a run steered by interrupt-restart: both of its attempts are dropped", async () => {
    world = await claudeWorld({ checkpoints: true });
    const threadId = await thread(world);
    world.sim.push({ text: "one" }, { hang: true, text: "working" }, { text: "steered" });
    const first = await world.rt.waitForRun((await world.rt.sendMessage({ threadId, text: "keep ALPHA" })).runId);
    const { runId } = await world.rt.sendMessage({ threadId, text: "start BRAVO" });
    await until("streaming", () => world!.rt.views.runs.get(runId)!.items.some((i) => i.kind === "assistant_message"));
    await world.rt.sendMessage({ threadId, text: "steer CHARLIE", mode: "steer" });
    expect((await world.rt.waitForRun(runId)).attempts).toHaveLength(2);
    expect((await world.rt.rollback({ threadId, toRunId: first.runId })).provider).toBe("rolled_back");
    const seen = (req: { body: unknown }, word: string) => JSON.stringify(req.body).includes(word);
    world.sim.push((req) => ({ text: `${seen(req, "ALPHA")}/${seen(req, "BRAVO")}/${seen(req, "CHARLIE")}` }));
    const run = await world.rt.waitForRun((await world.rt.sendMessage({ threadId, text: "what is left?" })).runId);
    expect(run.items.at(-1)?.text).toBe("true/false/false");
  });

  it(
    "SIGKILL of the host mid-turn fails the run and expires its permission; " + "the next run resumes on a new host",
    async () => {
      world = await claudeWorld(asking);
      await conformance.survivesHostSigkill(asProvider(world), bash("echo never > never.txt"));
    },
  );
});
