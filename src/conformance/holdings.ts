import type { ProviderCapabilities, ProviderThreadSnapshot, RollbackResult } from "../index.js";
import { claims, declared, finding, textOfRun, type Check, type Finding } from "./findings.js";
import type { Harness } from "./harness.js";

/**
 * What the provider holds, checked against what it was sent: queued messages taken up one at a time, at the turn
 * boundary, in the order sent, none lost; a thread's snapshot and a rollback's snapshot as the provider's own turns
 * show its conversation; a request still answerable after a runtime restart only where the record says requests
 * survive one.
 */

const QUEUE = "turns.supportsQueuedMessages";
const SNAPSHOT = ["threads.canReadThreadSnapshot", "checkpointing.providerCanReadConversationSnapshot"];
const ROLLBACK_SNAPSHOT = "checkpointing.providerRollbackReturnsSnapshot";
const SURVIVE = "sessions.pendingRequestsSurviveRestart";
const LIVE_ONLY = "approvals.approvalCallbacksAreLiveOnly";

const seqOf = (h: Harness, runId: string) =>
  h.records.find((r) => r.event.type === "run.terminal" && r.event.runId === runId)?.seq;

/** The held run and the two queued behind it: all completed, ended in the order sent, each taken up alone. */
const queueDrained: Check = (h) => {
  const runs = h.runIds;
  const texts = runs.map((runId) => h.userTexts.get(runId) ?? "");
  const statuses = runs.map((runId) => h.terminal(runId)?.status ?? "(not ended)");
  const ends = runs.map((runId) => seqOf(h, runId) ?? Infinity);
  const problems: string[] = [];
  if (statuses.some((s) => s !== "completed")) problems.push(`the runs ended ${statuses.join(", ")}`);
  if (ends.some((seq, i) => i > 0 && seq < ends[i - 1]!)) problems.push("the runs ended out of the order sent");
  const turns = h.world.turns?.();
  if (turns) {
    const taken = texts.map((text) => turns.filter((t) => t.text === text));
    const order = texts.map((text) => turns.findIndex((t) => t.text === text));
    const lost = texts.filter((_, i) => taken[i]!.length === 0);
    const twice = texts.filter((_, i) => taken[i]!.length > 1);
    if (lost.length > 0) problems.push(`the provider never took up ${JSON.stringify(lost)}`);
    if (twice.length > 0) problems.push(`the provider took up ${JSON.stringify(twice)} more than once`);
    if (lost.length === 0 && order.some((at, i) => i > 0 && at < order[i - 1]!))
      problems.push(`the provider took them up as ${JSON.stringify(turns.map((t) => t.text))}`);
    const beside = taken.flat().filter((t) => (t.concurrent ?? []).length > 0);
    for (const t of beside) problems.push(`the provider took up ${t.text} beside ${JSON.stringify(t.concurrent)}`);
  } else if (h.world.lastTurn()?.text !== texts.at(-1)) {
    problems.push(`the provider's last turn was ${h.world.lastTurn()?.text}`);
  }
  const ok = problems.length === 0;
  return [finding(QUEUE, ok, "each queued message taken up alone at the boundary, in order, completed", problems[0]!)];
};

/** The user texts of a snapshot's turns, each held to the text sent for the run at the same place. */
function matches(snapshot: ProviderThreadSnapshot | undefined, texts: string[]): string | null {
  if (!snapshot || !Array.isArray(snapshot.turns)) return "no snapshot";
  const held = snapshot.turns.map((t) => t.userText);
  if (held.length !== texts.length || texts.some((text, i) => !String(held[i]).includes(text)))
    return `the snapshot holds ${JSON.stringify(held)} where the provider's conversation is ${JSON.stringify(texts)}`;
  return null;
}

/** The thread's snapshot, read from the adapter, against the runs sent and the refs they were bound to. */
const snapshotRead: Check = (h, caps) => {
  const read = h.snapshot;
  if (!read || "failed" in read) {
    const why = read ? `the read failed: ${read.failed}` : "no snapshot was read";
    return SNAPSHOT.filter((f) => claims(declared(caps, f))).map((f) => finding(f, false, "", why));
  }
  const snapshot = read.value as ProviderThreadSnapshot;
  const texts = h.runIds.map((runId) => h.userTexts.get(runId) ?? "");
  const wrong = matches(snapshot, texts);
  const out: Finding[] = SNAPSHOT.filter((f) => claims(declared(caps, f))).map((f) =>
    finding(f, wrong === null, `the snapshot holds the ${texts.length} turns sent`, wrong ?? ""),
  );
  if (wrong) return out;
  // The same ids the turns were bound to (stable across a read).
  const bound = h.runIds.map((runId) => h.events("attempt.turn_bound", (e) => e.runId === runId).at(-1)?.nativeTurnRef);
  const refs = snapshot.turns.map((t) => t.turnRef);
  const drifted = bound.findIndex((ref, i) => ref && refs[i] !== ref);
  if (caps.identity.nativeTurnIds === "strong" && drifted >= 0)
    out.push(
      finding(
        "identity.nativeTurnIds",
        false,
        "",
        `turn ${drifted} was bound as ${bound[drifted]}, read back as ${refs[drifted]}`,
      ),
    );
  const thread = h.events("provider_thread.bound", (e) => e.threadId === h.threadId).at(-1)?.nativeThreadRef;
  if (caps.identity.nativeThreadIds === "strong" && thread && snapshot.threadRef !== thread)
    out.push(
      finding(
        "identity.nativeThreadIds",
        false,
        "",
        `the thread bound as ${thread} read back as ${snapshot.threadRef}`,
      ),
    );
  return out;
};

