import { z } from "zod";
import { ProviderCapabilitiesSchema } from "../capabilities/schema.js";
import {
  AttemptReasonSchema,
  ChangedFileSchema,
  CheckpointPhaseSchema,
  CheckpointScopeSchema,
  AttemptStatusSchema,
  DispatchModeSchema,
  FailureSchema,
  LineageSchema,
  NodeStatusSchema,
  ResponseCapabilitySchema,
  RunStatusSchema,
  RuntimeModeSchema,
  SessionStatusSchema,
  TerminalRunStatusSchema,
} from "./entities.js";
import {
  ItemDetailSchema,
  ItemStatusSchema,
  ItemStreamSchema,
  NodeKindSchema,
  PlanStepSchema,
  RequestPayloadSchema,
  RequestResponseSchema,
  TodoItemSchema,
} from "./items.js";

/**
 * Domain events: what the runtime commits to the log. Projections are folds of these;
 * nothing else is needed to rebuild the runtime's state after a crash.
 */

const id = z.string().min(1);
const inThread = { threadId: id };
const inRun = { threadId: id, runId: id };

export const DomainEventSchema = z.discriminatedUnion("type", [
  z.strictObject({
    type: z.literal("thread.created"),
    ...inThread,
    title: z.string(),
    cwd: z.string(),
    providerTarget: id,
    model: z.string().nullable(),
    lineage: LineageSchema.nullable(),
  }),
  z.strictObject({
    type: z.literal("run.created"),
    ...inRun,
    ordinal: z.number().int().positive(),
    providerTarget: id,
    userMessageId: id,
    text: z.string(),
    mode: DispatchModeSchema,
  }),
  z.strictObject({ type: z.literal("run.state"), ...inRun, status: RunStatusSchema }),
  z.strictObject({
    type: z.literal("run.terminal"),
    ...inRun,
    status: TerminalRunStatusSchema,
    reason: z.string().nullable(),
    failure: FailureSchema.nullable(),
    /**
     * How the run's end is known: the provider's terminal with the strength its record declares
     * (`strong`, `weak`), inferred when its session went idle (`inferred`), or decided by the runtime
     * (cancelled, its session lost, its start failed: `runtime`).
     */
    correlation: z.enum(["strong", "weak", "inferred", "runtime"]).default("runtime"),
  }),
  z.strictObject({
    type: z.literal("attempt.started"),
    ...inRun,
    attemptId: id,
    ordinal: z.number().int().positive(),
    reason: AttemptReasonSchema,
    rootNodeId: id,
    text: z.string(),
  }),
  z.strictObject({
    type: z.literal("attempt.turn_bound"),
    ...inRun,
    attemptId: id,
    providerThreadId: id,
    providerTurnId: id,
    nativeTurnRef: z.string().nullable(),
  }),
  z.strictObject({ type: z.literal("attempt.terminal"), ...inRun, attemptId: id, status: AttemptStatusSchema }),
  z.strictObject({
    type: z.literal("node.started"),
    ...inRun,
    attemptId: id,
    nodeId: id,
    parentNodeId: id.nullable(),
    kind: NodeKindSchema,
    nativeRef: z.string().nullable(),
    providerTarget: id,
    detail: ItemDetailSchema.nullable(),
  }),
  z.strictObject({ type: z.literal("node.delta"), ...inRun, nodeId: id, stream: ItemStreamSchema, delta: z.string() }),
  z.strictObject({
    type: z.literal("node.completed"),
    ...inRun,
    nodeId: id,
    status: z.union([NodeStatusSchema, ItemStatusSchema]),
    text: z.string().nullable(),
    output: z.string().nullable(),
    exitCode: z.number().int().nullable(),
    /** Closed by the runtime (completion barrier) rather than by a provider event. */
    settledBy: z.enum(["provider", "runtime"]),
  }),
  z.strictObject({
    type: z.literal("plan.updated"),
    ...inRun,
    nodeId: id,
    explanation: z.string().nullable(),
    steps: z.array(PlanStepSchema),
  }),
  z.strictObject({ type: z.literal("plan.proposed"), ...inRun, nodeId: id, text: z.string() }),
  z.strictObject({ type: z.literal("todo.updated"), ...inRun, nodeId: id, items: z.array(TodoItemSchema) }),
  z.strictObject({
    type: z.literal("request.opened"),
    ...inRun,
    requestId: id,
    nodeId: id,
    payload: RequestPayloadSchema,
    nativeRef: z.string().nullable(),
    responseCapability: ResponseCapabilitySchema,
  }),
  z.strictObject({
    type: z.literal("request.resolved"),
    ...inRun,
    requestId: id,
    by: z.enum(["user", "provider"]),
    response: RequestResponseSchema.nullable(),
  }),
  z.strictObject({
    type: z.literal("request.closed"),
    ...inRun,
    requestId: id,
    status: z.enum(["expired", "cancelled"]),
    reason: z.string(),
  }),
  z.strictObject({
    type: z.literal("interrupt.requested"),
    ...inRun,
    attemptId: id.nullable(),
    via: z.enum(["native", "session_stop", "not_started"]),
  }),
  z.strictObject({ type: z.literal("interrupt.acknowledged"), ...inRun, attemptId: id }),
  /**
   * An acknowledged interrupt the provider never took, after bounded retries while its turn was live: the run goes on
   * and can be interrupted again.
   */
  z.strictObject({
    type: z.literal("interrupt.failed"),
    ...inRun,
    attemptId: id,
    reason: z.string(),
    attempts: z.number().int().positive(),
  }),
  z.strictObject({
    type: z.literal("steer.applied"),
    ...inRun,
    attemptId: id,
    messageId: id,
    text: z.string(),
    via: z.enum(["native", "interrupt_restart"]),
    /**
     * The log head when the steer was sent. It is recorded once the provider took it, which
     * can be after the provider already answered it: the transcript places it at `sentAfterSeq`.
     */
    sentAfterSeq: z.number().int().nonnegative().optional(),
  }),
  /** A degradation policy fired: which capability was missing and what the runtime did. */
  z.strictObject({
    type: z.literal("policy.applied"),
    /** Null for a session-wide policy (approvals, plan and todo artifacts). */
    threadId: id.nullable(),
    runId: id.nullable(),
    policy: z.string(),
    /**
     * The capability whose absence the policy answers; null when no capability is missing and the situation called for
     * it (a rollback whose later runs ran on another provider thread, which no provider's rollback reaches).
     */
    capability: z.string().nullable(),
    outcome: z.enum(["fallback", "refused"]),
    detail: z.string(),
  }),
  /** A provider event from a superseded attempt: recorded, never applied. */
  z.strictObject({
    type: z.literal("event.fenced"),
    ...inRun,
    attemptId: id,
    providerEventType: z.string(),
  }),
  z.strictObject({
    type: z.literal("session.started"),
    sessionId: id,
    providerTarget: id,
    provider: z.string(),
    hostGeneration: z.number().int(),
    capabilities: ProviderCapabilitiesSchema,
  }),
  z.strictObject({
    type: z.literal("session.state"),
    sessionId: id,
    providerTarget: id,
    status: SessionStatusSchema,
    message: z.string().nullable(),
  }),
  z.strictObject({
    type: z.literal("provider_thread.bound"),
    ...inThread,
    providerThreadId: id,
    providerTarget: id,
    sessionId: id,
    nativeThreadRef: z.string().nullable(),
    resumeCursor: z.string(),
    /**
     * `rebuilt`: replaces a provider thread that could not be resumed; `replaced`: one the
     * provider reported broken; `refreshed`: a fresh thread for a provider the conversation
     * returns to without delta handoff; `realigned`: a fresh thread after a divergent rollback;
     * `rolled_back`: the same provider thread, moved by a rollback to the native thread the cut made.
     */
    via: z.enum(["created", "resumed", "forked", "rebuilt", "replaced", "refreshed", "realigned", "rolled_back"]),
  }),
  /** The provider reported the thread unusable (turn terminal with disposition `broken`). */
  z.strictObject({
    type: z.literal("provider_thread.closed"),
    ...inThread,
    providerThreadId: id,
    providerTarget: id,
    reason: z.enum(["broken"]),
  }),
  z.strictObject({
    type: z.literal("handoff.created"),
    ...inThread,
    handoffId: id,
    /** The provider thread that receives it, and the run whose turn carries it. */
    providerThreadId: id,
    runId: id,
    fromTarget: id.nullable(),
    toTarget: id,
    reason: z.enum(["provider_switch", "fork", "resume_failed", "thread_broken", "rollback_divergent"]),
    strategy: z.enum(["delta_since_last_seen", "full_thread_summary"]),
    /** Every run the text tells (a fork's inherited runs included), and the ordinals of this thread's own. */
    coveredRunIds: z.array(id),
    coveredRunOrdinals: z.array(z.number().int()),
    /** The oldest runs the text leaves out to stay within the provider's recommended size (it says how many). */
    omittedRunIds: z.array(id).default([]),
    /** Who wrote the text: the receiving provider (it writes summaries) or the runtime's local summariser. */
    summarizedBy: z.enum(["provider", "runtime"]).default("runtime"),
    text: z.string(),
    /** An earlier handoff to the same provider thread that was never consumed: replaced, never edited. */
    supersedesHandoffId: id.nullable(),
  }),
  z.strictObject({
    type: z.literal("fork.recorded"),
    ...inThread,
    parentThreadId: id,
    forkedFromRunId: id.nullable(),
    transferId: id,
    /** A fork of one subagent's conversation (the subagent node, in run `forkedFromRunId`), not of the parent's. */
    fromSubagentNodeId: id.optional(),
  }),
  z.strictObject({
    type: z.literal("fork.resolved"),
    ...inThread,
    transferId: id,
    resolution: z.enum(["native", "portable"]),
    detail: z.string(),
  }),
  /** The thread's model changed: in the live session, or (no in-session switch) by a new session. */
  z.strictObject({
    type: z.literal("thread.model_changed"),
    ...inThread,
    model: z.string(),
    via: z.enum(["in_session", "new_session"]),
  }),
  /** The thread's runtime mode changed: in the live session, or (no in-session switch) by a new session. */
  z.strictObject({
    type: z.literal("thread.mode_changed"),
    ...inThread,
    runtimeMode: RuntimeModeSchema,
    via: z.enum(["in_session", "new_session"]),
  }),
  z.strictObject({
    type: z.literal("checkpoint.captured"),
    ...inRun,
    checkpointId: id,
    scope: CheckpointScopeSchema,
    phase: CheckpointPhaseSchema,
    /** The subagent node of a nested scope. */
    nodeId: id.nullable(),
    parentCheckpointId: id.nullable(),
    commit: z.string(),
    files: z.array(ChangedFileSchema),
    insertions: z.number().int(),
    deletions: z.number().int(),
  }),
  z.strictObject({
    type: z.literal("checkpoint.failed"),
    ...inRun,
    checkpointId: id,
    scope: CheckpointScopeSchema,
    phase: CheckpointPhaseSchema,
    nodeId: id.nullable(),
    message: z.string(),
  }),
  /** Filesystem activity that has no checkpoint of its own (nested scopes unsupported). */
  z.strictObject({ type: z.literal("checkpoint.skipped"), ...inRun, nodeId: id, reason: z.string() }),
  /** A rollback is about to touch the provider and the files: recovery finds it if `rollback.applied` never follows. */
  z.strictObject({
    type: z.literal("rollback.started"),
    ...inThread,
    toRunId: id,
    via: z.enum(["provider_rollback", "divergent", "files_only"]),
  }),
  /**
   * The rollback to `toRunId` (its provider step done) is about to restore `files` from the
   * checkpoint: durable before the first file changes. It carries the `rollback.applied` the
   * rollback will record, so recovery can finish it if that never follows.
   */
  z.strictObject({
    type: z.literal("checkpoint.restore_started"),
    ...inThread,
    toRunId: id,
    checkpointId: id,
    files: z.array(ChangedFileSchema),
    rolledBackRunIds: z.array(id),
    provider: z.enum(["rolled_back", "divergent", "not_needed"]),
    providerThreadId: id.nullable(),
    divergentProviderThreadIds: z.array(id),
  }),
  /**
   * A restore that did not end normally: `finished` by recovery after a restart (`files`: what
   * it still had to change), or `unknown` when it could not be (`files`: each may hold its
   * old or its restored state).
   */
  z.strictObject({
    type: z.literal("checkpoint.restore_settled"),
    ...inThread,
    toRunId: id,
    checkpointId: id,
    outcome: z.enum(["finished", "unknown"]),
    files: z.array(ChangedFileSchema),
    message: z.string(),
  }),
  z.strictObject({
    type: z.literal("rollback.applied"),
    ...inThread,
    toRunId: id,
    rolledBackRunIds: z.array(id),
    /**
     * `rolled_back`: the provider dropped the later turns; `divergent`: it could not, its thread is marked divergent.
     */
    provider: z.enum(["rolled_back", "divergent", "not_needed"]),
    /** The provider thread rolled back natively, if any. */
    providerThreadId: id.nullable(),
    /** Provider threads whose conversation still holds rolled-back runs: rebuilt on their next run. */
    divergentProviderThreadIds: z.array(id),
    checkpointId: id.nullable(),
    files: z.array(ChangedFileSchema),
  }),
  /**
   * A subagent's child thread became an addressable provider thread (`subagents.exposesSubagentThreadIds`): wait,
   * close and fork name it by its node.
   */
  z.strictObject({
    type: z.literal("subagent.thread_bound"),
    ...inRun,
    nodeId: id,
    providerThreadId: id,
    providerTarget: id,
    sessionId: id,
    nativeThreadRef: z.string().min(1),
  }),
  /** `closeSubagent` asked the provider to close a running subagent (once, however many callers asked). */
  z.strictObject({ type: z.literal("subagent.close_requested"), ...inRun, nodeId: id }),
  z.strictObject({ type: z.literal("warning"), threadId: id.nullable(), runId: id.nullable(), message: z.string() }),
  z.strictObject({ type: z.literal("command.receipt"), commandId: id, command: z.string(), receipt: z.unknown() }),
  z.strictObject({
    type: z.literal("runtime.recovered"),
    cancelledRuns: z.array(id),
    expiredRequests: z.array(id),
    requeuedRuns: z.array(id),
    /** Runs taken up again in a provider host that outlived the runtime, their requests still answerable. */
    reattachedRuns: z.array(id).optional(),
  }),
]);

export type DomainEvent = z.infer<typeof DomainEventSchema>;
export type DomainEventType = DomainEvent["type"];
export type DomainEventOf<T extends DomainEventType> = Extract<DomainEvent, { type: T }>;
