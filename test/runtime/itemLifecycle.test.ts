import { describe, expect, it } from "vitest";
import {
  createScriptedAdapter,
  type CapabilityOverrides,
  type DomainEvent,
  type LogRecord,
  type ProviderAdapter,
  type ProviderAdapterEvent,
  type ScriptStep,
} from "../../src/index.js";
import { nextEvent, ofType, openTestRuntime } from "../support/runtime.js";
import { rewriteEvents } from "./hostileProvider.js";

/**
 * The streaming and tool fields of the capability record decide what a UI is told to expect (`affordances().items`,
 * known before the first turn) and what the normalizer makes so every item has one lifecycle: started, deltas,
 * completed. Each test flips one field on the scripted provider and shows the log change, with the named degradation
 * recorded once per attempt.
 */

const TEXT = "a reply long enough to stream in several chunks";
const OUTPUT = "build output, long enough to stream in chunks";

/** Runs one message on a scripted provider with this record; the provider may be wrapped (a hostile stream). */
async function runOnce(
  capabilities: CapabilityOverrides,
  steps: ScriptStep[],
  wrap: (adapter: ProviderAdapter) => ProviderAdapter = (a) => a,
) {
  const adapter = wrap(createScriptedAdapter({ capabilities, script: () => steps }));
  const { rt, events, cleanup } = await openTestRuntime({ p: adapter });
  try {
    const { threadId } = await rt.createThread({ providerTarget: "p" });
    const run = await rt.waitForRun((await rt.sendMessage({ threadId, text: "go" })).runId);
    return { run, events: [...events], affordances: rt.affordances(threadId) };
  } finally {
    await cleanup();
  }
}

/** An item's lifecycle on the log: its node events in order, consecutive deltas as one. */
function lifecycle(events: LogRecord<DomainEvent>[], nodeId: string): string[] {
  const shape: string[] = [];
  for (const { event } of events) {
    if (!("nodeId" in event) || event.nodeId !== nodeId) continue;
    const step = event.type === "node.delta" ? "delta" : event.type === "node.started" ? "started" : event.type;
    if (step === "node.completed") shape.push("completed");
    else if (step !== "delta" || shape.at(-1) !== "delta") shape.push(step);
  }
  return shape;
}

const deltasOf = (events: LogRecord<DomainEvent>[], nodeId: string) =>
  ofType(events, "node.delta").filter((d) => d.nodeId === nodeId);

const policiesOf = (events: LogRecord<DomainEvent>[]) => ofType(events, "policy.applied").map((p) => p.policy);

/** The node ids of a run's items of one kind, in order. */
const idsOf = (run: { items: Array<{ id: string; kind: string }> }, kind: string) =>
  run.items.filter((i) => i.kind === kind).map((i) => i.id);

describe("affordances().items: what the items will look like, from the record, before the first turn", () => {
  it("says what streams and what the runtime makes, per record", async () => {
    const full = createScriptedAdapter();
    const weak = createScriptedAdapter({
      capabilities: {
        streaming: {
          streamsAssistantText: false,
          streamsReasoning: false,
          streamsToolOutput: false,
          streamsPlanText: false,
          emitsMessageCompleted: false,
        },
        tools: { emitsToolStarted: false, emitsToolCompleted: false, exposesToolItemIds: false },
      },
    });
    const silent = createScriptedAdapter({ capabilities: { tools: { emitsToolOutput: false } } });
    const { rt, cleanup } = await openTestRuntime({ full, weak, silent });
    try {
      const affordances = async (providerTarget: string) =>
        rt.affordances((await rt.createThread({ providerTarget })).threadId);
      expect((await affordances("full")).items).toEqual({
        assistantText: "streamed",
        reasoning: "streamed",
        planText: "streamed",
        toolOutput: "streamed",
        messageCompleted: "native",
        tools: { started: "native", completed: "native", ids: "native" },
      });
      expect((await affordances("weak")).items).toEqual({
        assistantText: "at_completion",
        reasoning: "at_completion",
        planText: "at_completion",
        toolOutput: "at_completion",
        messageCompleted: "at_terminal",
        tools: { started: "synthesised", completed: "at_terminal", ids: "ordinal" },
      });
      expect((await affordances("silent")).items.toolOutput).toBe("none");
      // Nothing ran: the record alone said it.
      expect(rt.views.runs.size).toBe(0);
    } finally {
      await cleanup();
    }
  });
});

