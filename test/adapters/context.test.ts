import { describe, expect, it } from "vitest";
import { createScriptedAdapter, ScriptedBackend, type CapabilityOverrides } from "../../src/index.js";
import { contextHeader, deliverContext, userPrompt } from "../../src/adapters/kit/context.js";
import { openTestRuntime } from "../support/runtime.js";

/**
 * The kit's context formatter: a turn's explicit context goes where its delivery says (developer or system
 * instructions, else a user message before the user's own), and its header is written once, by the formatter (the
 * runtime's summary carries none).
 */

const HEADER = "Context from earlier in this conversation";
const count = (text: string, what: string) => text.split(what).length - 1;

describe("deliverContext", () => {
  it("places a context by its delivery, the header once", () => {
    const text = "user: hi\nassistant: hello";
    expect(deliverContext({ kind: "handoff", text, delivery: "developer" })).toEqual({
      instructions: { role: "developer", text: contextHeader("handoff") + text },
      userMessages: [],
    });
    expect(deliverContext({ kind: "fork", text, delivery: "system" }).instructions?.role).toBe("system");
    const asUser = deliverContext({ kind: "rebuild", text, delivery: "synthetic_user" });
    expect(asUser).toEqual({ instructions: null, userMessages: [contextHeader("rebuild") + text] });
    const rebuild = { kind: "rebuild", text, delivery: "synthetic_user" } as const;
    expect(userPrompt(rebuild, "go on", "p")).toBe(`${contextHeader("rebuild")}${text}\n\ngo on`);
    // A provider that takes user context only refuses instructions, typed, rather than slip them into the prompt.
    expect(() => userPrompt({ ...rebuild, delivery: "developer" }, "go on", "p")).toThrow(
      expect.objectContaining({ code: "capability_unsupported" }),
    );
    expect(deliverContext(null)).toEqual({ instructions: null, userMessages: [] });
  });
});

describe("a handoff through the runtime, as the provider receives it", () => {
  const cases: Array<[string, CapabilityOverrides, "instructions" | "user"]> = [
    ["developer context", {}, "instructions"],
    [
      "user context only",
      { context: { acceptsDeveloperContext: false, acceptsSystemContext: false, acceptsSyntheticUserContext: true } },
      "user",
    ],
  ];
  for (const [name, capabilities, where] of cases) {
    it(`${name}: the summary once, under one header`, async () => {
      const backend = new ScriptedBackend();
      const alpha = createScriptedAdapter({ script: ({ text }) => [{ type: "text", text: `alpha: ${text}` }] });
      const beta = createScriptedAdapter({ backend, capabilities, script: () => [{ type: "text", text: "ok" }] });
      const { rt, cleanup } = await openTestRuntime({ alpha, beta });
      try {
        const { threadId } = await rt.createThread({ providerTarget: "alpha" });
        await rt.waitForRun((await rt.sendMessage({ threadId, text: "the secret is 42" })).runId);
        await rt.waitForRun((await rt.sendMessage({ threadId, text: "and now?", providerTarget: "beta" })).runId);
        const [turn] = [...backend.threads.values()].flatMap((t) => t.turns);
        const delivered = turn!.delivered!;
        const received = where === "instructions" ? delivered.instructions!.text : delivered.userMessages[0]!;
        expect(received).toContain("the secret is 42");
        expect(count(received, HEADER)).toBe(1);
        expect(received.startsWith(contextHeader("handoff"))).toBe(true);
        expect(where === "instructions" ? delivered.userMessages : [delivered.instructions]).toEqual(
          where === "instructions" ? [] : [null],
        );
      } finally {
        await cleanup();
      }
    });
  }
});
