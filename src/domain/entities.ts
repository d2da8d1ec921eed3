import { z } from "zod";

/** Lifecycle vocabularies of the domain model, shared by events, machines and projections. */

/**
 * How a provider turn ends, as its provider reports it; the attempt and the root node that
 * carried it, and the run when it was the active attempt, end the same way.
 */
export const TurnTerminalStatusSchema = z.enum(["completed", "interrupted", "failed", "cancelled"]);
export type TurnTerminalStatus = z.infer<typeof TurnTerminalStatusSchema>;
const turnEnds = TurnTerminalStatusSchema.options;

/** A run ends as its turn did, or later by a rollback to an earlier run. */
export const TerminalRunStatusSchema = z.enum([...turnEnds, "rolled_back"]);
export type TerminalRunStatus = z.infer<typeof TerminalRunStatusSchema>;
export const RunStatusSchema = z.enum(["queued", "starting", "running", "waiting", ...TerminalRunStatusSchema.options]);
export type RunStatus = z.infer<typeof RunStatusSchema>;

export const AttemptReasonSchema = z.enum(["initial", "steering_restart", "retry", "provider_recovery"]);
export type AttemptReason = z.infer<typeof AttemptReasonSchema>;
export const AttemptStatusSchema = z.enum(["pending", "running", ...turnEnds, "superseded"]);
export type AttemptStatus = z.infer<typeof AttemptStatusSchema>;

export const NodeStatusSchema = z.enum(["pending", "running", "waiting", ...turnEnds]);
export type NodeStatus = z.infer<typeof NodeStatusSchema>;

export const RequestStatusSchema = z.enum(["pending", "resolved", "expired", "cancelled"]);
export type RequestStatus = z.infer<typeof RequestStatusSchema>;

/** Whether a request can still be answered, and through which host generation. */
export const ResponseCapabilitySchema = z.discriminatedUnion("kind", [
  z.strictObject({ kind: z.literal("live"), sessionId: z.string(), hostGeneration: z.number().int() }),
  z.strictObject({ kind: z.literal("not_resumable"), reason: z.string() }),
]);
export type ResponseCapability = z.infer<typeof ResponseCapabilitySchema>;

export const SessionStatusSchema = z.enum(["starting", "ready", "running", "stopped", "error"]);
export type SessionStatus = z.infer<typeof SessionStatusSchema>;

/**
 * How the provider works a turn, switchable per turn where the provider allows it (else by a
 * new session): `interaction: "plan"` asks it to plan without changing anything; `approvals`
 * says whether it asks before it acts (`on_request`, within the sandbox) or never asks (it acts
 * within the sandbox, or refrains).
 */
export const RuntimeModeSchema = z.strictObject({
  interaction: z.enum(["default", "plan"]).default("default"),
  approvals: z.enum(["on_request", "never"]).default("on_request"),
});
export type RuntimeMode = z.output<typeof RuntimeModeSchema>;
export const DEFAULT_RUNTIME_MODE: RuntimeMode = Object.freeze({ interaction: "default", approvals: "on_request" });

/** Whether two modes are the same mode. */
export const sameRuntimeMode = (a: RuntimeMode, b: RuntimeMode): boolean =>
  a.interaction === b.interaction && a.approvals === b.approvals;

export const DispatchModeSchema = z.enum(["auto", "queue", "steer", "restart"]);
export type DispatchMode = z.infer<typeof DispatchModeSchema>;

export const FailureSchema = z.strictObject({
  failureClass: z.string(),
  message: z.string(),
  retryable: z.boolean(),
});
export type Failure = z.infer<typeof FailureSchema>;

export const LineageSchema = z.strictObject({
  parentThreadId: z.string(),
  relation: z.enum(["fork", "subagent"]),
  forkedFromRunId: z.string().nullable(),
});
export type Lineage = z.infer<typeof LineageSchema>;

export const ChangedFileSchema = z.strictObject({
  path: z.string(),
  change: z.enum(["added", "modified", "deleted"]),
});
export type ChangedFile = z.infer<typeof ChangedFileSchema>;

/** Root-run scopes advance the run count; nested (subagent) scopes never do. */
export const CheckpointScopeSchema = z.enum(["root_run", "subagent"]);
export const CheckpointPhaseSchema = z.enum(["baseline", "final"]);
export type CheckpointPhase = z.infer<typeof CheckpointPhaseSchema>;
