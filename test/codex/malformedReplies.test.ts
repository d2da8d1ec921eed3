import { mkdir, mkdtemp, readFile, rm, writeFile } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterEach, describe, expect, it } from "vitest";
import { createCodexAdapter } from "../../src/adapters/codex/adapter.js";
import { sequentialIds, type RunView } from "../../src/index.js";
import type { Runtime } from "../../src/runtime/runtime.js";
import { fixturesDir } from "../replay/record.js";
import { openRuntime } from "../support/internals.js";
import { ofType } from "../support/runtime.js";
import type { LogRecord } from "../../src/runtime/store/eventLog.js";
import type { DomainEvent } from "../../src/domain/events.js";

/**
 * Every reply of `codex app-server` the adapter reads is checked at the adapter's boundary. The app-server here is the
 * replay host (test/replay/codex-replay, a real process speaking JSON-RPC on stdio) playing a recorded transcript
 * (text-turn.jsonl) with one frame made malformed: a turn's end of the wrong shape fails its run at once as
 * `protocol_error` (no wait for the turn watchdog), and a reply of the wrong shape is a `protocol_error` naming the
 * call, never a raw TypeError in a failure message.
 */

type Line = { d: "in" | "out"; f: Record<string, any> };

const recorded = async (): Promise<Line[]> =>
  (await readFile(join(fixturesDir("codex"), "text-turn.jsonl"), "utf8"))
    .split("\n")
    .filter((l) => l.trim() !== "")
    .map((l) => JSON.parse(l) as Line);

/** The first recorded frame that is `method`'s (a call, a notification, or the reply to a call). */
function find(lines: Line[], method: string, d: "in" | "out" = "in"): number {
  const i = lines.findIndex((l) => l.d === d && l.f.method === method);
  expect(i, `${method} in the transcript`).toBeGreaterThanOrEqual(0);
  return i;
}
function replyTo(lines: Line[], call: number): number {
  return lines.findIndex(
    (l, i) => i > call && l.d === "in" && l.f.method === undefined && l.f.id === lines[call]!.f.id,
  );
}
/** The closing `thread/unsubscribe` call and its reply, as recorded. */
const goodbye = (lines: Line[]) => lines.slice(find(lines, "thread/unsubscribe", "out"));

let cleanups: Array<() => Promise<void>> = [];
afterEach(async () => {
  for (const cleanup of cleanups.reverse()) await cleanup();
  cleanups = [];
});

/** A runtime whose Codex app-server replays `lines`; the replay host's report says whether the client kept to them. */
async function replaying(
  lines: Line[],
): Promise<{ rt: Runtime; events: LogRecord<DomainEvent>[]; report: () => Promise<{ error?: string }> }> {
  const root = await mkdtemp(join(tmpdir(), "tiller-codex-malformed-"));
  const fixture = join(root, "fixture.jsonl");
  await writeFile(fixture, lines.map((l) => JSON.stringify(l)).join("\n") + "\n");
  for (const dir of ["workspace", "home", "codex-home"]) await mkdir(join(root, dir));
  const adapter = createCodexAdapter({
    binary: join(import.meta.dirname, "../replay/codex-replay"),
    codexHome: join(root, "codex-home"),
    home: join(root, "home"),
    env: { CODEX_REPLAY_FIXTURE: fixture, CODEX_REPLAY_ROOT: root },
  });
  const rt = await openRuntime({ dataDir: join(root, "data"), providers: { codex: adapter }, ids: sequentialIds() });
  const events: LogRecord<DomainEvent>[] = [];
  rt.subscribe({ afterSeq: 0 }, (r) => events.push(r));
  cleanups.push(async () => {
    await rt.close();
    await rm(root, { recursive: true, force: true });
  });
  const report = async () =>
    JSON.parse(await readFile(join(root, "codex-replay.report.json"), "utf8")) as { error?: string };
  return { rt, events, report };
}

/** The transcript's first turn (with `approvalPolicy` set by the adapter, as recorded). */
async function firstTurn(rt: Runtime, workspace?: string) {
  const { threadId } = await rt.createThread({ providerTarget: "codex", ...(workspace ? { cwd: workspace } : {}) });
  const { runId } = await rt.sendMessage({
    threadId,
    text: "say hi",
    runtimeMode: { interaction: "default", approvals: "never" },
  });
  return { threadId, run: await rt.waitForRun(runId) };
}