describe("text that arrives whole at its completion", () => {
  const steps: ScriptStep[] = [
    { type: "text", text: TEXT, chunkSize: 8 },
    { type: "text", text: " and more", chunkSize: 8 },
  ];

  it("is one delta before the completion when assistant text is not streamed (policy once per attempt)", async () => {
    const { run, events, affordances } = await runOnce({ streaming: { streamsAssistantText: false } }, steps);
    expect(run.status).toBe("completed");
    const [first, second] = idsOf(run, "assistant_message");
    expect(lifecycle(events, first!)).toEqual(["started", "delta", "completed"]);
    expect(deltasOf(events, first!).map((d) => d.delta)).toEqual([TEXT]);
    expect(lifecycle(events, second!)).toEqual(["started", "delta", "completed"]);
    expect(policiesOf(events).filter((p) => p === "assistant_text_at_completion")).toHaveLength(1);
    expect(affordances.items.assistantText).toBe("at_completion");
  });

  it("streams in several deltas, with no policy, when the record says it streams", async () => {
    const { run, events, affordances } = await runOnce({}, steps);
    const [first] = idsOf(run, "assistant_message");
    expect(lifecycle(events, first!)).toEqual(["started", "delta", "completed"]);
    expect(deltasOf(events, first!).length).toBeGreaterThan(1);
    expect(
      deltasOf(events, first!)
        .map((d) => d.delta)
        .join(""),
    ).toBe(TEXT);
    expect(policiesOf(events)).not.toContain("assistant_text_at_completion");
    expect(affordances.items.assistantText).toBe("streamed");
  });

  // The scripted provider sends no reasoning at all when it does not stream it: this one sends it whole, as a
  // provider without reasoning deltas does (only its completion, not even a start).
  const wholeReasoning = (adapter: ProviderAdapter) =>
    rewriteEvents(adapter, (frame) => {
      const { event } = frame;
      if (event.type !== "item.completed" || event.kind !== "assistant_message") return [frame];
      const { threadRef, turnRef } = event;
      const reasoning: ProviderAdapterEvent = {
        sessionId: frame.sessionId,
        event: { type: "item.completed", threadRef, turnRef, kind: "reasoning", status: "completed", text: "mulling" },
      };
      return [reasoning, frame];
    });

  for (const streamsReasoning of [false, true]) {
    it(`reasoning sent whole: a start, one delta; named when not streamed (${streamsReasoning})`, async () => {
      const { run, events, affordances } = await runOnce(
        { streaming: { streamsReasoning } },
        [{ type: "text", text: "done" }],
        wholeReasoning,
      );
      expect(run.status).toBe("completed");
      const [reasoning] = idsOf(run, "reasoning");
      expect(lifecycle(events, reasoning!)).toEqual(["started", "delta", "completed"]);
      expect(deltasOf(events, reasoning!).map((d) => d.delta)).toEqual(["mulling"]);
      expect(policiesOf(events).includes("reasoning_at_completion")).toBe(!streamsReasoning);
      expect(affordances.items.reasoning).toBe(streamsReasoning ? "streamed" : "at_completion");
    });
  }
});

describe("tool output", () => {
  const command: ScriptStep[] = [
    { type: "command", command: "make", output: OUTPUT },
    { type: "command", command: "make test", output: "ok" },
  ];

  it("arrives whole at the tool's completion as one output delta when not streamed", async () => {
    const { run, events } = await runOnce({ streaming: { streamsToolOutput: false } }, command);
    const [make] = idsOf(run, "command");
    expect(lifecycle(events, make!)).toEqual(["started", "delta", "completed"]);
    expect(deltasOf(events, make!).map((d) => [d.stream, d.delta])).toEqual([["output", OUTPUT]]);
    expect(run.items.find((i) => i.id === make)?.output).toBe(OUTPUT);
    expect(policiesOf(events).filter((p) => p === "tool_output_at_completion")).toHaveLength(1);
  });

  it("streams in several output deltas, with no policy, when the record says it streams", async () => {
    const { run, events } = await runOnce({}, command);
    const [make] = idsOf(run, "command");
    expect(deltasOf(events, make!).length).toBeGreaterThan(1);
    expect(policiesOf(events)).not.toContain("tool_output_at_completion");
  });

  it("is absent, by a named policy, from a provider that reports no tool output", async () => {
    const { run, events, affordances } = await runOnce({ tools: { emitsToolOutput: false } }, command);
    expect(run.status).toBe("completed");
    for (const id of idsOf(run, "command")) {
      expect(lifecycle(events, id)).toEqual(["started", "completed"]);
      expect(run.items.find((i) => i.id === id)?.output ?? null).toBeNull();
    }
    expect(policiesOf(events).filter((p) => p === "no_tool_output")).toHaveLength(1);
    expect(affordances.items.toolOutput).toBe("none");
  });
});

