/**
 * What flows between the three parties of the inspector, as plain JSON:
 *
 *   runtime (producer) --/feed WebSocket--> inspector server --/ws WebSocket--> page
 *
 * The inspector is compiled on its own (inspector/tsconfig.json), so it imports nothing from
 * src/: the runtime satisfies `InspectedRuntime` structurally and hands over a `Catalog` of its
 * machines, predicates and degradations.
 */

/** A durable log record as the runtime's `subscribe` delivers it. */
export interface LogEntry {
  seq: number;
  at: string;
  event: { type: string; threadId?: string | null; runId?: string | null; [key: string]: unknown };
}

/** A respond command from the page, passed to `rt.respond` unchanged. */
export interface RespondCommand {
  requestId: string;
  response: { kind: "decision"; decision: string } | { kind: "answers"; answers: Record<string, unknown> };
}

/** The slice of the Tiller runtime the inspector reads and calls. */
export interface InspectedRuntime {
  readonly dataDir: string;
  subscribe(input: { afterSeq: number }, listener: (record: LogEntry) => void): () => void;
  respond(input: RespondCommand & { commandId?: string }): Promise<unknown>;
  affordances(threadId: string): unknown;
  capabilities(providerTarget: string): unknown;
  listThreads(): Array<{ threadId: string }>;
}

/** A state node of a machine graph, as the page draws it. */
export interface GraphState {
  /** Dotted path from the root ("" for the root itself). */
  path: string;
  key: string;
  parent: string | null;
  type: string;
  initial: boolean;
}

export interface GraphTransition {
  source: string;
  /** Null: a transition without a target (actions only); drawn as a self-loop. */
  target: string | null;
  event: string;
  guard: string | null;
  /** Capability paths the guard's predicates read (from the catalog's predicates). */
  reads: string[];
}

export interface MachineGraph {
  id: string;
  states: GraphState[];
  transitions: GraphTransition[];
}

/** Everything static the page needs: machine graphs and the degradation registry. */
export interface Catalog {
  machines: Record<string, MachineGraph>;
  degradations: Record<string, { capability: string; outcome: string; summary: string }>;
}

/** One node of the actor tree the page shows. */
export interface TreeNode {
  id: string;
  kind: "supervisor" | "target" | "session" | "providerThread" | "thread" | "run" | "attempt" | "request";
  label: string;
  /** The machine the actor runs (a key of Catalog.machines), or null for attempts and targets. */
  machine: string | null;
  /** Dotted state value, e.g. "active.waiting". */
  state: string | null;
  status: string;
  children: TreeNode[];
}

export interface DegradationView {
  seq: number;
  policy: string;
  capability: string;
  outcome: string;
  detail: string;
  threadId: string | null;
  runId: string | null;
  /** The registry's explanation of the policy (not redacted: it is ours, not the user's). */
  meaning: string | null;
}

export interface CapabilityView {
  /** The live session's record, or the target's declared one when no session started yet. */
  sessions: Array<{ sessionId: string; providerTarget: string; status: string; capabilities: unknown }>;
  targets: Record<string, unknown>;
  degradations: DegradationView[];
}

export interface RequestView {
  requestId: string;
  threadId: string;
  runId: string;
  kind: string;
  summary: string;
  /** From the runtime's affordances (live) or the log (replay). */
  state: "respondable" | "expired" | "resolved" | "cancelled" | "pending";
}

/** Messages from the runtime to the server. */
export type FeedMessage =
  | { kind: "hello"; producerId: string; dataDir: string; catalog: Catalog }
  | { kind: "actor"; id: string; machine: string; state: string; status: string; context: Record<string, string> }
  | { kind: "log"; records: LogEntry[] }
  | { kind: "capabilities"; targets: Record<string, unknown> }
  | { kind: "affordances"; threadId: string; value: unknown }
  | { kind: "respond.result"; id: string; ok: boolean; error: string | null };

/** Messages from the server to the runtime. */
export type FeedCommand = { kind: "respond"; id: string; command: RespondCommand };

/** Messages from the server to the page. */
export type PageMessage =
  | { kind: "hello"; mode: "live" | "replay"; showText: boolean; catalog: Catalog | null; connected: boolean }
  | {
      kind: "view";
      tree: TreeNode[];
      capabilities: CapabilityView;
      requests: RequestView[];
      position: { seq: number; head: number };
    }
  | { kind: "log"; reset: boolean; records: LogEntry[] }
  | { kind: "respond.result"; id: string; ok: boolean; error: string | null };

/** Messages from the page to the server. */
export type PageCommand = { kind: "respond"; id: string; command: RespondCommand } | { kind: "seek"; seq: number };
