import { describe, expect, it } from "vitest";
import { defineCapabilities, type ProviderCapabilities } from "../../src/capabilities/index.js";
import { decide, handoffAdmissionPolicy, type HandoffNeed } from "../../src/machines/contextPolicy.js";
import { DEGRADATIONS } from "../../src/machines/policies.js";
import { policies, rejectsWith, scripted } from "../support/policies.js";
import { ofType, openTestRuntime, sendAndWait } from "../support/runtime.js";

/**
 * The handoff admission decision alone: whether a run may go to a target that must be told the conversation.
 * Expectations come from the capability seed ("if the provider cannot accept explicit context, provider switching
 * should require synthetic user context or be marked unsupported"; "provider switch return unsupported -> create
 * fresh provider thread with full app-thread summary") and the degradation registry: a switch needs both sides to
 * take part in switching, a summary needs a provider that consumes one, and only a whole-conversation summary needs
 * one that takes full handoffs (a delta, what a thread missed, does not).
 */

const caps = (
  over: {
    switching?: boolean;
    summaries?: boolean;
    full?: boolean;
  } = {},
): ProviderCapabilities =>
  defineCapabilities({
    sessions: { supportsProviderSwitchingViaHandoff: over.switching ?? true },
    context: {
      canConsumeHandoffSummaries: over.summaries ?? true,
      supportsFullThreadHandoff: over.full ?? true,
    },
  });

/** Nothing a target might refuse: it switches, consumes summaries and takes full ones. */
const willing = caps();
/** A target that refuses everything the admission decision reads. */
const unwilling = caps({ switching: false, summaries: false, full: false });

function admit(input: {
  from?: ProviderCapabilities | null;
  to: ProviderCapabilities;
  switching?: boolean;
  need: HandoffNeed;
}) {
  return decide(handoffAdmissionPolicy, {
    from: input.from ?? null,
    to: input.to,
    switching: input.switching ?? false,
    need: input.need,
  });
}

const admitted = { decision: "admitted", policy: null };

describe("handoff admission: nothing to tell", () => {
  it("a target told nothing is admitted whatever it cannot do, even across a switch from a non-switching one", () => {
    expect(admit({ to: unwilling, need: "none" })).toEqual(admitted);
    expect(admit({ from: unwilling, to: unwilling, switching: true, need: "none" })).toEqual(admitted);
  });

  it("a willing target that must be told is admitted, with a delta or the whole conversation", () => {
    for (const need of ["delta", "full"] as const) {
      expect(admit({ to: willing, need })).toEqual(admitted);
      expect(admit({ from: willing, to: willing, switching: true, need })).toEqual(admitted);
    }
  });
});

describe("handoff admission: switching", () => {
  const switchRefused = { decision: "switchRefused", policy: "provider_switch_unsupported" };

  it("the conversation cannot move to a provider that takes no part in switching", () => {
    const to = caps({ switching: false });
    expect(admit({ from: willing, to, switching: true, need: "full" })).toEqual(switchRefused);
    expect(admit({ from: willing, to, switching: true, need: "delta" })).toEqual(switchRefused);
  });

  it("nor away from one: the provider it is on now must take part too", () => {
    const from = caps({ switching: false });
    expect(admit({ from, to: willing, switching: true, need: "full" })).toEqual(switchRefused);
  });

  it("with no record of where it was (no run reached a provider), only the target's part is read", () => {
    expect(admit({ from: null, to: willing, switching: true, need: "full" })).toEqual(admitted);
    expect(admit({ from: null, to: caps({ switching: false }), switching: true, need: "full" })).toEqual(switchRefused);
  });

  it("a provider that takes no part in switching is still told its own conversation when nothing moves", () => {
    // A rebuilt or replaced thread on the same target: no switch, so switching support is not read.
    expect(admit({ to: caps({ switching: false }), switching: false, need: "full" })).toEqual(admitted);
    expect(admit({ from: caps({ switching: false }), to: willing, switching: false, need: "full" })).toEqual(admitted);
  });

  it("the refusal names the switching capability", () => {
    expect(DEGRADATIONS.provider_switch_unsupported).toMatchObject({
      capability: "sessions.supportsProviderSwitchingViaHandoff",
      outcome: "refused",
    });
  });
});

