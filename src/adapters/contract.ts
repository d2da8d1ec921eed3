import { z } from "zod";
import type { ProviderCapabilities } from "../capabilities/schema.js";
import type { HostLeases } from "./kit/hostSpec.js";
import { TurnTerminalStatusSchema, type RuntimeMode, type TurnTerminalStatus } from "../domain/entities.js";
import {
  ItemDetailSchema,
  ItemStatusSchema,
  ItemStreamSchema,
  PlanStepSchema,
  ProviderItemKindSchema,
  RequestPayloadSchema,
  TodoItemSchema,
  type RequestResponse,
} from "../domain/items.js";

/**
 * The contract every provider adapter implements, and the normalized provider events it
 * streams. Events carry native refs (evidence); the normalizer turns them into app ids.
 * A ref is absent when the provider does not expose it (identity `none`). What the events
 * say (item kinds, request payloads, how a turn ends) is the domain's vocabulary.
 */

const ref = z.string().min(1);
const where = {
  /** Native thread the event belongs to; for a subagent's child turn, the child thread. */
  threadRef: ref.optional(),
  turnRef: ref.optional(),
};

export const ProviderEventSchema = z.discriminatedUnion("type", [
  z.strictObject({
    type: z.literal("session.state"),
    /** `idle` ends the open turn of a provider without reliable terminals; `stopped` and `error` lose the session. */
    state: z.enum(["ready", "idle", "stopped", "error"]),
    message: z.string().optional(),
  }),
  z.strictObject({ type: z.literal("turn.started"), ...where }),
  z.strictObject({
    type: z.literal("turn.terminal"),
    ...where,
    status: TurnTerminalStatusSchema,
    threadDisposition: z.enum(["reusable", "broken"]),
    failureClass: z.string().nullable().default(null),
    message: z.string().nullable().default(null),
    retryable: z.boolean().default(false),
  }),
  z.strictObject({
    type: z.literal("item.started"),
    ...where,
    itemRef: ref.optional(),
    /**
     * Native parent item (a subagent's item for its child turn's items); `null`: the provider says the item is the
     * turn's own, at its root, even while a subagent runs beside it. Absent: not said (the innermost open subagent).
     */
    parentItemRef: ref.nullable().optional(),
    kind: ProviderItemKindSchema,
    detail: ItemDetailSchema.optional(),
  }),
  z.strictObject({
    type: z.literal("item.delta"),
    ...where,
    itemRef: ref.optional(),
    kind: ProviderItemKindSchema,
    stream: ItemStreamSchema,
    delta: z.string(),
  }),
  z.strictObject({
    type: z.literal("item.completed"),
    ...where,
    itemRef: ref.optional(),
    kind: ProviderItemKindSchema,
    status: ItemStatusSchema,
    /** Full text for providers that do not stream (or as the authoritative final text). */
    text: z.string().optional(),
    output: z.string().optional(),
    exitCode: z.number().int().nullable().optional(),
  }),
  z.strictObject({
    type: z.literal("plan.updated"),
    ...where,
    itemRef: ref.optional(),
    explanation: z.string().optional(),
    steps: z.array(PlanStepSchema),
  }),
  z.strictObject({ type: z.literal("plan.proposed"), ...where, itemRef: ref.optional(), text: z.string() }),
  z.strictObject({
    type: z.literal("todo.updated"),
    ...where,
    itemRef: ref.optional(),
    items: z.array(TodoItemSchema),
  }),
  z.strictObject({
    type: z.literal("request.opened"),
    ...where,
    requestRef: ref.optional(),
    itemRef: ref.optional(),
    request: RequestPayloadSchema,
  }),
  z.strictObject({
    type: z.literal("request.resolved"),
    ...where,
    requestRef: ref.optional(),
    outcome: z.string().optional(),
  }),
  z.strictObject({
    type: z.literal("subagent.started"),
    ...where,
    itemRef: ref.optional(),
    childThreadRef: ref.optional(),
    agent: z.string(),
    prompt: z.string().optional(),
  }),
  z.strictObject({
    type: z.literal("subagent.completed"),
    ...where,
    itemRef: ref.optional(),
    childThreadRef: ref.optional(),
    status: TurnTerminalStatusSchema,
    result: z.string().optional(),
  }),
  z.strictObject({ type: z.literal("warning"), ...where, message: z.string() }),
]);
export type ProviderEvent = z.infer<typeof ProviderEventSchema>;
export type ProviderEventType = ProviderEvent["type"];

/** What `streamEvents()` yields: a normalized event tagged with the app session it came from. */
export interface ProviderAdapterEvent {
  sessionId: string;
  event: ProviderEvent;
}

/** Opaque handle the adapter needs to address a provider thread again. */
export interface ProviderThreadHandle {
  /** Native thread id when the provider exposes one (evidence, never identity). */
  threadRef: string | null;
  /** What `ensureProviderThread({ resume })` needs to reattach later; persisted by the runtime. */
  resumeCursor: string;
}

