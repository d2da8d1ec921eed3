import { describe, expect, it } from "vitest";
import { createScriptedAdapter, type CapabilityOverrides, type ItemLifecycle } from "../../src/index.js";
import { openTestRuntime } from "../support/runtime.js";

/**
 * `affordances().items`, field by field: each part of an item's lifecycle is read from its own field of the record
 * (the seed's streaming and tool fields), whatever the others say. A provider that differs from the full record in
 * one field only must differ in that part of the lifecycle only.
 */

const full: ItemLifecycle = {
  assistantText: "streamed",
  reasoning: "streamed",
  planText: "streamed",
  toolOutput: "streamed",
  messageCompleted: "native",
  tools: { started: "native", completed: "native", ids: "native" },
};

const cases: Array<[string, CapabilityOverrides, ItemLifecycle]> = [
  [
    "streaming.streamsAssistantText",
    { streaming: { streamsAssistantText: false } },
    { ...full, assistantText: "at_completion" },
  ],
  ["streaming.streamsReasoning", { streaming: { streamsReasoning: false } }, { ...full, reasoning: "at_completion" }],
  ["streaming.streamsPlanText", { streaming: { streamsPlanText: false } }, { ...full, planText: "at_completion" }],
  [
    "streaming.streamsToolOutput",
    { streaming: { streamsToolOutput: false } },
    { ...full, toolOutput: "at_completion" },
  ],
  ["tools.emitsToolOutput", { tools: { emitsToolOutput: false } }, { ...full, toolOutput: "none" }],
  [
    "streaming.emitsMessageCompleted",
    { streaming: { emitsMessageCompleted: false } },
    { ...full, messageCompleted: "at_terminal" },
  ],
  [
    "tools.emitsToolStarted",
    { tools: { emitsToolStarted: false } },
    { ...full, tools: { ...full.tools, started: "synthesised" } },
  ],
  [
    "tools.emitsToolCompleted",
    { tools: { emitsToolCompleted: false } },
    { ...full, tools: { ...full.tools, completed: "at_terminal" } },
  ],
  [
    "tools.exposesToolItemIds",
    { tools: { exposesToolItemIds: false } },
    { ...full, tools: { ...full.tools, ids: "ordinal" } },
  ],
  // Tool ids are item ids: a provider with no native item ids has none for its tools, whatever the tools say.
  [
    "identity.nativeItemIds none",
    { identity: { nativeItemIds: "none" }, tools: { exposesToolItemIds: true } },
    { ...full, tools: { ...full.tools, ids: "ordinal" } },
  ],
  // Weak item ids are still the provider's own ids.
  ["identity.nativeItemIds weak", { identity: { nativeItemIds: "weak" } }, full],
];

describe("affordances().items, one record field at a time", () => {
  it("differs from the full record's lifecycle in the part that field decides, and in no other", async () => {
    const providers = Object.fromEntries([
      ["full", createScriptedAdapter()],
      ...cases.map(([, capabilities], n) => [`p${n}`, createScriptedAdapter({ capabilities })]),
    ]);
    const { rt, cleanup } = await openTestRuntime(providers);
    try {
      const items = async (providerTarget: string) =>
        rt.affordances((await rt.createThread({ providerTarget })).threadId).items;
      expect(await items("full")).toEqual(full);
      for (const [n, [name, , expected]] of cases.entries())
        expect([name, await items(`p${n}`)]).toEqual([name, expected]);
    } finally {
      await cleanup();
    }
  });
});