/** The run failed as a protocol error naming the Codex call whose reply was of the wrong shape, not a TypeError. */
function failedOnReply(run: RunView, call: string): void {
  expect(run.status).toBe("failed");
  expect(run.failure?.failureClass).toBe("protocol_error");
  expect(run.failure?.message).toContain(`codex ${call} answered a reply that does not match`);
  expect(run.failure?.message).not.toMatch(/Cannot read|TypeError/);
}

describe("codex replies checked at the adapter boundary", () => {
  it("a turn/completed of the wrong shape fails its run at once as protocol_error", async () => {
    const lines = await recorded();
    const end = find(lines, "turn/completed");
    lines[end]!.f.params.turn.status = 42; // not one of the schema's statuses
    const { rt, report } = await replaying([...lines.slice(0, end + 1), ...goodbye(lines)]);
    // Without the turn watchdog's 15 minutes: waitForRun resolves only because the malformed end ended the turn.
    const { run } = await firstTurn(rt);
    expect(run.status).toBe("failed");
    expect(run.failure?.failureClass).toBe("protocol_error");
    expect(run.failure?.message).toMatch(/^codex notification turn\/completed does not match its schema/);
    expect(run.items.map((i) => [i.kind, i.text])).toContainEqual(["assistant_message", "Hello from the simulator!"]);
    await rt.close();
    expect((await report()).error).toBeUndefined();
  });

  it("a turn/completed whose turn cannot be read still ends the running turn of the thread it names", async () => {
    const lines = await recorded();
    const end = find(lines, "turn/completed");
    lines[end]!.f.params = { threadId: lines[end]!.f.params.threadId, turn: "done" };
    const { rt } = await replaying([...lines.slice(0, end + 1), ...goodbye(lines)]);
    const { run } = await firstTurn(rt);
    expect([run.status, run.failure?.failureClass]).toEqual(["failed", "protocol_error"]);
  });

  it("a thread/start reply of the wrong shape fails the run as protocol_error, not a TypeError", async () => {
    const lines = await recorded();
    const start = find(lines, "thread/start", "out");
    lines[replyTo(lines, start)]!.f.result = { thread: null, model: "gpt-5.5" };
    const { rt, report } = await replaying([...lines.slice(0, replyTo(lines, start) + 1), ...goodbye(lines)]);
    const { run } = await firstTurn(rt);
    failedOnReply(run, "thread/start");
    await rt.close();
    expect((await report()).error).toBeUndefined();
  });

  it("a config/read reply of the wrong shape fails the run as protocol_error, not a TypeError", async () => {
    const lines = await recorded();
    const turnStart = find(lines, "turn/start", "out");
    // The session asks before acting and the adapter has no approval policy of its own: it reads Codex's config.
    const configRead: Line[] = [
      { d: "out", f: { id: 90, method: "config/read", params: {} } },
      { d: "in", f: { id: 90, result: { config: null, origins: {} } } },
    ];
    const { rt, report } = await replaying([...lines.slice(0, turnStart), ...configRead, ...goodbye(lines)]);
    const { threadId } = await rt.createThread({ providerTarget: "codex" });
    const run = await rt.waitForRun((await rt.sendMessage({ threadId, text: "say hi" })).runId);
    failedOnReply(run, "config/read");
    await rt.close();
    expect((await report()).error).toBeUndefined();
  });

  it("a thread/read reply of the wrong shape is a protocol error in the rollback record, not a TypeError", async () => {
    const lines = await recorded();
    const unsubscribe = find(lines, "thread/unsubscribe", "out");
    const threadRead: Line[] = [
      { d: "out", f: { id: 91, method: "thread/read", params: {} } },
      { d: "in", f: { id: 91, result: { thread: { id: "t", turns: [{ id: 7, items: [], status: "completed" }] } } } },
    ];
    const { rt, events, report } = await replaying([
      ...lines.slice(0, unsubscribe),
      ...threadRead,
      ...lines.slice(unsubscribe),
    ]);
    const { threadId, run } = await firstTurn(rt);
    expect(run.status).toBe("completed");
    const second = await rt.sendMessage({ threadId, text: "again", runtimeMode: run.runtimeMode });
    expect((await rt.waitForRun(second.runId)).status).toBe("completed");
    const receipt = await rt.rollback({ threadId, toRunId: run.runId });
    expect(receipt.provider).toBe("divergent");
    const [divergent] = ofType(events, "policy.applied").filter((p) => p.policy === "rollback_divergent");
    expect(divergent?.detail).toMatch(/codex thread\/read answered a reply that does not match its schema/);
    expect(divergent?.detail).not.toMatch(/Cannot read|TypeError/);
    await rt.close();
    expect((await report()).error).toBeUndefined();
  });
});
