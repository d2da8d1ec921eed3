import type { ProviderCapabilities } from "../capabilities/schema.js";
import type {
  CloseSubagentInput,
  CloseSubagentReceipt,
  CreateThreadInput,
  CreateThreadReceipt,
  ForkReceipt,
  ForkThreadInput,
  InterruptInput,
  InterruptReceipt,
  RespondInput,
  RespondReceipt,
  RollbackInput,
  SendMessageInput,
  SendMessageReceipt,
  SubscribeInput,
  SubagentOutcome,
  UndoSubagentInput,
  ImplementPlanInput,
  WaitForSubagentInput,
} from "../domain/commands.js";
import type { DomainEvent } from "../domain/events.js";
import type { Affordances } from "./affordances.js";
import type { RunView } from "./projections.js";
import type { ReadModelSelector } from "./readModels.js";
import type { RollbackReceipt } from "./rollback.js";
import type { UndoSubagentReceipt } from "./commands/undoSubagent.js";
import type { ThreadSnapshot } from "./snapshot.js";
import type { EventLog, LogRecord } from "./store/eventLog.js";

/**
 * The runtime as an embedding app sees it: commands (each with an id, a durable receipt, and
 * exactly-once under a repeated id), reads, and the event stream. Everything else (read
 * models, actors, host processes) is internal.
 */

export type Subscriber = (record: LogRecord<DomainEvent>) => void;

export interface WaitForRunOptions {
  /** Give up after this long (`timeout`); the run goes on. */
  timeoutMs?: number;
  /** Give up when this aborts (rejects with its reason); the run goes on. */
  signal?: AbortSignal;
}

export interface TillerRuntime {
  /** The data directory this runtime is the one writer of. */
  readonly dataDir: string;
  /** The live inspector's page (token included), when the runtime started one. */
  readonly inspectorUrl: string | null;
  /** The seq of the latest record: subscribe with `afterSeq: head` to hear only what follows. */
  readonly head: number;
  readonly closed: boolean;
  /** What opening the log found: the records it kept, and the tail it cut, if any. */
  readonly recovery: EventLog<DomainEvent>["recovery"];

  createThread(input: CreateThreadInput): Promise<CreateThreadReceipt>;
  /** Starts a run, queues it, or steers or restarts the active one (`mode`). */
  sendMessage(input: SendMessageInput): Promise<SendMessageReceipt>;
  interrupt(input: InterruptInput): Promise<InterruptReceipt>;
  /** Answers an approval or a question. */
  respond(input: RespondInput): Promise<RespondReceipt>;
  forkThread(input: ForkThreadInput): Promise<ForkReceipt>;
  rollback(input: RollbackInput): Promise<RollbackReceipt & { commandId: string }>;
  /**
   * Undoes one subagent's file edits (the files its nested checkpoint scope changed go back to how they were before
   * it ran), leaving the rest of its run's; the provider's conversation is kept. Needs `checkpoints`.
   */
  undoSubagent(input: UndoSubagentInput): Promise<UndoSubagentReceipt & { commandId: string }>;
  /**
   * Carries out a plan the provider proposed (an item of kind `proposed_plan`; `affordances().plans`): a run, queued
   * behind the active one, that implements it out of plan mode. `not_found` for an unknown item, `conflict` for an
   * item that is not a proposed plan.
   */
  implementPlan(input: ImplementPlanInput): Promise<SendMessageReceipt>;
  /**
   * Resolves once the subagent (an item of kind `subagent`) has ended, with how, the provider asked to wait for it.
   * Needs `subagents.canWaitForSubagents` and an addressable subagent (`subagents.exposesSubagentThreadIds`), else
   * `capability_unsupported` (`subagent_wait_unsupported`); `timeoutMs` rejects with `timeout` (the subagent goes on).
   */
  waitForSubagent(input: WaitForSubagentInput): Promise<SubagentOutcome>;
  /**
   * Asks the provider to close a running subagent (once, however many ask), its run going on. Needs
   * `subagents.canCloseSubagents` and an addressable subagent, else `capability_unsupported`
   * (`subagent_close_unsupported`).
   */
  closeSubagent(input: CloseSubagentInput): Promise<CloseSubagentReceipt>;

  /** What a client may offer for this thread now (fork, interrupt, rollback, approvals, panels), and why not. */
  affordances(threadId: string): Affordances;
  /** A consistent read model of one thread, returned once it is durable. */
  readThread(threadId: string): Promise<ThreadSnapshot>;
  listThreads(): Array<{ threadId: string; title: string; providerTarget: string; runs: number }>;
  /** The capability record in force for a target (the live session's, else the adapter's declared one). */
  capabilities(providerTarget: string): ProviderCapabilities;
  /** Durable events after `afterSeq` (all threads, or one), then live ones, in order, once each. */
  subscribe(input: SubscribeInput, listener: Subscriber): () => void;
  /**
   * Subscribes to a part of the read models a UI shows: the thread list, each thread's header,
   * run statuses and panels, the pending requests (`ReadModelState`). `listener` receives the
   * selected value once, then each time it changes by `equal` (default `Object.is`; pass
   * `shallowEqual`, exported by this package, when the selector builds a new array or object). Never
   * on a text delta: streamed text is not in these models (`readThread`, `subscribe`).
   * Values are frozen copies, delivered asynchronously once the records they reflect are
   * durable. Returns unsubscribe.
   */
  select<T>(selector: ReadModelSelector<T>, listener: (value: T) => void, equal?: (a: T, b: T) => boolean): () => void;
  /** Resolves with the run once it is terminal and durable. */
  waitForRun(runId: string, options?: WaitForRunOptions): Promise<RunView>;
  /** Stops providers, cancels what still runs, flushes, unlocks. Idempotent. */
  close(): Promise<void>;
}