/**
 * A provider thread as every call names it: the handle the adapter returned, with its app
 * thread's working directory (added by the runtime), where its tools run and where a provider
 * that keeps its sessions per directory finds it. An adapter never falls back to its own
 * process's working directory: after a restart nothing else tells it where a thread lives.
 */
export interface ProviderThreadAddress extends ProviderThreadHandle {
  cwd: string;
}

export interface ProviderSessionInfo {
  sessionId: string;
  capabilities: ProviderCapabilities;
  /** Bumped every time the provider host process is (re)started. */
  hostGeneration: number;
}

/**
 * A session that outlived the runtime (its host survived a runtime restart), as the provider
 * holds it now: the turns it still runs, each with the requests it waits on. The runtime
 * re-attaches a run only where this matches its log exactly (nothing happened in between).
 */
export interface ReattachedSession extends ProviderSessionInfo {
  turns: Array<{
    /** The provider thread's native ref (null where the provider names none). */
    threadRef: string | null;
    turnRef: string | null;
    /** Requests the turn waits on, addressed as in `request.opened`. */
    pendingRequests: Array<{ requestRef: string | null; ordinal: number }>;
  }>;
}

/** Context the runtime hands a provider thread: a handoff summary or a portable fork. */
export interface HandoffContext {
  kind: "handoff" | "fork" | "rebuild";
  text: string;
  /** How the provider should receive it; chosen by the runtime from the context capabilities. */
  delivery: "system" | "developer" | "synthetic_user";
}

/** Native address of a request: its native id when it has one, else its ordinal in the turn. */
export interface ProviderRequestAddress {
  requestRef: string | null;
  turnRef: string | null;
  ordinal: number;
}

export interface ProviderThreadSnapshot {
  threadRef: string | null;
  turns: ReadonlyArray<{
    turnRef: string | null;
    status: TurnTerminalStatus | "running";
    userText: string;
    assistantText: string;
  }>;
}

/** What the provider may do without asking: honoured by providers that sandbox their tools. */
export type SandboxPolicy = "read-only" | "workspace-write" | "full-access";

/** What a provider rollback leaves behind. */
export interface RollbackResult {
  /** The conversation after the cut, when the provider returns it. */
  snapshot?: ProviderThreadSnapshot;
  /**
   * Where the conversation lives now, when the cut moved it to a new native thread: the runtime rebinds its provider
   * thread there.
   */
  handle?: ProviderThreadHandle;
}

export interface StartSessionInput {
  sessionId: string;
  /** The working directory of the thread that needs the session; every thread call carries its own thread's. */
  cwd: string;
  model: string | null;
  /**
   * The mode the session starts in. A provider that cannot switch modes in session
   * (`sessions.supportsRuntimeModeSwitchInSession` false) keeps it: a mode change gets a new session.
   */
  runtimeMode?: RuntimeMode;
  /** The runtime always passes it; an adapter called directly falls back to its own default. */
  sandbox?: SandboxPolicy;
  /**
   * The embedder's tools the provider may call back (`tools.supportsDynamicToolCallbacks`): offered to the model for
   * the session's threads; a call arrives as a `dynamic_tool` request, answered by the runtime with a `tool_result`.
   * Absent where the record says the provider takes no callbacks, or none are registered.
   */
  tools?: DynamicToolDefinition[];
}

/** A tool the embedder registered, as a provider is told of it (its handler stays with the runtime). */
export interface DynamicToolDefinition {
  name: string;
  description: string;
  /** A JSON schema object describing the tool's input. */
  inputSchema: Record<string, unknown>;
}

export interface EnsureThreadInput {
  sessionId: string;
  /** The app thread's working directory; every later call on the thread carries it in its address. */
  cwd: string;
  /** Resume is a required primitive: resume from this cursor or throw ResumeFailedError. */
  resume?: { cursor: string };
}

export interface SendRunInput {
  sessionId: string;
  thread: ProviderThreadAddress;
  text: string;
  context: HandoffContext | null;
  model: string | null;
  /** The turn's mode (absent: the default); the session's own where the provider cannot switch modes in session. */
  runtimeMode?: RuntimeMode;
  /**
   * The provider creates the thread with this turn (`threads.canCreateEmptyThread` false: the
   * runtime never asked for an empty one). `thread` then carries only its cwd; the reply names the
   * thread it made.
   */
  newThread?: boolean;
}

export interface TurnAddress {
  sessionId: string;
  thread: ProviderThreadAddress;
  /** Native turn id if the provider exposes one. */
  turnRef: string | null;
}

/**
 * A subagent's child thread, named by the ref the provider gave it (`subagent.started`'s `childThreadRef`), in the
 * session and under the parent provider thread it runs in.
 */
export interface SubagentAddress {
  sessionId: string;
  /** The parent provider thread whose turn started the subagent. */
  thread: ProviderThreadAddress;
  childThreadRef: string;
}

