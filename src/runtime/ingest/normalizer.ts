import type { ProviderCapabilities } from "../../capabilities/schema.js";
import { reportsTurnTerminals } from "../../capabilities/predicates.js";
import type { ProviderEvent } from "../../adapters/contract.js";
import type { TurnTerminalStatus } from "../../domain/entities.js";
import { NODE_KIND_OF_REQUEST, type NodeKind, type ProviderItemKind } from "../../domain/items.js";
import type { DomainEvent } from "../../domain/events.js";
import { derivedId } from "../../domain/ids.js";
import { redact } from "../../domain/redact.js";
import type { RunEvent } from "../../machines/run.js";
import { policyEvent } from "../../machines/emitted.js";
import {
  applied,
  findNode,
  nodeById,
  nodeStartedEvent,
  scopeOf,
  startNode,
  toRun,
  type NodeEntry,
  type Routed,
  type TurnBinding,
} from "./correlation.js";

/**
 * Native frames, already shaped as ProviderEvents, become app-addressed events here, once.
 * Correlation is scoped (provider thread -> turn -> item/request) and chosen by the
 * `identity` capability; every id is derived from its scope, so replaying a transcript
 * from the same initial state yields the same ids.
 */

export type { Routed } from "./correlation.js";

const RELEASED_TURNS_KEPT = 1024;

export class Normalizer {
  /** Provider thread (by session + native ref, or session alone without ids) -> current binding. */
  #current = new Map<string, TurnBinding>();
  #byTurnRef = new Map<string, TurnBinding>();
  #byAttempt = new Map<string, TurnBinding>();
  /** Turns of finished runs, by native turn ref (bounded): their late events are fenced. */
  #released = new Map<string, { threadId: string; runId: string; attemptId: string }>();
  /** Child threads (subagents) of finished runs, by thread key (bounded): fenced too, never adopted by a later turn. */
  #releasedChildThreads = new Map<string, { threadId: string; runId: string; attemptId: string }>();
  /** Top-level provider threads seen in each session: never mistaken for a subagent's thread. */
  #knownThreads = new Set<string>();

  constructor(
    readonly providerTarget: string,
    private readonly session: (sessionId: string) => { capabilities: ProviderCapabilities; hostGeneration: number },
  ) {}

  private capabilities(sessionId: string): ProviderCapabilities {
    return this.session(sessionId).capabilities;
  }

  /** Routing key of a provider thread: its native ref when exposed, else its session. */
  static threadKey(sessionId: string, threadRef: string | null | undefined): string {
    return threadRef ? `${sessionId}\u0000${threadRef}` : sessionId;
  }

  /** Called before `sendRun`: the next turn on this provider thread belongs to this attempt. */
  beginTurn(input: {
    threadId: string;
    runId: string;
    attemptId: string;
    rootNodeId: string;
    providerThreadId: string;
    sessionId: string;
    threadRef: string | null;
  }): { binding: TurnBinding; rootStarted: DomainEvent } {
    const binding: TurnBinding = {
      ...input,
      providerTurnId: derivedId("ptu", input.attemptId),
      nativeTurnRef: null,
      closed: false,
      interruptSent: false,
      nodes: [{ nodeId: input.rootNodeId, kind: "root_turn", ref: null, open: true, announced: true }],
      byRef: new Map(),
      refCounts: new Map(),
      subagents: [],
      childThreads: new Map(),
      requests: [],
    };
    const key = Normalizer.threadKey(input.sessionId, input.threadRef);
    this.#current.set(key, binding);
    if (input.threadRef) this.#knownThreads.add(key);
    this.#byAttempt.set(input.attemptId, binding);
    const rootStarted: DomainEvent = {
      type: "node.started",
      threadId: input.threadId,
      runId: input.runId,
      attemptId: input.attemptId,
      nodeId: input.rootNodeId,
      parentNodeId: null,
      kind: "root_turn",
      nativeRef: null,
      providerTarget: this.providerTarget,
      detail: null,
    };
    return { binding, rootStarted };
  }

