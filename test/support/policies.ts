import { expect } from "vitest";
import {
  createScriptedAdapter,
  TillerError,
  type CapabilityOverrides,
  type ScriptSource,
  type ScriptStep,
  type TillerErrorCode,
  type TillerRuntime,
} from "../../src/index.js";
import type { ProviderAdapter } from "../../src/adapters/contract.js";
import type { BackendThread, ScriptedBackend } from "../../src/adapters/scripted/host/backend.js";
import type { DomainEvent, DomainEventOf } from "../../src/domain/events.js";
import type { LogRecord } from "../../src/runtime/store/eventLog.js";
import { nextEvent, ofType, rejection } from "./runtime.js";

/**
 * Scripted providers with capability overrides, what their backend holds, and the degradation records the policy tests
 * compare.
 */

export const hang: ScriptStep[] = [{ type: "text", text: "working" }, { type: "hang" }];

/** A provider without any structured approval. */
export const noApprovals: CapabilityOverrides = {
  approvals: {
    supportsCommandApproval: false,
    supportsFileReadApproval: false,
    supportsFileChangeApproval: false,
    supportsApplyPatchApproval: false,
  },
};

/** A scripted adapter with capability overrides, a script (default: echo) and optionally a shared backend. */
export function scripted(
  capabilities: CapabilityOverrides = {},
  script?: ScriptSource,
  backend?: ScriptedBackend,
): ProviderAdapter {
  return createScriptedAdapter({ capabilities, ...(script ? { script } : {}), ...(backend ? { backend } : {}) });
}

/** A backend thread's turns as [user text, kind of the context sent with it]. */
export const turns = (thread: BackendThread) => thread.turns.map((t) => [t.userText, t.context?.kind ?? null]);
/** The turns of every thread a backend holds. */
export const allTurns = (backend: ScriptedBackend) => [...backend.threads.values()].map(turns);
/** The backend thread that holds a turn with this user text. */
export const holding = (backend: ScriptedBackend, text: string) =>
  [...backend.threads.values()].find((t) => t.turns.some((turn) => turn.userText === text))!;

/** Resolves once the run's turn streams (it is active, not starting). */
export const streaming = (rt: TillerRuntime, runId: string) => nextEvent(rt, "node.delta", (e) => e.runId === runId);

/** The fields of a policy record the tests compare. */
export const row = (p: {
  threadId: string | null;
  runId: string | null;
  capability: string | null;
  outcome: string;
}) => [p.threadId, p.runId, p.capability, p.outcome];

/** The `policy.applied` records of one named policy, in log order. */
export function policies(records: LogRecord<DomainEvent>[], policy: string): DomainEventOf<"policy.applied">[] {
  return ofType(records, "policy.applied").filter((e) => e.policy === policy);
}

/** Awaits a rejection and checks it is a TillerError with this code. */
export async function rejectsWith(promise: Promise<unknown>, code: TillerErrorCode): Promise<TillerError> {
  const error = await rejection(promise);
  expect(error).toBeInstanceOf(TillerError);
  expect((error as TillerError).code).toBe(code);
  return error as TillerError;
}
