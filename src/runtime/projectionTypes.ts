import type {
  AttemptReason,
  AttemptStatus,
  ChangedFile,
  CheckpointPhase,
  DispatchMode,
  Failure,
  Lineage,
  ResponseCapability,
  RequestStatus,
  RunStatus,
  RuntimeMode,
} from "../domain/entities.js";
import type { DomainEventOf } from "../domain/events.js";
import type { RequestKind, RequestPayload, RequestResponse, TurnItemKind } from "../domain/items.js";

/** The shapes of the read models (folded in projections.ts and projectionRuns.ts). */

export interface TurnItem {
  /** Node id for provider items; message or event-derived id for runtime items. */
  id: string;
  kind: TurnItemKind;
  status: "streaming" | "complete";
  attemptId: string | null;
  parentId: string | null;
  seq: number;
  text?: string;
  output?: string;
  intent?: "turn_start" | "queued" | "steer";
  detail?: Record<string, unknown>;
  result?: string;
}

export interface AttemptView {
  attemptId: string;
  ordinal: number;
  reason: AttemptReason;
  status: AttemptStatus;
  providerThreadId: string | null;
  providerTurnId: string | null;
  nativeTurnRef: string | null;
}

export interface RunView {
  runId: string;
  threadId: string;
  ordinal: number;
  status: RunStatus;
  providerTarget: string;
  /** The thread's model when the run was created: every attempt of the run uses it. */
  model: string | null;
  /** The thread's runtime mode when the run was created: every attempt of the run uses it. */
  runtimeMode: RuntimeMode;
  mode: DispatchMode;
  text: string;
  reason: string | null;
  failure: Failure | null;
  /** How its end is known (`run.terminal`); null while it runs. */
  correlation: "strong" | "weak" | "inferred" | "runtime" | null;
  attempts: AttemptView[];
  items: TurnItem[];
  fallbacks: Array<{ policy: string; capability: string | null; outcome: "fallback" | "refused"; detail: string }>;
}

export interface RequestView {
  requestId: string;
  threadId: string;
  runId: string;
  nodeId: string;
  kind: RequestKind;
  payload: RequestPayload;
  status: RequestStatus;
  responseCapability: ResponseCapability;
  response: RequestResponse | null;
  closedReason: string | null;
}

export interface ThreadView {
  threadId: string;
  title: string;
  cwd: string;
  providerTarget: string;
  model: string | null;
  runtimeMode: RuntimeMode;
  lineage: Lineage | null;
  runs: RunView[];
}

export interface ProviderThreadRecord {
  providerThreadId: string;
  threadId: string;
  providerTarget: string;
  sessionId: string;
  nativeThreadRef: string | null;
  resumeCursor: string;
  /** How it came to be (its first binding; later resumes do not change it). */
  origin: DomainEventOf<"provider_thread.bound">["via"];
  /** App runs this provider thread has seen: executed itself, or received in a consumed handoff. */
  seenRunIds: Set<string>;
  /** Runs a consumed handoff named but left out for its bound (not seen; told again only when a later one has room). */
  omittedRunIds: Set<string>;
  /** A rollback could not reach the provider: its conversation holds runs the app rolled back. */
  divergent: boolean;
}

export interface HandoffRecord {
  handoffId: string;
  providerThreadId: string;
  /** The run whose turn carries it (a rollback of that run takes the handoff back). */
  runId: string;
  reason: DomainEventOf<"handoff.created">["reason"];
  coveredRunIds: string[];
  omittedRunIds: string[];
  text: string;
  /** A turn of its provider thread was bound after it: the provider has it. */
  consumed: boolean;
  /** A later handoff to the same provider thread replaced it before any turn carried it. */
  superseded: boolean;
}

export interface Transfer {
  transferId: string;
  parentThreadId: string;
  forkedFromRunId: string | null;
  /** Null until the fork's first run decides. */
  resolution: "native" | "portable" | null;
  /** Log position of the fork: the parent's history is inherited as it stood then. */
  seq: number;
  /** A fork of this subagent's conversation (in run `forkedFromRunId`), not of the parent's runs. */
  fromSubagentNodeId: string | null;
}

/** A subagent's child thread, a provider thread the app addresses by the subagent's node (`subagent.thread_bound`). */
export interface SubagentThreadRecord {
  nodeId: string;
  threadId: string;
  runId: string;
  providerThreadId: string;
  providerTarget: string;
  /** The session the subagent runs in: wait and close go through it while it lives. */
  sessionId: string;
  nativeThreadRef: string;
  /** `closeSubagent` asked the provider to close it. */
  closeRequested: boolean;
}

export interface CheckpointView {
  checkpointId: string;
  threadId: string;
  runId: string;
  scope: "root_run" | "subagent";
  phase: CheckpointPhase;
  nodeId: string | null;
  parentCheckpointId: string | null;
  commit: string | null;
  files: ChangedFile[];
  insertions: number;
  deletions: number;
  /** `stale`: a rollback went to an earlier run; `error`: capture failed. */
  status: "ready" | "error" | "stale";
  message: string | null;
}
