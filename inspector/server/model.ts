import type { Catalog, CapabilityView, DegradationView, LogEntry, RequestView, TreeNode } from "./protocol.js";
import { maskCredentials } from "./redact.js";

/** A live actor as the inspection feed last reported it. */
export interface ActorState {
  id: string;
  machine: string;
  state: string;
  status: string;
  context: Record<string, string>;
}

interface ThreadRow {
  threadId: string;
  title: string;
  providerTarget: string;
  runs: string[];
}
interface RunRow {
  runId: string;
  threadId: string;
  ordinal: number;
  status: string;
  attempts: string[];
  requests: string[];
}
interface AttemptRow {
  attemptId: string;
  ordinal: number;
  reason: string;
  status: string;
}
interface RequestRow {
  requestId: string;
  threadId: string;
  runId: string;
  kind: string;
  target: string;
  status: string;
}
interface SessionRow {
  sessionId: string;
  providerTarget: string;
  status: string;
  capabilities: unknown;
}
interface ProviderThreadRow {
  providerThreadId: string;
  sessionId: string;
  threadId: string;
  providerTarget: string;
  status: string;
}

const TERMINAL_RUN = new Set(["completed", "interrupted", "failed", "cancelled", "rolled_back"]);

/** The run machine's state for a run status recorded in the log (replay has no live actors). */
const RUN_STATE: Record<string, string> = { running: "active.running", waiting: "active.waiting" };

/**
 * The inspector's picture of one runtime: a fold of its event log (who belongs to whom, what
 * each entity's recorded status is, which degradations fired) plus, when live, the state each
 * actor's machine reports. Replay folds a prefix of the log and has no live actors.
 */
export class InspectorModel {
  readonly log: LogEntry[] = [];
  readonly actors = new Map<string, ActorState>();
  readonly targets: Record<string, unknown> = {};
  readonly affordances = new Map<string, { requests?: Array<{ requestId: string; state: string }> }>();
  #threads = new Map<string, ThreadRow>();
  #runs = new Map<string, RunRow>();
  #attempts = new Map<string, AttemptRow>();
  #requests = new Map<string, RequestRow>();
  #sessions = new Map<string, SessionRow>();
  #providerThreads = new Map<string, ProviderThreadRow>();
  #degradations: DegradationView[] = [];

  constructor(private readonly catalog: Catalog | null) {}

  get head(): number {
    return this.log.at(-1)?.seq ?? 0;
  }

  /** Folds records in seq order; a record at or below the head is a duplicate and ignored. */
  append(records: LogEntry[]): LogEntry[] {
    const fresh = records.filter((r) => r.seq > this.head).sort((a, b) => a.seq - b.seq);
    for (const r of fresh) {
      this.log.push(r);
      this.#fold(r);
    }
    return fresh;
  }

