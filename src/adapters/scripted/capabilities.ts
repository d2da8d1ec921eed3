import {
  defineCapabilities,
  parseCapabilities,
  type CapabilityOverrides,
  type ProviderCapabilities,
} from "../../capabilities/index.js";
import { InvalidInputError } from "../../domain/errors.js";

/**
 * The scripted provider's record: whatever it is given (a full record, or overrides of `fullCapabilities()`), since
 * it honours any combination; hosted, less what a host cannot serve.
 */

export function resolveCapabilities(
  input: ProviderCapabilities | CapabilityOverrides | undefined,
): ProviderCapabilities {
  if (input && "version" in input) return parseCapabilities(input);
  return defineCapabilities(input ?? {});
}

/**
 * The hosted provider's record. A subagent wait or close does not cross the host's JSON-RPC (a wait's abort signal
 * cannot): never declared. Only a socket host outlives the runtime: no other can keep a request answerable across a
 * restart (refused, typed).
 */
export function hostedCapabilities(
  input: ProviderCapabilities | CapabilityOverrides | undefined,
  transport: "stdio" | "websocket" | "socket",
): ProviderCapabilities {
  const resolved = resolveCapabilities(input);
  if (resolved.sessions.pendingRequestsSurviveRestart && transport !== "socket")
    throw new InvalidInputError(
      "capabilities.sessions.pendingRequestsSurviveRestart",
      `a ${transport} host dies with the runtime: its pending requests cannot survive a restart (use transport socket)`,
    );
  return {
    ...resolved,
    subagents: { ...resolved.subagents, canWaitForSubagents: false, canCloseSubagents: false },
  };
}
