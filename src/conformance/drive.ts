import type { Harness } from "./harness.js";
import type { ApprovalKind } from "./world.js";
import { APPROVAL_KINDS, ARTIFACTS, type ArtifactKind } from "./model.js";
import { sessionDrives } from "./sessions.js";
import { toolDrives } from "./tools.js";
import { subagentDrives } from "./subagents.js";
import { switchingDrives } from "./switching.js";

/**
 * What each model event does through the runtime's public API (and, for the provider's side of a turn, the world).
 * A drive waits, on events, until what the step started has visibly happened (a run ended, a request opened, a steer
 * was recorded); a typed refusal is kept for the state's check, never thrown.
 */

export type Drive = (h: Harness) => Promise<void>;

const reply = (h: Harness) => h.nextText("reply");

/** Sends a text turn and waits for its end; a refusal is kept for the check (the runner fails an unexpected one). */
async function sendText(h: Harness, threadId = h.threadId): Promise<void> {
  const runId = await h.send({ kind: "text", text: reply(h) }, { threadId });
  if (runId) await h.untilTerminal(runId);
}

/** Waits for the run to end, or to wait on one of its requests. */
async function untilAskedOrEnded(h: Harness, runId: string): Promise<void> {
  await h.until(
    `run ${runId} to ask or end`,
    () => h.events("request.opened", (e) => e.runId === runId).length > 0 || h.terminal(runId) !== undefined,
  );
}

async function respondToOpen(h: Harness, response: Parameters<Harness["rt"]["respond"]>[0]["response"]) {
  const runId = h.runId;
  const opened = h.events("request.opened", (e) => e.runId === runId).at(-1);
  if (!opened) throw new Error(`run ${runId} has no request to answer`);
  await h.rt.respond({ requestId: opened.requestId, response });
  await h.untilTerminal(runId);
}

/**
 * Reads the snapshot of the thread the latest turn ran on from the adapter directly, in the session the runtime holds
 * (false: the adapter cannot read one).
 */
async function readSnapshot(h: Harness): Promise<boolean> {
  const sent = h.callsOf("sendRun").findLast((c) => c.settled === "resolved");
  const read = sent?.via.readThreadSnapshot;
  if (!sent || !read) return false;
  const input = sent.input as { sessionId: string; thread: { cwd: string } };
  const made = (sent.result as { thread?: object } | undefined)?.thread;
  const thread = made ? { ...made, cwd: input.thread.cwd } : input.thread;
  try {
    h.snapshot = { value: await read({ sessionId: input.sessionId, thread: thread as never }) };
  } catch (error) {
    h.snapshot = { failed: error instanceof Error ? error.message : String(error) };
  }
  return true;
}

async function fork(h: Harness, afterRunId?: string): Promise<void> {
  const receipt = await h.attempt(() =>
    h.rt.forkThread({ threadId: h.threadId, ...(afterRunId ? { afterRunId } : {}) }),
  );
  if (!receipt) throw new Error(`the fork was refused: ${h.lastError?.code}: ${h.lastError?.message}`);
  h.forkThreadId = receipt.threadId;
}

