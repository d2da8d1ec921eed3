import type { HandoffContext } from "../contract.js";

/**
 * A turn's explicit context (a handoff, a fork's history, a rebuilt thread), placed where its `delivery` says, with
 * its header written here once. The runtime chose the delivery from the record's `context` group (developer, else
 * system, else a synthetic user message, recorded as `handoff_as_user_context`); an adapter puts `instructions` where
 * its protocol takes developer or system instructions for the turn, and sends `userMessages` before the user's own.
 */
export interface DeliveredContext {
  /** Developer or system instructions for this turn; null when it goes in as a user message (or there is none). */
  instructions: { role: "developer" | "system"; text: string } | null;
  /** User messages that go before the user's own text, in order. */
  userMessages: string[];
}

/** The header every delivery of a context starts with. */
export function contextHeader(kind: HandoffContext["kind"]): string {
  return `Context from earlier in this conversation (${kind}):\n`;
}

export function deliverContext(context: HandoffContext | null | undefined): DeliveredContext {
  if (!context) return { instructions: null, userMessages: [] };
  const text = contextHeader(context.kind) + context.text;
  if (context.delivery === "synthetic_user") return { instructions: null, userMessages: [text] };
  return { instructions: { role: context.delivery, text }, userMessages: [] };
}

/**
 * The user's text with the context before it, for a provider that takes one prompt a turn: the synthetic user message
 * and the user's own, one after the other. Only for `synthetic_user` delivery; instructions go where the protocol
 * takes them.
 */
export function withUserContext(delivered: DeliveredContext, text: string): string {
  return [...delivered.userMessages, text].join("\n\n");
}