  /**
   * The provider accepted the turn and (maybe) told us its native id. Its reply is the word on
   * which turn is ours: a different ref the turn took from an event before the reply named
   * another turn, whose later events are then not this turn's.
   */
  acceptTurn(attemptId: string, nativeTurnRef: string | null): TurnBinding | undefined {
    const binding = this.#byAttempt.get(attemptId);
    if (!binding || !nativeTurnRef) return binding;
    if (binding.nativeTurnRef && binding.nativeTurnRef !== nativeTurnRef)
      this.#byTurnRef.delete(`${binding.sessionId}\u0000${binding.nativeTurnRef}`);
    this.#bindTurnRef(binding, nativeTurnRef);
    return binding;
  }

  binding(attemptId: string): TurnBinding | undefined {
    return this.#byAttempt.get(attemptId);
  }

  noteInterruptSent(attemptId: string): void {
    const binding = this.#byAttempt.get(attemptId);
    if (binding) binding.interruptSent = true;
  }

  /** Open nodes of an attempt, innermost first, root last; marks them closed. */
  takeOpenNodes(attemptId: string): Array<{ nodeId: string; kind: NodeKind }> {
    const binding = this.#byAttempt.get(attemptId);
    if (!binding) return [];
    const open = binding.nodes.filter((n) => n.open).reverse();
    for (const n of open) n.open = false;
    binding.closed = true;
    return open.map(({ nodeId, kind }) => ({ nodeId, kind }));
  }

