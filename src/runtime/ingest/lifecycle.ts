import type { ProviderCapabilities } from "../../capabilities/schema.js";
import { closesMessagesAtRootTerminal } from "../../capabilities/predicates.js";
import { itemIdStrength } from "./correlation.js";

/**
 * What a turn's items will look like on the event log, read from the capability record alone (so a UI knows it
 * before the first turn). Whatever the provider emits, every item has one lifecycle (`node.started`, its deltas,
 * `node.completed`): this says which parts come from the provider and which the normalizer makes. The normalizer
 * decides by the same record, so the affordance and the log never disagree.
 */
export interface ItemLifecycle {
  /** Streamed as it is written, or whole at the message's completion (as one delta). */
  assistantText: "streamed" | "at_completion";
  reasoning: "streamed" | "at_completion";
  /**
   * A plan's text: streamed as the provider writes it, or whole with each update. The adapter contract carries plans
   * as whole updates only (`plan.updated`, `plan.proposed`), so a streamed plan reaches the log as its updates.
   */
  planText: "streamed" | "at_completion";
  /** A tool's output: streamed, whole at its completion (as one delta), or never (the provider reports none). */
  toolOutput: "streamed" | "at_completion" | "none";
  /** An assistant message ends by the provider's own event, or when its turn ends. */
  messageCompleted: "native" | "at_terminal";
  tools: {
    /** Started by the provider, or by the normalizer when the tool's first delta or its completion arrives. */
    started: "native" | "synthesised";
    /** Completed by the provider, or closed (with the turn's status) when the turn ends. */
    completed: "native" | "at_terminal";
    /** Correlated by the provider's item ids, or by their order in the turn. */
    ids: "native" | "ordinal";
  };
}

export function itemLifecycle(caps: ProviderCapabilities): ItemLifecycle {
  const { streaming, tools } = caps;
  const delivery = (streams: boolean) => (streams ? "streamed" : "at_completion");
  return {
    assistantText: delivery(streaming.streamsAssistantText),
    reasoning: delivery(streaming.streamsReasoning),
    planText: delivery(streaming.streamsPlanText),
    toolOutput: tools.emitsToolOutput ? delivery(streaming.streamsToolOutput) : "none",
    messageCompleted: closesMessagesAtRootTerminal(caps) ? "at_terminal" : "native",
    tools: {
      started: tools.emitsToolStarted ? "native" : "synthesised",
      completed: tools.emitsToolCompleted ? "native" : "at_terminal",
      ids: itemIdStrength(caps, "tool_call") === "none" ? "ordinal" : "native",
    },
  };
}
