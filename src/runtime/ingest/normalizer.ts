import type { ProviderCapabilities } from "../../capabilities/schema.js";
import { reportsTurnTerminals } from "../../capabilities/predicates.js";
import type { ProviderEvent } from "../../adapters/contract.js";
import type { TurnTerminalStatus } from "../../domain/entities.js";
import type { NodeKind } from "../../domain/items.js";
import type { DomainEvent } from "../../domain/events.js";
import { derivedId } from "../../domain/ids.js";
import { redact } from "../../domain/redact.js";
import type { RunEvent } from "../../machines/run.js";
import { policyEvent } from "../../machines/emitted.js";
import { applied, degraded, itemIdStrength, newBinding, toRun, type Routed, type TurnBinding } from "./correlation.js";
import type { TurnTrail } from "./liveTurns.js";
import { artifactUpdated, itemCompleted, itemDelta, itemStarted } from "./nodes.js";
import { requestAddress, requestOpened, requestResolved, trustsRequestRefs } from "./requests.js";
import { adoptChildThread, childTurnEnded, subagentCompleted, subagentStarted } from "./subagents.js";
import { TurnBindings, trustsTurnRefs } from "./turnBindings.js";

/**
 * Native frames, already shaped as ProviderEvents, become app-addressed events here, once.
 * Correlation is scoped (provider thread -> turn -> item/request) and chosen by the
 * `identity` capability; every id is derived from its scope, so replaying a transcript
 * from the same initial state yields the same ids. turnBindings.ts finds the turn an event
 * belongs to (or fences it); nodes.ts (items, artifacts), subagents.ts and requests.ts say
 * what it does to that turn's nodes; the turn's own start and end are decided here.
 */

export type { Routed } from "./correlation.js";

/** Events that waited for a turn's reply, decided: where each goes, for the session they came from. */
export interface HeldDecision {
  sessionId: string;
  routed: Routed[];
}

/** Most events a session holds for one turn's reply: beyond it, the doubt is decided without the reply. */
export const HELD_EVENTS_MAX = 10_000;

/** A session's events waiting, in arrival order, for the reply of the turn one of them left in doubt. */
interface Held {
  binding: TurnBinding;
  events: ProviderEvent[];
}

export class Normalizer {
  #turns = new TurnBindings();
  /** By session: at most one turn's doubt at a time; every event of the session waits behind it, in order. */
  #held = new Map<string, Held>();

  constructor(
    readonly providerTarget: string,
    private readonly session: (sessionId: string) => { capabilities: ProviderCapabilities; hostGeneration: number },
  ) {}