  /** Forget an attempt once its run is terminal (keeps memory flat for long-lived runtimes). */
  release(attemptId: string): void {
    const binding = this.#byAttempt.get(attemptId);
    if (!binding) return;
    this.#byAttempt.delete(attemptId);
    const owner = { threadId: binding.threadId, runId: binding.runId, attemptId };
    if (binding.nativeTurnRef) {
      const refKey = `${binding.sessionId}\u0000${binding.nativeTurnRef}`;
      this.#byTurnRef.delete(refKey);
      remember(this.#released, refKey, owner);
    }
    for (const childThreadRef of binding.childThreads.keys())
      remember(this.#releasedChildThreads, Normalizer.threadKey(binding.sessionId, childThreadRef), owner);
    const key = Normalizer.threadKey(binding.sessionId, binding.threadRef);
    if (this.#current.get(key) === binding) this.#current.delete(key);
  }

  ingest(sessionId: string, event: ProviderEvent): Routed[] {
    if (event.type === "session.state") return this.#sessionState(sessionId, event);
    const late =
      (event.turnRef ? this.#released.get(`${sessionId}\u0000${event.turnRef}`) : undefined) ??
      (event.threadRef ? this.#releasedChildThreads.get(Normalizer.threadKey(sessionId, event.threadRef)) : undefined);
    if (late) return [{ to: "fenced", ...late, providerEventType: event.type }];
    const adopted: Routed[] = [];
    const binding = this.#locate(sessionId, event) ?? this.#adoptChildThread(sessionId, event.threadRef, adopted);
    return adopted.length > 0
      ? [...adopted, ...this.#ingestFor(sessionId, binding, event)]
      : this.#ingestFor(sessionId, binding, event);
  }

  #ingestFor(
    sessionId: string,
    binding: TurnBinding | undefined,
    event: Exclude<ProviderEvent, { type: "session.state" }>,
  ): Routed[] {
    if (!binding) {
      const where = `thread ${event.threadRef ?? "-"}, turn ${event.turnRef ?? "-"}`;
      // A provider's own warning between turns keeps its words (with where it came from).
      const message =
        event.type === "warning" ? `${event.message} (${where})` : `${event.type} for no known turn (${where})`;
      return [{ to: "log", event: { type: "warning", threadId: null, runId: null, message: redact(message) } }];
    }
    const caps = this.capabilities(sessionId);
    const isChild = event.threadRef !== undefined && binding.childThreads.has(event.threadRef);
    switch (event.type) {
      case "turn.started":
        return isChild ? [] : [toRun(binding, { type: "TURN_STARTED", attemptId: binding.attemptId })];
      case "turn.terminal": {
        if (isChild) return this.#childTurnEnded(binding, event.threadRef!, event.status);
        const failure = event.failureClass
          ? { failureClass: event.failureClass, message: event.message ?? "", retryable: event.retryable }
          : null;
        const quality = caps.turns.terminalStatusQuality;
        const marked: Routed[] =
          quality === "strong" || binding.closed
            ? []
            : [{ to: "log", event: weakTerminal(binding, event.status, quality) }];
        const terminal = this.#terminal(binding, event.status, failure);
        if (event.threadDisposition === "reusable") return [...marked, terminal];
        // A broken provider thread is never resumed again: the next run gets a replacement.
        const { threadId, providerThreadId } = binding;
        const closed: DomainEvent = {
          type: "provider_thread.closed",
          threadId,
          providerThreadId,
          providerTarget: this.providerTarget,
          reason: "broken",
        };
        return [...marked, { to: "log", event: closed }, terminal];
      }
      case "item.started": {
        const { kind } = event; // a provider item kind is its node's kind
        const earlier = this.#startedBefore(binding, caps, kind, event.itemRef, undefined);
        if (earlier === "duplicate") return [];
        // A node its delta or completion brought first is this item: announced again with what the start knows (detail,
        // parent), never a second node.
        const node =
          earlier ?? startNode(binding, caps.identity.nativeItemIds, kind, event.itemRef, event.detail?.toolName);
        node.announced = true;
        return [
          applied(binding, {
            ...nodeStartedEvent(binding, node, this.providerTarget, event.parentItemRef, event.threadRef),
            detail: event.detail ?? null,
          }),
        ];
      }
      case "item.delta": {
        const { node, started } = this.#openNode(binding, caps, event.kind, event.itemRef, event.threadRef);
        return [
          ...started,
          applied(binding, {
            type: "node.delta",
            ...scopeOf(binding),
            nodeId: node.nodeId,
            stream: event.stream,
            delta: event.delta,
          }),
        ];
      }
      case "item.completed": {
        const { node, started } = this.#openNode(binding, caps, event.kind, event.itemRef, event.threadRef);
        if (!node.open) return []; // completed already: a duplicated or late completion changes nothing
        node.open = false;
        const completed: DomainEvent = {
          type: "node.completed",
          ...scopeOf(binding),
          nodeId: node.nodeId,
          status: event.status,
          text: event.text ?? null,
          output: event.output ?? null,
          exitCode: event.exitCode ?? null,
          settledBy: "provider",
        };
        return [...started, applied(binding, completed)];
      }
      case "plan.updated":
      case "plan.proposed":
      case "todo.updated": {
        const kind: NodeKind = event.type === "todo.updated" ? "todo_list" : "plan";
        const variant = event.type === "plan.proposed" ? "proposed" : "live";
        const { node, started } = this.#artifactNode(binding, caps, kind, variant, event.itemRef, event.threadRef);
        const ids = { ...scopeOf(binding), nodeId: node.nodeId };
        const domain: DomainEvent =
          event.type === "todo.updated"
            ? { type: "todo.updated", ...ids, items: event.items }
            : event.type === "plan.proposed"
              ? { type: "plan.proposed", ...ids, text: event.text }
              : { type: "plan.updated", ...ids, explanation: event.explanation ?? null, steps: event.steps };
        return [...started, applied(binding, domain)];
      }
      case "request.opened":
        return this.#requestOpened(sessionId, binding, caps, event);
      case "request.resolved": {
        const request = event.requestRef
          ? binding.requests.findLast((r) => r.ref === event.requestRef)
          : binding.requests.find((r) => r.open);
        if (!request?.open) return []; // unknown, or resolved already (a duplicate)
        request.open = false;
        const node = nodeById(binding, request.nodeId);
        if (node) node.open = false; // the request's own events close its node in the projection
        return [{ to: "request", requestId: request.requestId, outcome: event.outcome ?? null }];
      }
      case "subagent.started": {
        const earlier = this.#startedBefore(binding, caps, "subagent", event.itemRef, event.childThreadRef);
        if (earlier === "duplicate") return [];
        // Its child thread's events may have come first (an adopted child): that node is this subagent.
        const node = earlier ?? startNode(binding, caps.identity.nativeItemIds, "subagent", event.itemRef, event.agent);
        node.announced = true;
        if (event.itemRef) binding.byRef.set(event.itemRef, node);
        if (node.open && !binding.subagents.includes(node.nodeId)) binding.subagents.push(node.nodeId);
        if (event.childThreadRef) {
          binding.childThreads.set(event.childThreadRef, node.nodeId);
          // the provider reuses it for this turn
          this.#releasedChildThreads.delete(Normalizer.threadKey(sessionId, event.childThreadRef));
        }
        const started = nodeStartedEvent(binding, node, this.providerTarget, undefined, event.threadRef);
        return [applied(binding, { ...started, detail: { toolName: event.agent, input: event.prompt } })];
      }
      case "subagent.completed": {
        // By its own refs when it names any (an unknown one closes nothing), else the innermost open subagent.
        const named = event.itemRef !== undefined || event.childThreadRef !== undefined;
        const node = named
          ? this.#subagentNamed(binding, event.itemRef, event.childThreadRef)
          : nodeById(binding, binding.subagents.at(-1));
        if (!node || !node.open) return [];
        return [this.#closeSubagent(binding, node, event.status, event.result ?? null)];
      }
      case "warning":
        return [
          applied(binding, {
            type: "warning",
            threadId: binding.threadId,
            runId: binding.runId,
            message: redact(event.message),
          }),
        ];
    }
  }

  #sessionState(sessionId: string, event: Extract<ProviderEvent, { type: "session.state" }>): Routed[] {
    if (event.state === "stopped" || event.state === "error") {
      // A host's loss report (its recent frames, stderr) is provider text: masked before it can reach the log.
      return [
        { to: "session", sessionId, state: event.state, message: event.message == null ? null : redact(event.message) },
      ];
    }
    const caps = this.capabilities(sessionId);
    if (event.state !== "idle" || reportsTurnTerminals(caps)) return [];
    // No reliable terminal from this provider: an idle session ends its open turn, by policy.
    const open = [...this.#current.values()].filter((b) => b.sessionId === sessionId && !b.closed);
    return open.flatMap((binding) => {
      const status = binding.interruptSent ? "interrupted" : "completed";
      const detail =
        `terminal inferred as ${status} from the session going idle ` +
        `(correlation: weak; provider terminal quality: ${caps.turns.terminalStatusQuality})`;
      const policy = policyEvent(binding, "terminal_inferred_from_idle", detail);
      return [{ to: "log", event: policy } satisfies Routed, this.#terminal(binding, status, null)];
    });
  }

  #terminal(
    binding: TurnBinding,
    status: TurnTerminalStatus,
    failure: { failureClass: string; message: string; retryable: boolean } | null,
  ): Routed {
    const event: RunEvent = {
      type: "TURN_TERMINAL",
      attemptId: binding.attemptId,
      nodeId: binding.rootNodeId,
      status,
      failure,
    };
    return toRun(binding, event);
  }

  /** Which turn an event belongs to: by native turn ref when given, else the thread's current turn. */
  #locate(sessionId: string, event: Exclude<ProviderEvent, { type: "session.state" }>): TurnBinding | undefined {
    if (event.turnRef) {
      const byRef = this.#byTurnRef.get(`${sessionId}\u0000${event.turnRef}`);
      if (byRef) return byRef;
    }
    if (event.threadRef) {
      const current = this.#current.get(Normalizer.threadKey(sessionId, event.threadRef));
      if (current) return this.#sameTurn(current, event.turnRef);
      // A child thread stays its turn's while that turn's run lives, even once a later attempt is current (its late
      // events are fenced there).
      for (const binding of this.#byAttempt.values()) {
        if (binding.sessionId === sessionId && binding.childThreads.has(event.threadRef)) return binding;
      }
      return undefined;
    }
    const current = this.#current.get(sessionId);
    return current && this.#sameTurn(current, event.turnRef);
  }

  /**
   * The thread's current turn, unless the event names another turn (whatever arrives first); an unbound turn takes the
   * first ref seen.
   */
  #sameTurn(current: TurnBinding, turnRef: string | undefined): TurnBinding | undefined {
    if (turnRef && current.nativeTurnRef && turnRef !== current.nativeTurnRef) return undefined;
    if (turnRef && !current.nativeTurnRef) this.#bindTurnRef(current, turnRef);
    return current;
  }

  #bindTurnRef(binding: TurnBinding, ref: string): void {
    binding.nativeTurnRef = ref;
    this.#byTurnRef.set(`${binding.sessionId}\u0000${ref}`, binding);
  }

  /** The node a delta/completion refers to; started implicitly (once) when the provider has not said, or not yet. */
  #openNode(
    binding: TurnBinding,
    caps: ProviderCapabilities,
    kind: ProviderItemKind,
    ref: string | undefined,
    threadRef: string | undefined,
  ): { node: NodeEntry; started: Routed[] } {
    const found = findNode(binding, kind, ref, caps.identity.nativeItemIds);
    if (found && (found.open || ref)) return { node: found, started: [] };
    const node = startNode(binding, caps.identity.nativeItemIds, kind, ref);
    node.announced = false;
    return {
      node,
      started: [applied(binding, nodeStartedEvent(binding, node, this.providerTarget, undefined, threadRef))],
    };
  }

  /**
   * What a start refers to that the turn already holds: a node its deltas, completion or child
   * thread brought first (claimed by the start), the same item started again ("duplicate"), or
   * nothing (a new node). A native ref names one item while it is open, and for ever when the
   * identity is strong; a weak or absent identity may reuse a ref once its item completed.
   * Without refs only an open, unannounced node of the same kind can be the one starting.
   */
  #startedBefore(
    binding: TurnBinding,
    caps: ProviderCapabilities,
    kind: NodeKind,
    ref: string | undefined,
    childThreadRef: string | undefined,
  ): NodeEntry | "duplicate" | undefined {
    const known =
      (ref ? findNode(binding, kind, ref, caps.identity.nativeItemIds) : undefined) ??
      (childThreadRef ? nodeById(binding, binding.childThreads.get(childThreadRef)) : undefined);
    if (known) {
      if (!known.announced) return known;
      return caps.identity.nativeItemIds === "strong" || known.open ? "duplicate" : undefined;
    }
    if (ref || childThreadRef) return undefined;
    return binding.nodes.findLast((n) => n.open && !n.announced && n.kind === kind && n.ref === null);
  }

  #subagentNamed(
    binding: TurnBinding,
    itemRef: string | undefined,
    childThreadRef: string | undefined,
  ): NodeEntry | undefined {
    const byRef = itemRef ? binding.byRef.get(itemRef) : undefined;
    if (byRef?.kind === "subagent") return byRef;
    return childThreadRef ? nodeById(binding, binding.childThreads.get(childThreadRef)) : undefined;
  }

