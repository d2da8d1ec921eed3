import { CapabilityUnsupportedError, ConflictError, NotResumableError, type TillerError } from "../../domain/errors.js";
import type { Outcome } from "../../machines/emitted.js";

/** Turning what the machines decided into typed results (or typed errors) for API callers. */

type Refusal = Extract<Outcome, { refused: string }>;

export function expectOutcome<C extends Outcome["command"]>(
  outcomes: Outcome[],
  command: C,
): Extract<Outcome, { command: C }> | Refusal {
  const found = outcomes.find((o) => o.command === command);
  if (!found) throw new ConflictError(`${command} was not accepted in the current state`);
  return found as Extract<Outcome, { command: C }> | Refusal;
}

export function refusal(outcome: Outcome): TillerError {
  if ("refused" in outcome) {
    if (outcome.refused === "capability_unsupported") {
      return new CapabilityUnsupportedError(outcome.capability, outcome.detail, { fallback: "refused" });
    }
    if (outcome.refused === "not_resumable") return new NotResumableError(outcome.detail);
    return new ConflictError(outcome.detail);
  }
  return new ConflictError(`unexpected outcome for ${outcome.command}`);
}