export interface ProviderAdapter {
  /** Provider kind, e.g. "scripted"; used for display and diagnostics only. */
  readonly provider: string;
  getCapabilities(): ProviderCapabilities;
  startSession(input: StartSessionInput): Promise<ProviderSessionInfo>;
  stopSession(input: { sessionId: string }): Promise<void>;
  ensureProviderThread(input: EnsureThreadInput): Promise<ProviderThreadHandle>;
  /**
   * Starts a turn; resolves once the provider accepted it (not when it finishes). For a
   * `newThread` turn, `thread` is the thread it created with it.
   */
  sendRun(input: SendRunInput): Promise<{ turnRef: string | null; thread?: ProviderThreadHandle }>;
  /** Present only when `turns.supportsActiveSteering`. */
  steerRun?(input: TurnAddress & { text: string }): Promise<void>;
  /** Resolves on acknowledgement; the terminal arrives later as a `turn.terminal` event. */
  interrupt(input: TurnAddress): Promise<void>;
  /**
   * Whether the provider still runs this turn (it still owes a terminal). The runtime asks when
   * a turn has been silent for `turnSilenceMs`; without this method, or when it cannot say,
   * a silent turn is failed as `turn_silent`.
   */
  isTurnAlive?(input: TurnAddress): Promise<boolean>;
  respondToRequest(input: {
    sessionId: string;
    thread: ProviderThreadAddress;
    request: ProviderRequestAddress;
    response: RequestResponse;
  }): Promise<void>;
  /** Present only when `threads.canReadThreadSnapshot`. */
  readThreadSnapshot?(input: { sessionId: string; thread: ProviderThreadAddress }): Promise<ProviderThreadSnapshot>;
  /** Present only when `threads.canRollbackThread`: drops the last `turns` turns. */
  rollbackThread?(input: {
    sessionId: string;
    thread: ProviderThreadAddress;
    turns: number;
  }): Promise<RollbackResult | void>;
  /**
   * Present only when `context.canGenerateSummaries`: condenses a conversation transcript (the
   * runtime's, of runs the provider may never have seen) into a summary of at most `maxChars`,
   * for a handoff to this provider. The runtime bounds what comes back.
   */
  summarize?(input: { sessionId: string; transcript: string; maxChars: number }): Promise<string>;
  /** Present only when `threads.canForkThread`. */
  forkThread?(input: {
    sessionId: string;
    /**
     * The parent thread; a subagent's child thread (`threads.canForkFromSubagentThread`) is addressed by its ref, as
     * both `threadRef` and `resumeCursor`.
     */
    thread: ProviderThreadAddress;
    /** The fork's working directory (its app thread's), where its tools run. */
    cwd: string;
    /** Fork after this native turn; null forks the whole thread. */
    afterTurnRef: string | null;
  }): Promise<ProviderThreadHandle>;
  /**
   * Present only when `subagents.canWaitForSubagents`: resolves once the subagent has ended (its lifecycle events are
   * on their way), with how it ended; `signal` aborts the wait (the subagent goes on).
   */
  waitForSubagent?(input: SubagentAddress & { signal: AbortSignal }): Promise<{ status: TurnTerminalStatus }>;
  /**
   * Present only when `subagents.canCloseSubagents`: stops a running subagent, leaving its parent turn running.
   * Resolves on acknowledgement; the subagent's end arrives later as its events (`interrupted`).
   */
  closeSubagent?(input: SubagentAddress): Promise<void>;
  /**
   * Present only when `sessions.pendingRequestsSurviveRestart`: takes up a session a previous life
   * of the runtime started, in a host that outlived it. Null when the provider no longer has it.
   */
  reattachSession?(input: { sessionId: string }): Promise<ReattachedSession | null>;
  /**
   * Adapters whose provider runs in a host process receive the runtime's host registry at
   * open: they lease hosts from it instead of spawning their own.
   */
  bindHosts?(hosts: HostLeases, target: string): void;
  /**
   * Adapters whose provider runs in a host process: starts (leases, then gives back) the target's host now, so the
   * first session finds it running; unused, it goes at the registry's idle release like any host. Resolves once the
   * host is ready; rejects (typed) when it could not be started. The runtime's `prewarm` option calls it after open.
   */
  prewarm?(): Promise<void>;
  /**
   * Present where the record comes from the provider's handshake and the adapter cannot know it before one (an ACP
   * agent's): the runtime awaits it at open, after `bindHosts` and before it reads `getCapabilities()`, which then
   * gives the negotiated record. It resolves once a host is up and its handshake done (the host then goes at the
   * registry's idle release, as a prewarmed one does); it rejects (typed) where none can be, and open fails with it.
   */
  negotiate?(): Promise<void>;
  /** One consumer; yields events in provider order until `close()`. */
  streamEvents(): AsyncIterable<ProviderAdapterEvent>;
  close(): Promise<void>;
}
