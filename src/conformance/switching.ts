import { and } from "xstate";
import type { ProviderCapabilities } from "../index.js";
import { finding, refusedBy, textOfRun, told, UNTOLD, type Check, type Finding } from "./findings.js";
import { OTHER_TARGET, TARGET, type Harness } from "./harness.js";

/**
 * Provider switching (the seed's context handoff): a conversation moves to another target with a summary of what that
 * provider has not seen, and back. Returning to a provider that takes deltas tells its thread only what it missed;
 * otherwise a fresh thread there gets the whole conversation (`handoff_fresh_thread`).
 */

const SWITCH = "sessions.supportsProviderSwitchingViaHandoff";
const DELTA = "context.supportsDeltaHandoff";
const CONSUME = "context.canConsumeHandoffSummaries";
const TOLD_FIELDS = [
  "context.canConsumeHandoffSummaries",
  "context.supportsFullThreadHandoff",
  "context.canGenerateSummaries",
  "context.maxRecommendedHandoffChars",
  "context.acceptsSystemContext",
  "context.acceptsDeveloperContext",
  "context.acceptsSyntheticUserContext",
];

export const switchingGuards = {
  switchesProviders: (c: ProviderCapabilities) => c.sessions.supportsProviderSwitchingViaHandoff,
  takesDeltas: (c: ProviderCapabilities) => c.context.supportsDeltaHandoff,
};

/** After a completed text turn: switch the conversation to the other target. */
export const switchingAnsweredEvents = {
  SWITCH_PROVIDER: [
    { guard: and(["switchesProviders", "tellsConversation"]), target: "switched" },
    { target: "switchRefused" },
  ],
};

export const switchingStates = {
  switched: {
    // It tells the other provider the conversation: what a handoff exercises.
    meta: { fields: [SWITCH, ...TOLD_FIELDS] },
    on: { SWITCH_BACK: [{ guard: "takesDeltas", target: "returnedDelta" }, { target: "returnedFresh" }] },
  },
  returnedDelta: { type: "final", meta: { fields: [DELTA] } },
  returnedFresh: { type: "final", meta: { fields: [DELTA] } },
  switchRefused: { type: "final", meta: { fields: [SWITCH], refusal: true } },
} as const;

async function sendOn(h: Harness, providerTarget: string): Promise<void> {
  const runId = await h.send({ kind: "text", text: h.nextText("reply") }, { providerTarget });
  if (runId) await h.untilTerminal(runId);
}

export const switchingDrives: Record<string, (h: Harness) => Promise<void>> = {
  SWITCH_PROVIDER: (h) => sendOn(h, OTHER_TARGET),
  SWITCH_BACK: (h) => sendOn(h, TARGET),
};

const handoffOf = (h: Harness) => h.events("handoff.created", (e) => e.runId === h.runId).at(-1);

export const switchingChecks: Record<string, Check> = {
  switched: (h, caps) => {
    const handoff = handoffOf(h);
    const ok = handoff?.reason === "provider_switch" && handoff.toTarget === OTHER_TARGET;
    const seen = `handoff ${handoff?.reason ?? "none"} to ${handoff?.toTarget ?? "nobody"}`;
    const out: Finding[] = [finding(SWITCH, ok, seen, seen)];
    return [...out, ...told((x) => x.threadId)(h, caps)];
  },
  returnedDelta: (h) => {
    const handoff = handoffOf(h);
    const turn = h.world.lastTurn();
    // The provider's own thread, told only the run it missed.
    const sameThread = JSON.stringify(turn?.priorUserTexts) === JSON.stringify([textOfRun(h, 0)]);
    const told = !!turn?.context?.text.includes(textOfRun(h, 1));
    const ok = handoff?.strategy === "delta_since_last_seen" && sameThread && told;
    const seen = `handoff ${handoff?.strategy ?? "none"}; the provider had ${JSON.stringify(turn?.priorUserTexts)}`;
    // A delta not taken in at all may be a provider that takes no summary: that field's fault, where it is refuted.
    if (!ok && sameThread && !turn?.context)
      return [{ field: DELTA, ok: false, observed: `${seen}; it carried no context`, unlessRefuted: CONSUME }];
    return [finding(DELTA, ok, `${seen} and was told the missed run`, `${seen}; told the missed run: ${told}`)];
  },
  returnedFresh: (h) => {
    const handoff = handoffOf(h);
    const fresh = h.policies((e) => e.threadId === h.threadId).includes("handoff_fresh_thread");
    const turn = h.world.lastTurn();
    const ok = fresh && handoff?.strategy === "full_thread_summary" && JSON.stringify(turn?.priorUserTexts) === "[]";
    const seen = `handoff_fresh_thread ${fresh}, handoff ${handoff?.strategy ?? "none"}`;
    return [finding(DELTA, ok, seen, `${seen}; the provider had ${JSON.stringify(turn?.priorUserTexts)}`)];
  },
  switchRefused: (h, caps) => {
    const policy = refusedBy(h, ["provider_switch_unsupported", ...UNTOLD]);
    const seen = `refusal ${h.lastError?.code ?? "none"}, policy ${policy ?? h.lastError?.policy ?? "none"}`;
    // The switch is refused for the first thing the record lacks: switching itself, or being told the conversation.
    const field = caps.sessions.supportsProviderSwitchingViaHandoff ? null : SWITCH;
    return field ? [finding(field, policy === "provider_switch_unsupported", seen, seen)] : [];
  },
};
