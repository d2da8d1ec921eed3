import { existsSync } from "node:fs";
import { join } from "node:path";
import { afterEach, describe, expect, it } from "vitest";
import type { RuntimeMode } from "../../src/domain/entities.js";
import type { DomainEvent } from "../../src/domain/events.js";
import type { LogRecord } from "../../src/index.js";
import { isTerminalRunStatus } from "../../src/runtime/projectionRuns.js";
import { sawInNextRequest } from "../codex/harness.js";
import { claudeWorld, until, type ClaudeWorld } from "./harness.js";

/**
 * The runtime mode on the real Claude Code binary (offline, against the model simulator). Claude switches its
 * permission mode in a live session, so a thread's turns each run in their own mode, in one session: plan mode writes
 * nothing, and under `approvals: "never"` whatever would ask is refused unasked while what the sandbox allows goes
 * ahead.
 */

let world: ClaudeWorld | null = null;
afterEach(async () => {
  await world?.cleanup();
  world = null;
});

const write = (path: string) => ({ tools: [{ name: "Write", args: { file_path: path, content: "written" } }] });
const bash = (command: string) => ({
  tools: [{ name: "Bash", args: { command, description: "needed for the test" } }],
});
const plan: Partial<RuntimeMode> = { interaction: "plan" };
const never: Partial<RuntimeMode> = { approvals: "never" };
/** Claude's own plan-mode reminder, in what it sends the model. */
const PLAN_REMINDER = "Plan mode is active";
/** A write that also says whether Claude's request to the model carried its plan-mode reminder. */
const notingMode = (path: string) => (req: { body: unknown }) => ({
  ...write(path),
  text: JSON.stringify(req.body).includes(PLAN_REMINDER) ? "in plan mode" : "not in plan mode",
});

/** A world whose domain events are kept, for the sessions and policies a test expects. */
async function recordedWorld(...args: Parameters<typeof claudeWorld>) {
  const w = await claudeWorld(...args);
  const records: LogRecord<DomainEvent>[] = [];
  w.rt.subscribe({ afterSeq: 0 }, (r) => records.push(r));
  const events = (type: DomainEvent["type"]) => records.map((r) => r.event).filter((e) => e.type === type);
  return { w, events };
}

async function thread(w: ClaudeWorld): Promise<string> {
  return (await w.rt.createThread({ providerTarget: "claude", cwd: w.workspace })).threadId;
}

/** Waits for the run to end or for a request of the thread to open, whichever comes first: the request, if any. */
async function requestOrEnd(w: ClaudeWorld, threadId: string, runId: string) {
  await until(
    "a request or the run's end",
    () => w.rt.views.pendingRequests(threadId).length > 0 || isTerminalRunStatus(w.rt.views.runs.get(runId)!.status),
  );
  return w.rt.views.pendingRequests(threadId)[0] ?? null;
}

/** Sends a turn that must neither ask nor fail: its last message. */
async function unaskedTurn(w: ClaudeWorld, threadId: string, text: string, runtimeMode?: Partial<RuntimeMode>) {
  const { runId } = await w.rt.sendMessage({ threadId, text, ...(runtimeMode ? { runtimeMode } : {}) });
  expect(await requestOrEnd(w, threadId, runId)).toBeNull();
  const run = await w.rt.waitForRun(runId);
  expect(run.status).toBe("completed");
  return run.items.at(-1)?.text;
}

