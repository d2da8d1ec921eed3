import type { ProviderAdapter } from "../adapters/contract.js";
import { CapabilityUnsupportedError, ConflictError, InvalidInputError, NotResumableError, type TillerError } from "../domain/errors.js";
import type { Outcome } from "../machines/emitted.js";

/** Turning what the machines decided into typed results (or typed errors) for API callers. */

export function validateOptions(options: { providers: Record<string, ProviderAdapter>; dataDir?: string | undefined }): void {
  if (typeof options !== "object" || options === null) throw new InvalidInputError("options", "expected an object");
  if (typeof options.providers !== "object" || options.providers === null || Object.keys(options.providers).length === 0) {
    throw new InvalidInputError("providers", "configure at least one provider target");
  }
  for (const [id, adapter] of Object.entries(options.providers)) {
    if (!/^[A-Za-z0-9][A-Za-z0-9._-]*$/.test(id)) throw new InvalidInputError(`providers.${id}`, "target ids are letters, digits, . _ -");
    for (const method of ["getCapabilities", "startSession", "ensureProviderThread", "sendRun", "interrupt", "respondToRequest", "streamEvents", "stopSession", "close"] as const) {
      if (typeof adapter?.[method] !== "function") throw new InvalidInputError(`providers.${id}.${method}`, "adapter method missing");
    }
  }
  if (options.dataDir !== undefined && (typeof options.dataDir !== "string" || options.dataDir.length === 0)) {
    throw new InvalidInputError("dataDir", "expected a non-empty path");
  }
}

type Refusal = Extract<Outcome, { refused: string }>;

export function expectOutcome<C extends Outcome["command"]>(outcomes: Outcome[], command: C): Extract<Outcome, { command: C }> | Refusal {
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
