import {
  defineCapabilities,
  parseCapabilities,
  type CapabilityOverrides,
  type FullCapabilities,
  type KnownFields,
  type ProviderCapabilities,
  type WithOverrides,
} from "../../capabilities/index.js";
import { InvalidInputError } from "../../domain/errors.js";

/**
 * The scripted provider's record: whatever it is given (a full record, or overrides of `fullCapabilities()`), since
 * it honours any combination; hosted, less what a host cannot serve.
 */

/** What a scripted provider is given: a full record, or overrides of `fullCapabilities()`. */
export type ScriptedRecord = ProviderCapabilities | CapabilityOverrides;

/**
 * The record type a scripted provider declares for what it is given (`C`): a full record's own type, or
 * `fullCapabilities()`'s with the overrides set; literal where what it is given is (a `const` type parameter). Given
 * only a wide type (`ProviderCapabilities`, `CapabilityOverrides`), the schema's: nothing claimed.
 */
export type ScriptedCapabilities<C extends ScriptedRecord> = C extends ProviderCapabilities
  ? C
  : C extends CapabilityOverrides
    ? WithOverrides<FullCapabilities, C>
    : never;

/** The hosted provider's record type for what it is given: subagent wait and close never declared. */
export type HostedCapabilities<C extends ScriptedRecord> = WithOverrides<
  ScriptedCapabilities<C>,
  { subagents: { canWaitForSubagents: false; canCloseSubagents: false } }
>;

// The signature gives the type (what it was given, as given); `parseCapabilities` checks the value.
export function resolveCapabilities<const C extends ScriptedRecord = {}>(
  input?: C & KnownFields<C>,
): ScriptedCapabilities<C>;
export function resolveCapabilities(input?: ScriptedRecord): unknown {
  if (input && "version" in input) return parseCapabilities(input);
  return defineCapabilities(input ?? {});
}

/**
 * The hosted provider's record. A subagent wait or close does not cross the host's JSON-RPC (a wait's abort signal
 * cannot): never declared. Only a socket host outlives the runtime: no other can keep a request answerable across a
 * restart (refused, typed).
 */
export function hostedCapabilities<C extends ScriptedRecord>(
  input: C | undefined,
  transport: "stdio" | "websocket" | "socket",
): HostedCapabilities<C>;
export function hostedCapabilities(input: ScriptedRecord | undefined, transport: string): unknown {
  const resolved: ProviderCapabilities = resolveCapabilities(input);
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
