import { CapabilityUnsupportedError } from "../../domain/errors.js";
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
 * For a provider whose record takes context only as a user message (no developer or system instructions per turn):
 * the messages that go before the user's own. A context delivered otherwise is one the record did not offer: refused,
 * typed, never slipped into the prompt under another role.
 */
export function userContextMessages(context: HandoffContext | null | undefined, provider: string): string[] {
  const delivered = deliverContext(context);
  if (delivered.instructions) {
    const { role } = delivered.instructions;
    const capability = role === "developer" ? "context.acceptsDeveloperContext" : "context.acceptsSystemContext";
    throw new CapabilityUnsupportedError(capability, `${provider} takes no ${role} context per turn`);
  }
  return delivered.userMessages;
}

/** For such a provider taking one prompt a turn: the context's messages, then the user's own text. */
export function userPrompt(context: HandoffContext | null | undefined, text: string, provider: string): string {
  return [...userContextMessages(context, provider), text].join("\n\n");
}
