import type { ProviderCapabilities } from "../capabilities/index.js";
import type { DispatchMode, RuntimeMode } from "../domain/entities.js";

/** The thread machine's context, input and events, and the run record it writes. */

/** A run waiting in a queue (the runtime's, or the provider's own), with its target and that target's record. */
export interface QueuedRun {
  runId: string;
  providerTarget: string;
  capabilities: ProviderCapabilities;
}

export interface ThreadContext {
  threadId: string;
  allowSessionStopInterrupt: boolean;
  activeRunId: string | null;
  /** Capabilities of the active run's target: what steering and restart decisions read. */
  activeCapabilities: ProviderCapabilities | null;
  queue: QueuedRun[];
  /** Runs handed to the provider, which holds them in its own queue behind the active run (in order). */
  delivered: QueuedRun[];
  /** The active run's provider target: only its own follow-ups can wait in its queue. */
  activeTarget: string | null;
  /** The model or mode changed since the active run started: its follow-ups need other settings than its session's. */
  settingsChanged: boolean;
  /** Ordinal the next created run gets (1-based, counted per thread). */
  nextOrdinal: number;
}

export interface ThreadInput {
  threadId: string;
  allowSessionStopInterrupt?: boolean;
  /** Rehydration after a restart: runs already created, and the queue to resume. */
  nextOrdinal?: number;
  queue?: QueuedRun[];
}

export type ThreadEvent =
  | {
      type: "SUBMIT";
      runId: string;
      messageId: string;
      text: string;
      mode: DispatchMode;
      providerTarget: string;
      capabilities: ProviderCapabilities;
    }
  | { type: "RUN_FINISHED"; runId: string }
  /** The active run's session announced its capability record (it may differ from the declared one). */
  | { type: "RUN_CAPABILITIES"; runId: string; capabilities: ProviderCapabilities }
  /** Resume work after a restart (queued runs recovered from the log). */
  | { type: "RESUME" }
  /** Recovery re-attached this run to its provider turn, which outlived the runtime: it is the active run again. */
  | ({ type: "REATTACHED" } & QueuedRun)
  /** Later runs use another model. */
  | { type: "CHANGE_MODEL"; model: string; capabilities: ProviderCapabilities }
  /** Later runs work in another runtime mode (plan mode, approval policy). */
  | { type: "CHANGE_MODE"; runtimeMode: RuntimeMode; capabilities: ProviderCapabilities }
  /** Roll the thread back to the end of run `toRunId` (see RollbackRequest). */
  | ({ type: "ROLLBACK" } & RollbackRequest)
  | { type: "ROLLBACK_DONE" };

/** What a rollback must undo, as the runtime found it in the projection. */
export interface RollbackRequest {
  toRunId: string;
  /** Capabilities of the provider thread that ran the later runs. */
  capabilities: ProviderCapabilities;
  /** A ready post-run checkpoint of `toRunId` exists. */
  hasCheckpoint: boolean;
  /** Provider turns the later runs left on the current provider thread. */
  laterTurns: number;
  /** Some later runs ran on another provider thread (another target, or a replaced thread). */
  laterElsewhere: boolean;
}

/** The `run.created` record of a submitted message. */
export function runCreated(context: ThreadContext, event: Extract<ThreadEvent, { type: "SUBMIT" }>) {
  return {
    type: "run.created" as const,
    threadId: context.threadId,
    runId: event.runId,
    ordinal: context.nextOrdinal,
    providerTarget: event.providerTarget,
    userMessageId: event.messageId,
    text: event.text,
    mode: event.mode,
  };
}
