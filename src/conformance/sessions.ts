import type { ProviderCapabilities } from "../index.js";
import { claims, completed, finding, type Check, type Finding } from "./findings.js";
import type { Harness } from "./harness.js";

/**
 * The session part of the conformance model (the seed's session capabilities): a model or mode change, in the live
 * session or by a new one (`model_switch_new_session`, `mode_switch_new_session`), and a second thread that shares the
 * session with a held one, or gets a session of its own.
 */

const MODEL = "sessions.supportsModelSwitchInSession";
const MODE = "sessions.supportsRuntimeModeSwitchInSession";
const SHARED = "sessions.supportsMultipleProviderThreadsPerSession";
const PLAN_MODE = { interaction: "plan", approvals: "on_request" } as const;
const OTHER_MODEL = "conformance-other-model";
const otherModel = (h: Harness) => h.world.otherModel ?? OTHER_MODEL;

export const sessionGuards = {
  switchesModelInSession: (c: ProviderCapabilities) => c.sessions.supportsModelSwitchInSession,
  switchesModeInSession: (c: ProviderCapabilities) => c.sessions.supportsRuntimeModeSwitchInSession,
  /**
   * Threads share a session only where their events can be told apart (thread ids), each turn says when it ends
   * (terminals) and a thread exists before its first turn (empty threads): else each thread gets a session.
   */
  sharesSession: (c: ProviderCapabilities) =>
    c.sessions.supportsMultipleProviderThreadsPerSession &&
    c.threads.exposesNativeThreadId &&
    c.identity.nativeThreadIds !== "none" &&
    c.turns.emitsTurnCompleted &&
    c.threads.canCreateEmptyThread,
};

/** Events after a completed text turn. */
export const sessionAnsweredEvents = {
  SWITCH_MODEL: [{ guard: "switchesModelInSession", target: "modelSwitched" }, { target: "modelNewSession" }],
  SWITCH_MODE: [{ guard: "switchesModeInSession", target: "modeSwitched" }, { target: "modeNewSession" }],
};
/** Events while a turn is held. */
export const sessionHoldingEvents = {
  OTHER_THREAD: [{ guard: "sharesSession", target: "sharedWhileHeld" }, { target: "separateWhileHeld" }],
};

export const sessionStates = {
  modelSwitched: { type: "final", meta: { fields: [MODEL] } },
  modelNewSession: { type: "final", meta: { fields: [MODEL] } },
  modeSwitched: { type: "final", meta: { fields: [MODE] } },
  modeNewSession: { type: "final", meta: { fields: [MODE] } },
  sharedWhileHeld: { meta: { fields: [SHARED] }, on: { RELEASE: "sharedDone" } },
  separateWhileHeld: { meta: { fields: [SHARED] }, on: { RELEASE: "sharedDone" } },
  sharedDone: { type: "final", meta: { fields: [SHARED] } },
} as const;

async function sendWith(h: Harness, extra: { model?: string; runtimeMode?: typeof PLAN_MODE }): Promise<void> {
  const text = h.nextText("switch");
  h.world.next({ kind: "text", text: h.nextText("reply") }, { userText: text });
  const receipt = await h.attempt(() => h.rt.sendMessage({ threadId: h.threadId, text, ...extra }));
  if (!receipt) return;
  h.runIds.push(receipt.runId);
  h.userTexts.set(receipt.runId, text);
  await h.untilTerminal(receipt.runId);
}

export const sessionDrives: Record<string, (h: Harness) => Promise<void>> = {
  SWITCH_MODEL: (h) => sendWith(h, { model: otherModel(h) }),
  SWITCH_MODE: (h) => sendWith(h, { runtimeMode: PLAN_MODE }),
  OTHER_THREAD: async (h) => {
    h.otherThreadId = (await h.rt.createThread({ providerTarget: h.target, cwd: h.cwd })).threadId;
    const runId = await h.send({ kind: "text", text: h.nextText("reply") }, { threadId: h.otherThreadId });
    if (!runId) throw new Error(`a second thread's message was refused: ${h.lastError?.code}`);
    h.otherRunId = runId;
    await h.untilTerminal(runId);
  },
};

const sessions = (h: Harness) => h.events("session.started").length;

function switched(field: string, change: "thread.model_changed" | "thread.mode_changed", inSession: boolean): Check {
  const policy = change === "thread.model_changed" ? "model_switch_new_session" : "mode_switch_new_session";
  return (h) => {
    const via = h.events(change, (e) => e.threadId === h.threadId).at(-1)?.via ?? "(no change recorded)";
    const degraded = h.policies((e) => e.threadId === h.threadId).includes(policy);
    const evidence = h.world.lastTurn();
    const out: Finding[] = [completed(h, h.runId, field)];
    const seen = `switched ${via}, ${sessions(h)} sessions, ${policy} ${degraded ? "" : "not "}recorded`;
    // The provider's own word on the turn's model or mode, where the world can tell it.
    const told =
      change === "thread.model_changed"
        ? evidence?.model === undefined
          ? null
          : evidence.model === otherModel(h)
        : evidence?.runtimeMode === undefined
          ? null
          : evidence.runtimeMode.interaction === "plan";
    if (inSession) {
      // Without the provider's word the runtime's switch is all there is to see: not the adapter's doing.
      if (told === null) return out.filter((f) => !f.ok);
      out.push(
        finding(field, via === "in_session" && !degraded && sessions(h) === 1 && told, seen, `${seen}; told ${told}`),
      );
    } else {
      const ok = via === "new_session" && degraded && sessions(h) === 2 && told !== false;
      out.push(finding(field, ok, seen, `${seen}; told ${told}`));
    }
    return out;
  };
}

export const sessionChecks: Record<string, Check> = {
  modelSwitched: switched(MODEL, "thread.model_changed", true),
  modelNewSession: switched(MODEL, "thread.model_changed", false),
  modeSwitched: switched(MODE, "thread.mode_changed", true),
  modeNewSession: switched(MODE, "thread.mode_changed", false),
  sharedWhileHeld: (h) => {
    const held = h.terminal(h.runId) === undefined;
    const isolated = JSON.stringify(h.world.lastTurn()?.priorUserTexts ?? null) === "[]";
    const ok = held && isolated && sessions(h) === 1 && h.terminal(h.otherRunId!)?.status === "completed";
    const saw = isolated ? "saw only its own thread" : "saw another";
    const seen = `${sessions(h)} sessions; the second thread's turn ${saw}`;
    return [finding(SHARED, ok, `${seen}, beside the held turn`, seen)];
  },
  separateWhileHeld: (h, caps) => {
    const ok = sessions(h) === 2 && h.terminal(h.otherRunId!)?.status === "completed";
    const seen = `${sessions(h)} sessions, the second thread's run ${h.terminal(h.otherRunId!)?.status}`;
    // Claimed, but other fields keep threads apart: nothing of this field to show, unless it went wrong.
    if (claims(caps.sessions.supportsMultipleProviderThreadsPerSession))
      return ok ? [] : [finding(SHARED, false, "", seen)];
    return [finding(SHARED, ok, "a session per thread", seen)];
  },
  sharedDone: (h) => {
    const first = h.terminal(h.runId)?.status;
    const ok = first === "completed";
    // Where each thread had its own session, there was nothing shared to show.
    if (sessions(h) !== 1 && ok) return [];
    return [finding(SHARED, ok, "the held thread's run completed too", `the held run ${first}`)];
  },
};
