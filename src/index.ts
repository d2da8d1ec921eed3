/**
 * Tiller: an embeddable runtime that drives coding-agent providers through one
 * capability-aware contract. This module is the whole public API.
 */
import type { TillerRuntime } from "./runtime/api.js";
import { Runtime, type RuntimeOptions } from "./runtime/runtime.js";

export type { TillerRuntime, Subscriber, WaitForRunOptions } from "./runtime/api.js";
export type { RuntimeOptions, ThreadSnapshot } from "./runtime/runtime.js";
export type { RuntimeFailure, DynamicTool, DynamicToolContext } from "./runtime/options.js";
export type {
  ReadModelState,
  ReadModelSelector,
  ThreadListEntry,
  ThreadModel,
  RunSummary,
} from "./runtime/readModels.js";
/** Equality for `select` when the selector builds a new array or object each time. */
export { shallowEqual } from "@xstate/store";

/** Opens (or creates) a data directory and starts the runtime on it. One runtime per directory. */
export function createRuntime(options: RuntimeOptions): Promise<TillerRuntime> {
  return Runtime.open(options);
}

export * from "./capabilities/index.js";
export * from "./domain/errors.js";
export type * from "./domain/commands.js";
export type { DomainEvent, DomainEventType, DomainEventOf } from "./domain/events.js";
export type {
  RunStatus,
  DispatchMode,
  AttemptStatus,
  RequestStatus,
  TurnTerminalStatus,
  RuntimeMode,
} from "./domain/entities.js";
export type * from "./domain/items.js";
export { sequentialIds, randomIds, type IdSource } from "./domain/ids.js";
export type { LogRecord } from "./runtime/store/eventLog.js";
export type { RunView, ThreadView, TurnItem, RequestView, AttemptView, CheckpointView } from "./runtime/projections.js";
export type { Affordances } from "./runtime/affordances.js";
export type { ItemLifecycle } from "./runtime/ingest/lifecycle.js";
export type { RollbackReceipt } from "./runtime/rollback.js";
export type { UndoSubagentReceipt } from "./runtime/commands/undoSubagent.js";
export { DEGRADATIONS, POLICY_NAMES, type PolicyName } from "./machines/policies.js";
export type * from "./adapters/contract.js";
export { ProviderEventSchema } from "./adapters/contract.js";
export {
  defineAdapter,
  SERVED_BY,
  type AdapterDeclaring,
  type RequiredMethods,
  type Serving,
} from "./adapters/kit/defineAdapter.js";
export {
  createScriptedAdapter,
  createScriptedHostAdapter,
  ScriptedBackend,
  keyedScript,
  echoScript,
  ScriptStepSchema,
  type ScriptedAdapter,
  type ScriptedAdapterOptions,
  type ScriptedCapabilities,
  type ScriptedHostAdapter,
  type HostedCapabilities,
  type ScriptedHostOptions,
  type ScriptedRecord,
  type ScriptStep,
  type ScriptSource,
} from "./adapters/scripted/index.js";