describe("claude: the runtime mode, switched per turn in one session", () => {
  it("a thread switched to plan mode writes nothing where default mode writes; back in default it does", async () => {
    const { w, events } = await recordedWorld();
    world = w;
    const threadId = await thread(w);
    const first = join(w.workspace, "first.txt");
    const planned = join(w.workspace, "planned.txt");
    const again = join(w.workspace, "again.txt");

    w.sim.push(notingMode(first), { text: "written" });
    expect(await unaskedTurn(w, threadId, "write it")).toBe("written");
    expect(existsSync(first)).toBe(true);

    // The same write, and a file-system command, which the workspace-write sandbox lets through in default mode.
    w.sim.push(notingMode(planned), bash("mkdir made"), sawInNextRequest("Not allowed in plan mode"));
    const { runId } = await w.rt.sendMessage({ threadId, text: "plan it", runtimeMode: plan });
    expect(await requestOrEnd(w, threadId, runId)).toBeNull();
    const run = await w.rt.waitForRun(runId);
    expect(run.status).toBe("completed");
    const said = (r: typeof run) => r.items.filter((i) => i.kind === "assistant_message").map((i) => i.text);
    expect(said(run)).toEqual(["in plan mode", "saw Not allowed in plan mode"]);
    expect([existsSync(planned), existsSync(join(w.workspace, "made"))]).toEqual([false, false]);

    w.sim.push(write(again), { text: "done" });
    expect(await unaskedTurn(w, threadId, "write it now", { interaction: "default" })).toBe("done");
    expect(existsSync(again)).toBe(true);
    const runs = w.rt.views.threads.get(threadId)!.runs;
    expect(said(w.rt.views.runs.get(runs[0]!.runId)!)[0]).toBe("not in plan mode");

    // One session, one Claude session for the three modes: no `mode_switch_new_session`.
    expect(events("session.started")).toHaveLength(1);
    expect(events("policy.applied")).not.toContainEqual(expect.objectContaining({ policy: "mode_switch_new_session" }));
    const attempts = w.rt.views.threads.get(threadId)!.runs.flatMap((r) => r.attempts);
    expect(new Set(attempts.map((a) => a.providerThreadId)).size).toBe(1);
    expect(w.rt.views.runs.get(runId)!.runtimeMode).toEqual({ interaction: "plan", approvals: "on_request" });
  });

  it("a turn after Claude entered plan mode on its own runs in its own mode again: the write goes ahead", async () => {
    const { w } = await recordedWorld();
    world = w;
    const threadId = await thread(w);
    w.sim.push({ tools: [{ name: "EnterPlanMode", args: {} }] }, { text: "planning" });
    expect(await unaskedTurn(w, threadId, "think first")).toBe("planning");

    const file = join(w.workspace, "w.txt");
    w.sim.push(write(file), { text: "done" });
    expect(await unaskedTurn(w, threadId, "now write it")).toBe("done");
    expect(existsSync(file)).toBe(true);
  });

  it("in plan mode Claude's plan is a proposed plan kept for a later turn: no request to leave plan mode", async () => {
    const { w } = await recordedWorld();
    world = w;
    const threadId = await thread(w);
    const text = "# Plan\n1. do A\n";
    // In plan mode Claude names the file the plan goes to (in its config directory); ExitPlanMode then carries it.
    const writePlan = (req: { body: unknown }) => {
      const path = /create your plan at (\S+?\.md)/.exec(JSON.stringify(req.body))?.[1] ?? "missing-plan-path.md";
      return { tools: [{ name: "Write", args: { file_path: path, content: text } }] };
    };
    w.sim.push(
      writePlan,
      { tools: [{ name: "ExitPlanMode", args: {} }] },
      sawInNextRequest("stays in plan mode for now"),
    );
    const { runId } = await w.rt.sendMessage({ threadId, text: "plan first", runtimeMode: plan });
    expect(await requestOrEnd(w, threadId, runId)).toBeNull();
    const run = await w.rt.waitForRun(runId);
    expect(run.items.find((i) => i.kind === "proposed_plan")?.text).toBe(text);
    expect(run.items.at(-1)?.text).toBe("saw stays in plan mode for now");
  });

  it(
    "approvals never: what would ask is refused without a request, what the sandbox allows goes ahead; " +
      "on_request asks again",
    async () => {
      const { w, events } = await recordedWorld();
      world = w;
      const threadId = await thread(w);
      const inside = join(w.workspace, "inside.txt");
      const outside = join(w.root, "outside.txt");
      // Under workspace-write a write in the cwd and `mkdir` go ahead; a write outside it and `git` ask.
      w.sim.push(
        write(inside),
        write(outside),
        bash("mkdir made"),
        bash("git init -q repo"),
        sawInNextRequest("the user is not being asked"),
      );
      expect(await unaskedTurn(w, threadId, "write things", never)).toBe("saw the user is not being asked");
      expect([inside, outside, join(w.workspace, "made"), join(w.workspace, "repo")].map((p) => existsSync(p))).toEqual(
        [true, false, true, false],
      );
      expect(events("request.opened")).toEqual([]);
      // The refused write is a failed file change whose output says why.
      const items = w.rt.views.threads.get(threadId)!.runs[0]!.items;
      expect(items.find((i) => i.kind === "file_change" && i.detail?.path === outside)).toMatchObject({
        detail: { status: "failed" },
        output: expect.stringContaining("the user is not being asked"),
      });

      w.sim.push(write(outside), { text: "declined" });
      const { runId } = await w.rt.sendMessage({
        threadId,
        text: "write outside",
        runtimeMode: { approvals: "on_request" },
      });
      const request = await requestOrEnd(w, threadId, runId);
      expect(request?.payload).toMatchObject({ kind: "file_change", path: outside });
      await w.rt.respond({ requestId: request!.requestId, response: { kind: "decision", decision: "decline" } });
      expect((await w.rt.waitForRun(runId)).status).toBe("completed");
      expect(existsSync(outside)).toBe(false);
      expect(events("session.started")).toHaveLength(1);
    },
  );

  it("full-access: a thread started in plan mode writes nothing, then bypasses permissions by default", async () => {
    // As root, Claude bypasses permissions only when told it runs in a deliberate sandbox (IS_SANDBOX=1, GAP.md).
    const { w, events } = await recordedWorld({ sandbox: "full-access" }, { env: { IS_SANDBOX: "1" } });
    world = w;
    const threadId = await thread(w);
    const outside = join(w.root, "outside.txt");
    w.sim.push(write(outside), { text: "planned" });
    expect(await unaskedTurn(w, threadId, "plan it", plan)).toBe("planned");
    expect(existsSync(outside)).toBe(false);

    w.sim.push(write(outside), { text: "done" });
    expect(await unaskedTurn(w, threadId, "do it", { interaction: "default" })).toBe("done");
    expect(existsSync(outside)).toBe(true);
    expect(events("session.started")).toHaveLength(1);
  });

  it("approvals never under read-only: a write is refused unasked, a read-only command runs", async () => {
    const { w, events } = await recordedWorld({ sandbox: "read-only" });
    world = w;
    const threadId = await thread(w);
    const file = join(w.workspace, "w.txt");
    w.sim.push(write(file), bash("echo READ-$((6*7))"), sawInNextRequest("READ-42"));
    expect(await unaskedTurn(w, threadId, "write and look", never)).toBe("saw READ-42");
    expect(existsSync(file)).toBe(false);
    expect(events("request.opened")).toEqual([]);
  });
});