  #fold({ seq, event: e }: LogEntry): void {
    const s = (k: string) => String(e[k] ?? "");
    switch (e.type) {
      case "thread.created":
        this.#threads.set(s("threadId"), {
          threadId: s("threadId"),
          title: s("title"),
          providerTarget: s("providerTarget"),
          runs: [],
        });
        break;
      case "run.created":
        this.#runs.set(s("runId"), {
          runId: s("runId"),
          threadId: s("threadId"),
          ordinal: Number(e.ordinal),
          status: "queued",
          attempts: [],
          requests: [],
        });
        this.#threads.get(s("threadId"))?.runs.push(s("runId"));
        break;
      case "run.state":
      case "run.terminal":
        this.#set(this.#runs, s("runId"), s("status"));
        break;
      case "attempt.started":
        this.#attempts.set(s("attemptId"), {
          attemptId: s("attemptId"),
          ordinal: Number(e.ordinal),
          reason: s("reason"),
          status: "running",
        });
        this.#runs.get(s("runId"))?.attempts.push(s("attemptId"));
        break;
      case "attempt.terminal":
        this.#set(this.#attempts, s("attemptId"), s("status"));
        break;
      case "request.opened": {
        const payload = (e.payload ?? {}) as Record<string, unknown>;
        const target = String(
          payload.command ?? payload.path ?? payload.toolName ?? (payload.kind === "user_input" ? "question" : ""),
        );
        this.#requests.set(s("requestId"), {
          requestId: s("requestId"),
          threadId: s("threadId"),
          runId: s("runId"),
          kind: String(payload.kind ?? "request"),
          target,
          status: "pending",
        });
        this.#runs.get(s("runId"))?.requests.push(s("requestId"));
        break;
      }
      case "request.resolved":
        this.#set(this.#requests, s("requestId"), "resolved");
        break;
      case "request.closed":
        this.#set(this.#requests, s("requestId"), s("status"));
        break;
      case "session.started":
        this.#sessions.set(s("sessionId"), {
          sessionId: s("sessionId"),
          providerTarget: s("providerTarget"),
          status: "starting",
          capabilities: e.capabilities,
        });
        break;
      case "session.state":
        this.#set(this.#sessions, s("sessionId"), s("status"));
        break;
      case "provider_thread.bound":
        this.#providerThreads.set(s("providerThreadId"), {
          providerThreadId: s("providerThreadId"),
          sessionId: s("sessionId"),
          threadId: s("threadId"),
          providerTarget: s("providerTarget"),
          status: "idle",
        });
        break;
      case "provider_thread.closed":
        this.#set(this.#providerThreads, s("providerThreadId"), "closed");
        break;
      case "policy.applied": {
        const policy = s("policy");
        this.#degradations.push({
          seq,
          policy,
          capability: s("capability"),
          outcome: s("outcome"),
          detail: maskCredentials(s("detail")),
          threadId: (e.threadId as string | null) ?? null,
          runId: (e.runId as string | null) ?? null,
          meaning: this.catalog?.degradations[policy]?.summary ?? null,
        });
        break;
      }
    }
  }

  #set<T extends { status: string }>(map: Map<string, T>, id: string, status: string): void {
    const row = map.get(id);
    if (row) row.status = status;
  }

  #live(id: string, fallbackMachine: string | null, derived: string | null): Pick<TreeNode, "machine" | "state"> {
    const actor = this.actors.get(id);
    return actor ? { machine: actor.machine, state: actor.state } : { machine: fallbackMachine, state: derived };
  }

  /**
   * The actor tree: provider targets (supervisors, sessions, provider threads), then app threads (runs, attempts,
   * requests).
   */
  tree(): TreeNode[] {
    const targets = new Map<string, TreeNode>();
    const target = (id: string) => {
      let node = targets.get(id);
      if (!node)
        targets.set(
          id,
          (node = {
            id: `target:${id}`,
            kind: "target",
            label: id,
            machine: null,
            state: null,
            status: "",
            children: [],
          }),
        );
      return node;
    };
    for (const id of Object.keys(this.targets)) target(id);
    for (const a of this.actors.values()) {
      if (a.machine !== "hostSupervisor") continue;
      target(a.context.target ?? "?").children.push({
        id: a.id,
        kind: "supervisor",
        label: `host ${a.context.target ?? ""}`.trim(),
        machine: a.machine,
        state: a.state,
        status: a.status,
        children: [],
      });
    }
    for (const s of this.#sessions.values()) {
      const children = [...this.#providerThreads.values()]
        .filter((p) => p.sessionId === s.sessionId)
        .map((p): TreeNode => {
          const busy = [...this.#runs.values()].some(
            (r) => r.threadId === p.threadId && (r.status === "running" || r.status === "waiting"),
          );
          return {
            id: p.providerThreadId,
            kind: "providerThread",
            label: `provider thread of ${p.threadId}`,
            ...this.#live(
              `${p.providerTarget}/${p.threadId}`,
              "providerThread",
              p.status === "closed" ? "closed" : busy ? "active" : "idle",
            ),
            status: p.status,
            children: [],
          };
        });
      target(s.providerTarget).children.push({
        id: s.sessionId,
        kind: "session",
        label: `session ${s.sessionId}`,
        ...this.#live(s.sessionId, "session", s.status),
        status: s.status,
        children,
      });
    }
    const threads = [...this.#threads.values()].map((t): TreeNode => {
      const runs = t.runs
        .map((id) => this.#runs.get(id)!)
        .map((r): TreeNode => {
          const attempts = r.attempts
            .map((id) => this.#attempts.get(id)!)
            .map((a): TreeNode => ({
              id: a.attemptId,
              kind: "attempt",
              label: `attempt ${a.ordinal} (${a.reason})`,
              machine: null,
              state: null,
              status: a.status,
              children: [],
            }));
          const requests = r.requests
            .map((id) => this.#requests.get(id)!)
            .map((q): TreeNode => ({
              id: q.requestId,
              kind: "request",
              label: `${q.kind} request`,
              ...this.#live(q.requestId, "request", q.status),
              status: q.status,
              children: [],
            }));
          return {
            id: r.runId,
            kind: "run",
            label: `run ${r.ordinal}`,
            ...this.#live(r.runId, "run", RUN_STATE[r.status] ?? r.status),
            status: r.status,
            children: [...attempts, ...requests],
          };
        });
      const busy = t.runs.some((id) => !TERMINAL_RUN.has(this.#runs.get(id)!.status));
      return {
        id: t.threadId,
        kind: "thread",
        label: maskCredentials(t.title),
        ...this.#live(t.threadId, "thread", busy ? "busy" : "idle"),
        status: busy ? "busy" : "idle",
        children: runs,
      };
    });
    return [...targets.values(), ...threads];
  }

  capabilities(): CapabilityView {
    return {
      sessions: [...this.#sessions.values()].map((s) => ({
        sessionId: s.sessionId,
        providerTarget: s.providerTarget,
        status: s.status,
        capabilities: s.capabilities,
      })),
      targets: this.targets,
      degradations: [...this.#degradations],
    };
  }

  /**
   * Requests of the log, each marked respondable or expired as the affordances say (live), else by its recorded status.
   */
  requests(): RequestView[] {
    return [...this.#requests.values()].map((q) => {
      // While the log says pending, the runtime's affordances say whether it can still be answered.
      const afforded =
        q.status === "pending"
          ? this.affordances.get(q.threadId)?.requests?.find((r) => r.requestId === q.requestId)?.state
          : undefined;
      const state = (afforded ?? q.status) as RequestView["state"];
      return {
        requestId: q.requestId,
        threadId: q.threadId,
        runId: q.runId,
        kind: q.kind,
        summary: maskCredentials(q.target),
        state,
      };
    });
  }
}