describe("handoff admission: summaries", () => {
  const summaryRefused = { decision: "summaryRefused", policy: "handoff_summary_unsupported" };

  it("a provider that cannot continue from a summary is refused any summary, a delta as well as a whole one", () => {
    const to = caps({ summaries: false });
    expect(admit({ to, need: "delta" })).toEqual(summaryRefused);
    expect(admit({ to, need: "full" })).toEqual(summaryRefused);
    expect(admit({ from: willing, to, switching: true, need: "delta" })).toEqual(summaryRefused);
  });

  it("a refused switch is named as such first: the summary question does not arise", () => {
    const to = caps({ switching: false, summaries: false });
    expect(admit({ from: willing, to, switching: true, need: "full" }).policy).toBe("provider_switch_unsupported");
  });
});

describe("handoff admission: whole-conversation summaries", () => {
  const fullRefused = { decision: "fullRefused", policy: "full_handoff_unsupported" };

  it("a provider that takes no whole-conversation summary is refused one", () => {
    const to = caps({ full: false });
    expect(admit({ to, need: "full" })).toEqual(fullRefused);
    expect(admit({ from: willing, to, switching: true, need: "full" })).toEqual(fullRefused);
  });

  it("but is told what its thread missed: a delta needs no full-handoff support", () => {
    const to = caps({ full: false });
    expect(admit({ to, need: "delta" })).toEqual(admitted);
    expect(admit({ from: willing, to, switching: true, need: "delta" })).toEqual(admitted);
  });

  it("a provider that consumes no summaries at all is refused for that, the more basic lack", () => {
    expect(admit({ to: caps({ summaries: false, full: false }), need: "full" }).policy).toBe(
      "handoff_summary_unsupported",
    );
  });

  it("the refusal names the full-handoff capability", () => {
    expect(DEGRADATIONS.full_handoff_unsupported).toMatchObject({
      capability: "context.supportsFullThreadHandoff",
      outcome: "refused",
    });
  });
});

describe("handoff admission in the runtime: a provider that takes deltas but no whole-conversation summary", () => {
  const deltaOnly = { context: { supportsFullThreadHandoff: false, supportsDeltaHandoff: true } };

  it("the conversation returns to it with what its thread missed", async () => {
    const { rt, events, cleanup } = await openTestRuntime({ a: scripted(deltaOnly), b: scripted() });
    try {
      const { threadId } = await rt.createThread({ providerTarget: "a" });
      await sendAndWait(rt, threadId, "one");
      await sendAndWait(rt, threadId, "two", { providerTarget: "b" });
      const back = await sendAndWait(rt, threadId, "three", { providerTarget: "a" });
      expect(back.status).toBe("completed");
      const toA = ofType(events, "handoff.created").filter((h) => h.toTarget === "a");
      expect(toA.map((h) => h.strategy)).toEqual(["delta_since_last_seen"]);
      expect(policies(events, "full_handoff_unsupported")).toEqual([]);
    } finally {
      await cleanup();
    }
  });

  it("but a conversation it has never seen cannot move to it: refused by name, nothing recorded", async () => {
    const { rt, events, cleanup } = await openTestRuntime({ a: scripted(deltaOnly), b: scripted() });
    try {
      const { threadId } = await rt.createThread({ providerTarget: "b" });
      await sendAndWait(rt, threadId, "one");
      const error = await rejectsWith(
        rt.sendMessage({ threadId, text: "two", providerTarget: "a" }),
        "capability_unsupported",
      );
      expect(error.details).toMatchObject({ capability: "context.supportsFullThreadHandoff" });
      expect((await rt.readThread(threadId)).runs).toHaveLength(1);
      expect(ofType(events, "handoff.created")).toEqual([]);
    } finally {
      await cleanup();
    }
  });
});