/**
 * Whose fault a rollback the runtime did not take as done is, where it is not the rollback's (null): the snapshot it
 * returned (none, where the record promises one; or another than the thread read back holds, where that one is the
 * cut asked for), or the thread's read (the rollback's snapshot is the cut asked for, the read is not).
 */
export function snapshotAtFault(h: Harness, caps: ProviderCapabilities): { fields: string[]; why: string } | null {
  if (!caps.checkpointing.providerRollbackReturnsSnapshot) return null;
  const result = h.callsOf("rollbackThread").at(-1)?.result as RollbackResult | undefined;
  if (!result?.snapshot) return { fields: [ROLLBACK_SNAPSHOT], why: "the rollback returned no snapshot" };
  const cut = [textOfRun(h, 0)];
  const readBack = h.snapshot && "value" in h.snapshot ? (h.snapshot.value as ProviderThreadSnapshot) : null;
  const returnedWrong = matches(result.snapshot, cut);
  const readWrong = readBack ? matches(readBack, cut) : "not read";
  if (returnedWrong && !readWrong)
    return {
      fields: [ROLLBACK_SNAPSHOT],
      why: `the rollback's snapshot is not the thread read back: ${returnedWrong}`,
    };
  if (!returnedWrong && readBack && readWrong)
    return {
      fields: SNAPSHOT.filter((f) => claims(declared(caps, f))),
      why: `read back after the rollback, ${readWrong}`,
    };
  return null;
}

/** The snapshot a rollback returned, against what the provider then holds (its next turn's conversation). */
const rollbackSnapshot: Check = (h, caps) => {
  if (!caps.checkpointing.providerRollbackReturnsSnapshot) return [];
  // A thread the runtime did not take as rolled back was rebuilt: its next turn tells nothing of the rollback.
  if (h.rollbackReceipt?.provider !== "rolled_back") return [];
  const result = h.callsOf("rollbackThread").at(-1)?.result as RollbackResult | undefined;
  const held = h.world.lastTurn()?.priorUserTexts ?? [textOfRun(h, 0)];
  const wrong = result?.snapshot ? matches(result.snapshot, held) : "the rollback returned no snapshot";
  return [finding(ROLLBACK_SNAPSHOT, wrong === null, "the returned snapshot is what the provider holds", wrong ?? "")];
};

const askedRun = (h: Harness) => {
  const request = h.events("request.opened", (e) => e.runId === h.runId).at(-1);
  const closed = request && h.events("request.closed", (e) => e.requestId === request.requestId).at(-1);
  const ended = h.terminal(h.runId);
  const seen =
    `after the restart the request was ${closed ? `closed ${closed.status}` : "still open"}, ` +
    `the run ${ended?.status ?? "still running"}`;
  return { request, closed, ended, seen };
};

const holdingsChecks: Record<string, Check> = {
  queueDrained,
  snapshotRead,
  requestLost: (h, caps) => {
    const { request, closed, ended, seen } = askedRun(h);
    if (!request) return []; // never asked: the step before says so
    const lost = !!closed && !!ended;
    // Callbacks that are not live-only are still answerable once the runtime is back.
    const live = caps.approvals.approvalCallbacksAreLiveOnly;
    return [finding(SURVIVE, lost, seen, seen), finding(LIVE_ONLY, live ? lost : !lost, seen, seen)];
  },
  requestSurvived: (h) => {
    const { request, closed, ended, seen } = askedRun(h);
    if (!request) return [];
    const open = !closed && !ended;
    return [finding(SURVIVE, open, seen, seen)];
  },
  survivedAnswered: (h) => {
    const status = h.terminal(h.runId)?.status ?? "(not ended)";
    return [
      finding(SURVIVE, status === "completed", "answered after the restart, the run completed", `the run ${status}`),
    ];
  },
};

export { holdingsChecks, rollbackSnapshot };