describe("a tool's start and end", () => {
  const tool: ScriptStep[] = [
    { type: "tool", name: "search", input: { q: "x" }, output: OUTPUT },
    { type: "text", text: "found it" },
  ];

  for (const emitsToolStarted of [false, true]) {
    it(`is started at its first event when the provider sends no start (${emitsToolStarted})`, async () => {
      const { run, events } = await runOnce({ tools: { emitsToolStarted } }, tool);
      const [search] = idsOf(run, "tool");
      expect(lifecycle(events, search!)).toEqual(["started", "delta", "completed"]);
      const started = ofType(events, "node.started").find((e) => e.nodeId === search)!;
      // Only the provider's start knows the tool's name and input.
      expect(started.detail).toEqual(emitsToolStarted ? { toolName: "search", input: { q: "x" } } : null);
      expect(policiesOf(events).includes("tool_start_synthesised")).toBe(!emitsToolStarted);
    });
  }

  for (const emitsToolCompleted of [false, true]) {
    it(`ends with its turn, not cancelled, when never completed (${emitsToolCompleted})`, async () => {
      const { run, events, affordances } = await runOnce({ tools: { emitsToolCompleted } }, tool);
      expect(run.status).toBe("completed");
      const [search] = idsOf(run, "tool");
      expect(lifecycle(events, search!)).toEqual(["started", "delta", "completed"]);
      const completed = ofType(events, "node.completed").find((e) => e.nodeId === search)!;
      expect([completed.status, completed.settledBy]).toEqual([
        "completed",
        emitsToolCompleted ? "provider" : "runtime",
      ]);
      expect(run.items.find((i) => i.id === search)?.output).toBe(OUTPUT);
      expect(policiesOf(events).includes("tools_closed_at_terminal")).toBe(!emitsToolCompleted);
      expect(affordances.items.tools.completed).toBe(emitsToolCompleted ? "native" : "at_terminal");
    });
  }

  it("is closed with the turn's status when the turn is interrupted", async () => {
    const adapter = createScriptedAdapter({
      capabilities: { tools: { emitsToolCompleted: false } },
      script: () => [{ type: "tool", name: "search", output: OUTPUT }, { type: "hang" }],
    });
    const { rt, events, cleanup } = await openTestRuntime({ p: adapter });
    try {
      const { threadId } = await rt.createThread({ providerTarget: "p" });
      const { runId } = await rt.sendMessage({ threadId, text: "go" });
      await nextEvent(rt, "node.delta", (e) => e.runId === runId);
      await rt.interrupt({ runId });
      const run = await rt.waitForRun(runId);
      const [search] = idsOf(run, "tool");
      expect(ofType(events, "node.completed").find((e) => e.nodeId === search)?.status).toBe("interrupted");
    } finally {
      await cleanup();
    }
  });
});