  private capabilities(sessionId: string): ProviderCapabilities {
    return this.session(sessionId).capabilities;
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
    /** The turn makes its provider thread: the thread's ref comes from the provider. */
    makingThread?: boolean;
    /** The provider holds the turn in its own queue behind the thread's current turn. */
    queued?: boolean;
  }): { binding: TurnBinding; rootStarted: DomainEvent } {
    const { queued, ...where } = input;
    const binding = newBinding({ ...where, providerTurnId: derivedId("ptu", input.attemptId) }, [
      { nodeId: input.rootNodeId, kind: "root_turn", ref: null, open: true, announced: true },
    ]);
    this.#turns.add(binding, queued);
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
   * Recovery: a turn that outlived the runtime, bound again as the log left it (its nodes in order, so later ids
   * derive as before; its open subagents and child threads; its requests, whose ordinals count from there).
   */
  restoreTurn(
    input: Omit<Parameters<Normalizer["beginTurn"]>[0], "queued" | "makingThread"> & {
      nativeTurnRef: string | null;
      trail: TurnTrail;
    },
  ): TurnBinding {
    const { nativeTurnRef, trail, ...where } = input;
    const { binding } = this.beginTurn(where);
    const caps = this.capabilities(input.sessionId);
    const trusted = trustsRequestRefs(caps);
    binding.nodes = trail.nodes.map((n) => ({ ...n }));
    for (const node of binding.nodes) {
      if (!node.ref) continue;
      binding.byRef.set(node.ref, node);
      if (itemIdStrength(caps, node.kind) === "weak")
        binding.refCounts.set(node.ref, (binding.refCounts.get(node.ref) ?? 0) + 1);
    }
    binding.subagents = binding.nodes.filter((n) => n.kind === "subagent" && n.open).map((n) => n.nodeId);
    binding.childThreads = new Map(trail.childThreads);
    binding.requests = trail.requests.map((r) => ({ ...r, ref: trusted ? r.ref : null }));
    this.#turns.accept(binding.attemptId, nativeTurnRef);
    return binding;
  }

  /**
   * The provider accepted the turn and (maybe) told us its native id. Its reply is the word on
   * which turn is ours: a different ref the turn took from an event before the reply named
   * another turn, whose later events are then not this turn's.
   */
  acceptTurn(attemptId: string, nativeTurnRef: string | null): HeldDecision | null {
    this.#turns.accept(attemptId, nativeTurnRef);
    return this.decideHeld(attemptId);
  }

  /**
   * The events that waited for the attempt's reply, decided now (the reply came, or the turn ended without it): each
   * goes where it would have gone had it arrived after that moment, in the order it arrived.
   */
  decideHeld(attemptId: string): HeldDecision | null {
    for (const [sessionId, held] of this.#held) {
      if (held.binding.attemptId !== attemptId) continue;
      this.#held.delete(sessionId);
      return { sessionId, routed: held.events.flatMap((event) => this.ingest(sessionId, event)) };
    }
    return null;
  }

  /** The provider named the thread the attempt's turn made (no empty threads): route its events by it. */
  threadNamed(attemptId: string, threadRef: string | null): void {
    const binding = this.#turns.ofAttempt(attemptId);
    if (binding) this.#turns.nameThread(binding, threadRef);
  }

  binding(attemptId: string): TurnBinding | undefined {
    return this.#turns.ofAttempt(attemptId);
  }

  /** The provider still holds the attempt's turn in its own queue. */
  isWaiting(attemptId: string): boolean {
    return this.#turns.isWaiting(attemptId);
  }

  noteInterruptSent(attemptId: string): void {
    const binding = this.#turns.ofAttempt(attemptId);
    if (binding) binding.interruptSent = true;
  }

  /** Open nodes of an attempt, innermost first, root last; marks them closed. */
  takeOpenNodes(attemptId: string): Array<{ nodeId: string; kind: NodeKind }> {
    const binding = this.#turns.ofAttempt(attemptId);
    if (!binding) return [];
    const open = binding.nodes.filter((n) => n.open).reverse();
    for (const n of open) n.open = false;
    binding.closed = true;
    return open.map(({ nodeId, kind }) => ({ nodeId, kind }));
  }

  /** Forget an attempt once its run is terminal (keeps memory flat for long-lived runtimes). */
  release(attemptId: string): void {
    this.#turns.release(attemptId);
  }

  ingest(sessionId: string, event: ProviderEvent): Routed[] {
    const held = this.#held.get(sessionId);
    if (held) return this.#hold(held, event);
    if (event.type === "session.state") return this.#sessionState(sessionId, event);
    const caps = this.capabilities(sessionId);
    const trusted = trustsTurnRefs(caps);
    // A weak ref naming a turn that ended, before the current turn's reply: the reply decides whose it is.
    const doubt = trusted ? undefined : this.#turns.inDoubt(sessionId, event);
    if (doubt) {
      this.#held.set(sessionId, { binding: doubt, events: [event] });
      return [];
    }
    const late = this.#turns.lateOwner(sessionId, event, trusted);
    if (late) return [{ to: "fenced", ...late, providerEventType: event.type }];
    const located = this.#turns.locate(sessionId, event);
    if (located) {
      // A finished turn's ref that did not fence the event: the current turn, named alike, overruled it.
      const overruled = !trusted && this.#turns.namesFinishedTurn(sessionId, event.turnRef) !== undefined;
      const routed = this.#ingestFor(sessionId, located, event);
      return overruled ? [...refOverruled(located, caps, event.turnRef), ...routed] : routed;
    }
    const adopted: Routed[] = [];
    const binding = adoptChildThread(this.#turns, sessionId, caps, this.providerTarget, event.threadRef, adopted);
    return adopted.length > 0
      ? [...adopted, ...this.#ingestFor(sessionId, binding, event)]
      : this.#ingestFor(sessionId, binding, event);
  }

  /**
   * The session's events wait behind the doubt, in order. A provider that streams past the bound without replying
   * has the doubt decided without its reply: the ref is taken as the finished turn's (fenced), as before any reply.
   */
  #hold(held: Held, event: ProviderEvent): Routed[] {
    held.events.push(event);
    if (held.events.length <= HELD_EVENTS_MAX) return [];
    held.binding.awaitsReply = false;
    const detail =
      `${held.events.length} events waited for the reply to sendRun that would say whose turn ref they name; ` +
      "decided without it (turn refs are evidence, never the only word)";
    const { threadId, runId } = held.binding;
    const warning: Routed = { to: "log", event: { type: "warning", threadId, runId, message: detail } };
    return [warning, ...(this.decideHeld(held.binding.attemptId)?.routed ?? [])];
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
      case "turn.terminal":
        if (isChild)
          return childTurnEnded(binding, this.capabilities(binding.sessionId), event.threadRef!, event.status);
        return this.#turnEnded(binding, caps, event);
      case "item.started":
        return itemStarted(binding, caps, this.providerTarget, event);
      case "item.delta":
        return itemDelta(binding, caps, this.providerTarget, event);
      case "item.completed":
        return itemCompleted(binding, caps, this.providerTarget, event);
      case "plan.updated":
      case "plan.proposed":
      case "todo.updated":
        return artifactUpdated(binding, caps, this.providerTarget, event);
      case "request.opened": {
        const { hostGeneration } = this.session(sessionId);
        return requestOpened(sessionId, hostGeneration, binding, caps, this.providerTarget, event);
      }
      case "request.resolved":
        return requestResolved(binding, caps, event);
      case "subagent.started":
        return subagentStarted(this.#turns, sessionId, binding, caps, this.providerTarget, event);
      case "subagent.completed":
        return subagentCompleted(binding, event);
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

  /** The provider's own end of the turn: the run's terminal, with the provider thread closed when it broke. */
  #turnEnded(
    binding: TurnBinding,
    caps: ProviderCapabilities,
    event: Extract<ProviderEvent, { type: "turn.terminal" }>,
  ): Routed[] {
    const failure = event.failureClass
      ? { failureClass: event.failureClass, message: event.message ?? "", retryable: event.retryable }
      : null;
    const quality = caps.turns.terminalStatusQuality;
    const marked: Routed[] =
      quality === "strong" || binding.closed
        ? []
        : [{ to: "log", event: weakTerminal(binding, event.status, quality) }];
    const terminal = this.#terminal(binding, event.status, failure, quality === "strong" ? "strong" : "weak");
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
    const open = this.#turns.openIn(sessionId);
    return open.flatMap((binding) => {
      const status = binding.interruptSent ? "interrupted" : "completed";
      const detail =
        `terminal inferred as ${status} from the session going idle ` +
        `(correlation: weak; provider terminal quality: ${caps.turns.terminalStatusQuality})`;
      const policy = policyEvent(binding, "terminal_inferred_from_idle", detail);
      return [{ to: "log", event: policy } satisfies Routed, this.#terminal(binding, status, null, "inferred")];
    });
  }

  #terminal(
    binding: TurnBinding,
    status: TurnTerminalStatus,
    failure: { failureClass: string; message: string; retryable: boolean } | null,
    correlation: "strong" | "weak" | "inferred",
  ): Routed {
    const event: RunEvent = {
      type: "TURN_TERMINAL",
      attemptId: binding.attemptId,
      nodeId: binding.rootNodeId,
      status,
      failure,
      correlation,
    };
    return toRun(binding, event);
  }

  /** Native address of a request for `respondToRequest`. */
  requestAddress(
    attemptId: string,
    requestId: string,
  ): { requestRef: string | null; turnRef: string | null; ordinal: number } | null {
    return requestAddress(this.#turns.ofAttempt(attemptId), requestId);
  }
}

/**
 * A weak turn ref named a finished turn, and the thread's current turn was named alike: the ref alone would have fenced
 * the event; the bindings' order gave it to the current turn.
 */
function refOverruled(binding: TurnBinding, caps: ProviderCapabilities, turnRef: string | undefined): Routed[] {
  const capability = caps.turns.exposesNativeTurnId ? "identity.nativeTurnIds" : "turns.exposesNativeTurnId";
  const detail =
    `turn ref ${turnRef ?? "-"} named a finished turn and the current one alike: ` +
    "the event went to the current turn (turn refs are evidence, never the only word)";
  return degraded(binding, "turn_refs_as_evidence", redact(detail), capability);
}

/** The provider's own terminal, accepted with the correlation strength its record declares. */
function weakTerminal(binding: TurnBinding, status: TurnTerminalStatus, quality: "weak" | "none"): DomainEvent {
  const detail =
    `terminal ${status} taken from a provider whose terminal status quality is ${quality} ` +
    `(correlation: ${quality})`;
  return policyEvent(binding, "terminal_weak_correlation", detail);
}