  /** Plans and todo lists are one node per turn (per native item when plan deltas have ids). */
  #artifactNode(
    binding: TurnBinding,
    caps: ProviderCapabilities,
    kind: NodeKind,
    variant: string,
    ref: string | undefined,
    threadRef: string | undefined,
  ): { node: NodeEntry; started: Routed[] } {
    const usesRef = ref && caps.planning.planDeltasHaveItemIds ? ref : undefined;
    const found = usesRef
      ? binding.nodes.find((n) => n.ref === usesRef)
      : binding.nodes.find((n) => n.kind === kind && n.variant === variant);
    if (found) return { node: found, started: [] };
    const node = startNode(binding, caps.identity.nativeItemIds, kind, usesRef, variant);
    node.variant = variant;
    return {
      node,
      started: [applied(binding, nodeStartedEvent(binding, node, this.providerTarget, undefined, threadRef))],
    };
  }

  /**
   * A child thread the provider never announced (no subagent lifecycle events): when exactly
   * one turn is open in the session, it is that turn's subagent; shown as a subagent node.
   */
  #adoptChildThread(sessionId: string, threadRef: string | undefined, out: Routed[]): TurnBinding | undefined {
    if (!threadRef || !this.capabilities(sessionId).subagents.supportsSubagents) return undefined;
    if (this.#knownThreads.has(Normalizer.threadKey(sessionId, threadRef))) return undefined;
    const open = [...this.#current.values()].filter((b) => b.sessionId === sessionId && !b.closed);
    if (open.length !== 1) return undefined;
    const binding = open[0]!;
    // Not announced: the subagent.started that may still come for this child thread claims it.
    const node: NodeEntry = {
      nodeId: derivedId("nod", binding.providerTurnId, `child:${threadRef}`),
      kind: "subagent",
      ref: threadRef,
      open: true,
      announced: false,
    };
    binding.nodes.push(node);
    binding.childThreads.set(threadRef, node.nodeId);
    out.push(
      applied(binding, { ...nodeStartedEvent(binding, node, this.providerTarget, undefined, undefined), detail: null }),
    );
    return binding;
  }

  #childTurnEnded(binding: TurnBinding, childThreadRef: string, status: TurnTerminalStatus): Routed[] {
    // Invariant 3: a child turn ending closes (at most) its subagent node, never the run.
    if (this.capabilities(binding.sessionId).subagents.emitsSubagentLifecycle) return [];
    const node = nodeById(binding, binding.childThreads.get(childThreadRef));
    return node?.open ? [this.#closeSubagent(binding, node, status, null)] : [];
  }

  #closeSubagent(binding: TurnBinding, node: NodeEntry, status: TurnTerminalStatus, result: string | null): Routed {
    node.open = false;
    binding.subagents = binding.subagents.filter((id) => id !== node.nodeId);
    return applied(binding, {
      type: "node.completed",
      ...scopeOf(binding),
      nodeId: node.nodeId,
      status,
      text: result,
      output: null,
      exitCode: null,
      settledBy: "provider",
    });
  }

  #requestOpened(
    sessionId: string,
    binding: TurnBinding,
    caps: ProviderCapabilities,
    event: Extract<ProviderEvent, { type: "request.opened" }>,
  ): Routed[] {
    const ordinal = binding.requests.length + 1;
    const ref = event.requestRef ?? null;
    // The same native request again (still open, or ever with strong ids) is a duplicate, never a second request.
    const earlier = ref === null ? undefined : binding.requests.findLast((r) => r.ref === ref);
    if (earlier && (earlier.open || caps.identity.nativeRequestIds === "strong")) return [];
    // Scoped to the provider turn even when the id is strong: a provider that names a request of a
    // later turn as it named one of an earlier turn must not make one id of two requests.
    const requestId =
      ref && caps.identity.nativeRequestIds === "strong"
        ? derivedId("req", binding.providerTurnId, ref)
        : derivedId("req", binding.providerTurnId, ordinal, ref ?? "");
    const node = startNode(
      binding,
      caps.identity.nativeItemIds,
      NODE_KIND_OF_REQUEST[event.request.kind],
      undefined,
      event.request.kind,
    );
    binding.requests.push({ requestId, nodeId: node.nodeId, ref, open: true });
    const parentRef = event.itemRef;
    const nodeStarted = nodeStartedEvent(binding, node, this.providerTarget, parentRef, event.threadRef);
    const opened: DomainEvent = {
      type: "request.opened",
      ...scopeOf(binding),
      requestId,
      nodeId: node.nodeId,
      payload: event.request,
      nativeRef: ref,
      responseCapability: { kind: "live", sessionId, hostGeneration: this.session(sessionId).hostGeneration },
    };
    return [
      applied(binding, nodeStarted),
      toRun(binding, { type: "REQUEST_OPENED", attemptId: binding.attemptId, requestId, event: opened }),
    ];
  }

  /** Native address of a request for `respondToRequest`. */
  requestAddress(
    attemptId: string,
    requestId: string,
  ): { requestRef: string | null; turnRef: string | null; ordinal: number } | null {
    const binding = this.#byAttempt.get(attemptId);
    const index = binding?.requests.findIndex((r) => r.requestId === requestId) ?? -1;
    if (!binding || index < 0) return null;
    return { requestRef: binding.requests[index]!.ref, turnRef: binding.nativeTurnRef, ordinal: index + 1 };
  }
}

/** Remembers a finished turn's ref (or child thread), forgetting the oldest beyond the bound. */
function remember(
  map: Map<string, { threadId: string; runId: string; attemptId: string }>,
  key: string,
  owner: { threadId: string; runId: string; attemptId: string },
): void {
  map.set(key, owner);
  if (map.size > RELEASED_TURNS_KEPT) map.delete(map.keys().next().value!);
}

/** The provider's own terminal, accepted with the correlation strength its record declares. */
function weakTerminal(binding: TurnBinding, status: TurnTerminalStatus, quality: "weak" | "none"): DomainEvent {
  const detail =
    `terminal ${status} taken from a provider whose terminal status quality is ${quality} ` +
    `(correlation: ${quality})`;
  return policyEvent(binding, "terminal_weak_correlation", detail);
}