describe("tool item ids", () => {
  // A provider that names every tool call of a turn alike (its ids are not ids): only the order tells them apart.
  const reusedToolRef = (adapter: ProviderAdapter) =>
    rewriteEvents(adapter, (frame) => {
      const { event } = frame;
      const isTool = "kind" in event && event.kind === "tool_call";
      return [isTool ? { ...frame, event: { ...event, itemRef: "call-1" } } : frame];
    });
  const tools: ScriptStep[] = [
    { type: "tool", name: "first", output: "one" },
    { type: "tool", name: "second", output: "two" },
  ];

  it("are ordinals when the record says the provider exposes none, whatever refs it sends", async () => {
    const { run, events, affordances } = await runOnce({ tools: { exposesToolItemIds: false } }, tools, reusedToolRef);
    expect(run.status).toBe("completed");
    expect(run.items.filter((i) => i.kind === "tool").map((i) => [i.detail?.toolName, i.output])).toEqual([
      ["first", "one"],
      ["second", "two"],
    ]);
    expect(policiesOf(events).filter((p) => p === "tool_ids_by_ordinal")).toHaveLength(1);
    expect(affordances.items.tools.ids).toBe("ordinal");
  });

  it("are the provider's own when it exposes them: a ref used again names the same tool", async () => {
    const { run, events } = await runOnce({}, tools, reusedToolRef);
    expect(run.items.filter((i) => i.kind === "tool").map((i) => i.detail?.toolName)).toEqual(["first"]);
    expect(policiesOf(events)).not.toContain("tool_ids_by_ordinal");
  });
});

describe("plans", () => {
  const plans: ScriptStep[] = [
    { type: "plan", steps: [{ step: "read", status: "in_progress" }] },
    { type: "plan", steps: [{ step: "read", status: "completed" }] },
  ];

  for (const planDeltasHaveItemIds of [false, true]) {
    it(`updates go to one plan by kind, or to the plan their id names (${planDeltasHaveItemIds})`, async () => {
      const { run, events } = await runOnce({ planning: { planDeltasHaveItemIds } }, plans);
      // The scripted provider gives each update an item id of its own when plan deltas have ids.
      expect(idsOf(run, "plan")).toHaveLength(planDeltasHaveItemIds ? 2 : 1);
      expect(run.items.filter((i) => i.kind === "plan").at(-1)?.detail?.steps).toEqual([
        { step: "read", status: "completed" },
      ]);
      expect(policiesOf(events).filter((p) => p === "plan_deltas_by_ordinal")).toHaveLength(
        planDeltasHaveItemIds ? 0 : 1,
      );
    });
  }

  for (const streamsPlanText of [false, true]) {
    it(`text arriving whole is named when plans do not stream (${streamsPlanText})`, async () => {
      const { events, affordances } = await runOnce({ streaming: { streamsPlanText } }, plans);
      expect(policiesOf(events).filter((p) => p === "plan_text_at_completion")).toHaveLength(streamsPlanText ? 0 : 1);
      expect(affordances.items.planText).toBe(streamsPlanText ? "streamed" : "at_completion");
    });
  }
});

describe("every item has one lifecycle, whatever the provider emits", () => {
  it("started, deltas, completed, once each, for a provider that emits the least it can", async () => {
    // Its tools arrive only as their completions (no start, no output deltas, no ids); its messages whole.
    const least: CapabilityOverrides = {
      streaming: {
        streamsAssistantText: false,
        streamsReasoning: false,
        streamsToolOutput: false,
        streamsPlanText: false,
        emitsMessageCompleted: false,
      },
      tools: { emitsToolStarted: false, exposesToolItemIds: false },
    };
    const { run, events } = await runOnce(least, [
      { type: "text", text: "looking" },
      { type: "tool", name: "search", output: OUTPUT },
      { type: "command", command: "make", output: "built" },
      { type: "text", text: "done" },
    ]);
    expect(run.status).toBe("completed");
    const items = run.items.filter((i) => i.kind !== "user_message");
    expect(items.map((i) => [i.kind, lifecycle(events, i.id), i.status])).toEqual([
      ["assistant_message", ["started", "delta", "completed"], "complete"],
      ["tool", ["started", "delta", "completed"], "complete"],
      ["command", ["started", "delta", "completed"], "complete"],
      ["assistant_message", ["started", "delta", "completed"], "complete"],
    ]);
    expect(items.map((i) => i.text ?? i.output)).toEqual(["looking", OUTPUT, "built", "done"]);
    const policies = policiesOf(events);
    expect(new Set(policies).size).toBe(policies.length); // each once per attempt
    expect(policies).toEqual(
      expect.arrayContaining([
        "assistant_text_at_completion",
        "tool_output_at_completion",
        "tool_start_synthesised",
        "tool_ids_by_ordinal",
      ]),
    );
  });
});