export const drives: Record<string, Drive> = {
  TEXT: (h) => sendText(h),
  HOLD: async (h) => {
    const gate = h.nextText("gate").replace(" ", "-");
    h.gates.push(gate);
    const runId = await h.send({ kind: "hold", text: reply(h), gate });
    if (!runId) throw new Error(`sending a held turn was refused: ${h.lastError?.code}`);
    await h.untilTurnTaken(runId);
  },
  STEER: async (h) => {
    const runId = h.runId;
    // What the replacement turn does, should the runtime restart the run with the steer.
    h.steerText = h.nextText("steer");
    h.world.next({ kind: "text", text: reply(h) }, { userText: h.steerText, steer: true });
    const receipt = await h.attempt(() => h.rt.sendMessage({ threadId: h.threadId, text: h.steerText, mode: "steer" }));
    if (!receipt) return;
    if (receipt.via === "native")
      await h.until("the steer to be applied", () => h.events("steer.applied", (e) => e.runId === runId).length > 0);
    else if (receipt.via === "interrupt_restart") await h.untilTerminal(runId);
  },
  INTERRUPT: async (h) => {
    const runId = h.runId;
    const receipt = await h.attempt(() => h.rt.interrupt({ runId }));
    if (receipt) await h.untilTerminal(runId);
  },
  QUEUE: async (h) => {
    // Two, so that their order shows.
    for (let i = 0; i < 2; i++) {
      const runId = await h.send({ kind: "text", text: reply(h) }, { mode: "queue" });
      if (!runId) throw new Error(`queueing a message was refused: ${h.lastError?.code}`);
      const created = () => h.events("run.created", (e) => e.runId === runId).length > 0;
      await h.until("the queued run to be recorded", created);
    }
  },
  RELEASE: async (h) => {
    for (const gate of h.gates) h.world.release(gate);
    for (const runId of h.runIds) await h.untilTerminal(runId);
  },
  FORK: (h) => fork(h),
  FORK_EARLIER: (h) => fork(h, h.runIds[0]),
  FORK_TEXT: async (h) => {
    await sendText(h, h.forkThreadId!);
    if (h.lastError) return;
    // Then the parent goes on: what the fork said is not the parent's.
    h.forkRunId = h.lastRunId;
    h.forkText = h.userTexts.get(h.lastRunId!) ?? null;
    await sendText(h);
  },
  SNAPSHOT: async (h) => {
    if (!(await readSnapshot(h))) throw new Error("the adapter has no readThreadSnapshot");
  },
  // The new runtime recovers the run as it opens: it still waits on its request, or it has ended.
  RESTART_PENDING: (h) => h.restart(),
  ROLLBACK: async (h) => {
    const toRunId = h.runIds[0]!;
    const receipt = await h.attempt(() => h.rt.rollback({ threadId: h.threadId, toRunId }));
    if (!receipt) return;
    h.rollbackReceipt = receipt;
    h.runIds.splice(1);
    // What the thread holds now, in the provider's words, where it can say: to hold the rollback's snapshot against.
    await readSnapshot(h);
  },
  RESTART: async (h) => {
    await h.restart();
    await sendText(h);
  },
  ACCEPT: (h) => respondToOpen(h, { kind: "decision", decision: "accept" }),
  ANSWER: (h) => respondToOpen(h, { kind: "answers", answers: { go: "yes" } }),
  ...subagentDrives,
  ...sessionDrives,
  ...toolDrives,
  ...switchingDrives,
};

/** Accepts the open request, lets the run end, and asks the same kind again (accepted too). */
drives["ASK_AGAIN"] = async (h) => {
  const kind = h.events("request.opened", (e) => e.runId === h.runId).at(-1)?.payload.kind;
  await respondToOpen(h, { kind: "decision", decision: "accept" });
  const runId = await h.send({ kind: "approval", approval: kind as ApprovalKind, text: reply(h) });
  if (!runId) throw new Error(`sending a second approval turn was refused: ${h.lastError?.code}`);
  await untilAskedOrEnded(h, runId);
  if (h.terminal(runId) === undefined) await respondToOpen(h, { kind: "decision", decision: "accept" });
};

for (const approval of APPROVAL_KINDS) {
  drives[`ASK_${approval}`] = async (h) => {
    const runId = await h.send({ kind: "approval", approval, text: reply(h) });
    if (!runId) throw new Error(`sending an approval turn was refused: ${h.lastError?.code}`);
    await untilAskedOrEnded(h, runId);
  };
}
for (const kind of Object.keys(ARTIFACTS) as ArtifactKind[]) {
  drives[`ARTIFACT_${kind}`] = async (h) => {
    const runId = await h.send({ kind, text: reply(h) });
    if (!runId) throw new Error(`sending a ${kind} turn was refused: ${h.lastError?.code}`);
    await untilAskedOrEnded(h, runId);
  };
}
