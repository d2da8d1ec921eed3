import { describe, expect, it } from "vitest";
import { createActor } from "xstate";
import {
  defineCapabilities,
  fullCapabilities,
  minimalCapabilities,
  type ProviderCapabilities,
} from "../../src/capabilities/index.js";
import { contextDeliveryPolicy, decide } from "../../src/machines/contextPolicy.js";
import { DEGRADATIONS, type PolicyName } from "../../src/machines/policies.js";

/**
 * The context delivery decision alone: how a handoff (or a rebuild's summary) reaches a
 * provider. Expectations come from the capability seed's context-handoff policies ("if the
 * provider cannot accept explicit context, provider switching should require synthetic user
 * context or be marked unsupported"), invariant 8 (an explicit handoff, never a hidden prompt
 * hack) and the degradation registry: the best channel the record offers, and a named policy
 * when the channel is a fallback or there is none.
 */

function delivery(capabilities: ProviderCapabilities) {
  const actor = createActor(contextDeliveryPolicy, { input: { capabilities } }).start();
  const snapshot = actor.getSnapshot();
  actor.stop();
  const meta = Object.values(snapshot.getMeta() as Record<string, { policy?: PolicyName } | undefined>);
  return { value: snapshot.value, status: snapshot.status, policy: meta.find((m) => m?.policy)?.policy ?? null };
}

const context = (over: Partial<ProviderCapabilities["context"]>) => defineCapabilities({ context: over });

describe("context delivery decision", () => {
  it("decides at once, from the record alone: the machine is done as soon as it starts", () => {
    expect(delivery(fullCapabilities()).status).toBe("done");
    expect(
      delivery(
        context({ acceptsDeveloperContext: false, acceptsSystemContext: false, acceptsSyntheticUserContext: false }),
      ).status,
    ).toBe("done");
  });

  it("a provider that takes developer context gets the handoff as developer context, with no degradation", () => {
    expect(delivery(fullCapabilities())).toMatchObject({ value: "developer", policy: null });
    expect(delivery(context({ acceptsSystemContext: false }))).toMatchObject({ value: "developer", policy: null });
  });

  it("without developer context, as system context, still with no degradation", () => {
    expect(delivery(context({ acceptsDeveloperContext: false }))).toMatchObject({ value: "system", policy: null });
  });

  it("with neither, as synthetic user context: the named fallback, read from the developer-context capability", () => {
    const d = delivery(context({ acceptsDeveloperContext: false, acceptsSystemContext: false }));
    expect(d).toMatchObject({ value: "synthetic_user", policy: "handoff_as_user_context" });
    expect(DEGRADATIONS.handoff_as_user_context).toMatchObject({
      capability: "context.acceptsDeveloperContext",
      outcome: "fallback",
    });
    // The provider that can only run a turn and stream text still takes the conversation this way.
    expect(delivery(minimalCapabilities())).toMatchObject({
      value: "synthetic_user",
      policy: "handoff_as_user_context",
    });
  });

  it(
    "a provider that accepts no context at all is refused, " +
      "never handed a conversation it cannot see: the named refusal",
    () => {
      const none = context({
        acceptsDeveloperContext: false,
        acceptsSystemContext: false,
        acceptsSyntheticUserContext: false,
      });
      expect(delivery(none)).toMatchObject({ value: "refused", policy: "handoff_unsupported" });
      expect(DEGRADATIONS.handoff_unsupported).toMatchObject({
        capability: "context.acceptsSyntheticUserContext",
        outcome: "refused",
      });
    },
  );

  it("decide() is what the runtime reads: the final state's name and its policy", () => {
    const none = context({
      acceptsDeveloperContext: false,
      acceptsSystemContext: false,
      acceptsSyntheticUserContext: false,
    });
    expect(decide(contextDeliveryPolicy, { capabilities: fullCapabilities() })).toEqual({
      decision: "developer",
      policy: null,
    });
    expect(decide(contextDeliveryPolicy, { capabilities: context({ acceptsDeveloperContext: false }) })).toEqual({
      decision: "system",
      policy: null,
    });
    expect(decide(contextDeliveryPolicy, { capabilities: minimalCapabilities() })).toEqual({
      decision: "synthetic_user",
      policy: "handoff_as_user_context",
    });
    expect(decide(contextDeliveryPolicy, { capabilities: none })).toEqual({
      decision: "refused",
      policy: "handoff_unsupported",
    });
  });
});
