import type { ProviderEvent } from "../../adapters/contract.js";
import type { ProviderCapabilities } from "../../capabilities/schema.js";
import type { TurnBinding } from "./correlation.js";

/**
 * The turns the normalizer knows, and which one an event belongs to: by native turn ref, by the provider thread's
 * current turn, or by a child thread it holds. Turns of finished runs are remembered (bounded) so their late events
 * are fenced instead of being taken for another turn's. A strong turn ref names one turn for ever: it fences on its
 * own. A weak one (or one the provider does not declare) is evidence, weighed with the bindings' order: a finished
 * turn's ref does not fence an event while the thread's current turn was named alike (weak ids repeat); before the
 * current turn's reply names it, such an event is in doubt (`inDoubt`: the normalizer holds it for the reply); and a
 * ref naming no turn never passes for the current turn once that turn was named otherwise.
 */

const RELEASED_TURNS_KEPT = 1024;

/** The run a released turn (or child thread) belonged to: where its late events are recorded as fenced. */
export interface ReleasedOwner {
  threadId: string;
  runId: string;
  attemptId: string;
}

/** The provider's turn refs name one turn for ever: they may fence an event on their own. */
export function trustsTurnRefs(caps: ProviderCapabilities): boolean {
  return caps.turns.exposesNativeTurnId && caps.identity.nativeTurnIds === "strong";
}

/** Past this many pairs the keys made so far are dropped (made again when asked): memory stays flat. */
const PAIR_KEYS_KEPT = 16_384;

/**
 * Keys of (session, ref) pairs, each made once. Every event asks for its turn's keys, and with many turns streaming at
 * once the events of different turns interleave: a key string made anew for each event is allocated and hashed anew by
 * every map it is looked up in, where the one made before keeps its hash.
 */
class PairKeys {
  #keys = new Map<string, Map<string, string>>();
  #size = 0;

  of(a: string, b: string): string {
    let ofA = this.#keys.get(a);
    const known = ofA?.get(b);
    if (known !== undefined) return known;
    if (this.#size >= PAIR_KEYS_KEPT) {
      this.#keys.clear();
      this.#size = 0;
      ofA = undefined;
    }
    if (!ofA) this.#keys.set(a, (ofA = new Map()));
    const key = `${a}\u0000${b}`;
    ofA.set(b, key);
    this.#size += 1;
    return key;
  }
}

export class TurnBindings {
  readonly #refKeys = new PairKeys();
  readonly #threadKeys = new PairKeys();
  /** Provider thread (by session + native ref, or session alone without ids) -> current binding. */
  #current = new Map<string, TurnBinding>();
  /** The same current bindings by session: what asks for a session's turns reads its own, never every session's. */
  #currentBySession = new Map<string, Map<string, TurnBinding>>();
  #byTurnRef = new Map<string, TurnBinding>();
  #byAttempt = new Map<string, TurnBinding>();
  /** Turns of finished runs, by native turn ref (bounded): their late events are fenced. */
  #released = new Map<string, ReleasedOwner>();
  /** Child threads (subagents) of finished runs, by thread key (bounded): fenced too, never adopted by a later turn. */
  #releasedChildThreads = new Map<string, ReleasedOwner>();
  /** Top-level provider threads seen in each session: never mistaken for a subagent's thread. */
  #knownThreads = new Set<string>();
  /** Turns a provider holds in its own queue behind its thread's current turn, in order (by thread key). */
  #waiting = new Map<string, TurnBinding[]>();

  /** Key of a native turn ref, in its session. */
  #refKey(sessionId: string, turnRef: string): string {
    return this.#refKeys.of(sessionId, turnRef);
  }

  /** Routing key of a provider thread: its native ref when exposed, else its session. */
  #threadKey(sessionId: string, threadRef: string | null | undefined): string {
    return threadRef ? this.#threadKeys.of(sessionId, threadRef) : sessionId;
  }

  /**
   * The binding is its attempt's, and its provider thread's current turn; unless `queued` (the provider holds it in
   * its own queue) while that thread's current turn is still open: then it waits behind it, and becomes current when
   * the provider names it or the turns ahead of it ended.
   */
  add(binding: TurnBinding, queued = false): void {
    const key = this.#threadKey(binding.sessionId, binding.threadRef);
    this.#byAttempt.set(binding.attemptId, binding);
    if (binding.threadRef) this.#knownThreads.add(key);
    const current = this.#current.get(key);
    if (queued && current && !current.closed) this.#waiting.set(key, [...(this.#waiting.get(key) ?? []), binding]);
    else this.#setCurrent(key, binding);
  }

  /** Every thread key names one session: the session's own map sees the same sets and deletes, in the same order. */
  #setCurrent(key: string, binding: TurnBinding): void {
    this.#current.set(key, binding);
    const ofSession = this.#currentBySession.get(binding.sessionId);
    if (ofSession) ofSession.set(key, binding);
    else this.#currentBySession.set(binding.sessionId, new Map([[key, binding]]));
  }

  /** Unsets the key's current binding when it is `binding`. */
  #deleteCurrent(key: string, binding: TurnBinding): void {
    if (this.#current.get(key) !== binding) return;
    this.#current.delete(key);
    const ofSession = this.#currentBySession.get(binding.sessionId);
    ofSession?.delete(key);
    if (ofSession?.size === 0) this.#currentBySession.delete(binding.sessionId);
  }

  /** The session's current bindings (one per provider thread). */
  #currentIn(sessionId: string): TurnBinding[] {
    const ofSession = this.#currentBySession.get(sessionId);
    return ofSession ? [...ofSession.values()] : [];
  }

  /** The provider still holds this attempt's turn in its queue: it has not taken it up. */
  isWaiting(attemptId: string): boolean {
    if (this.#waiting.size === 0) return false;
    const binding = this.#byAttempt.get(attemptId);
    if (!binding) return false;
    return this.#waiting.get(this.#threadKey(binding.sessionId, binding.threadRef))?.includes(binding) ?? false;
  }

  /** The thread's current turn: the first turn waiting in the provider's queue once the one before it closed. */
  #currentOf(key: string): TurnBinding | undefined {
    const current = this.#current.get(key);
    const waiting = this.#waiting.get(key);
    if ((current && !current.closed) || !waiting?.length) return current;
    return this.#takeUp(waiting[0]!);
  }

  /** A turn the provider held in its queue runs now: it is its thread's current turn. */
  #takeUp(binding: TurnBinding): TurnBinding {
    const key = this.#threadKey(binding.sessionId, binding.threadRef);
    const rest = (this.#waiting.get(key) ?? []).filter((b) => b !== binding);
    if (rest.length > 0) this.#waiting.set(key, rest);
    else this.#waiting.delete(key);
    this.#setCurrent(key, binding);
    return binding;
  }

  /**
   * The provider accepted the turn and (maybe) told us its native id. Its reply is the word on
   * which turn is ours: a different ref the turn took from an event before the reply named
   * another turn, whose later events are then not this turn's.
   */
  accept(attemptId: string, nativeTurnRef: string | null): TurnBinding | undefined {
    const binding = this.#byAttempt.get(attemptId);
    if (!binding) return undefined;
    binding.awaitsReply = false;
    if (!nativeTurnRef) return binding;
    if (binding.nativeTurnRef && binding.nativeTurnRef !== nativeTurnRef)
      this.#byTurnRef.delete(this.#refKey(binding.sessionId, binding.nativeTurnRef));
    this.#bindTurnRef(binding, nativeTurnRef);
    return binding;
  }

  /**
   * The turn an event leaves in doubt: the event names, by a ref the record does not trust, a turn that ended (a
   * finished run's, or a superseded attempt's), while its thread's current turn is open and waits for its reply. Weak
   * refs repeat: only that reply can say whether the ref is now the current turn's.
   */
  inDoubt(sessionId: string, event: Exclude<ProviderEvent, { type: "session.state" }>): TurnBinding | undefined {
    if (!event.turnRef) return undefined;
    const refKey = this.#refKey(sessionId, event.turnRef);
    const bound = this.#byTurnRef.get(refKey);
    if (!this.#released.has(refKey) && !bound?.closed) return undefined;
    const current = this.#currentOf(this.#threadKey(sessionId, event.threadRef));
    return current && current !== bound && !current.closed && current.awaitsReply ? current : undefined;
  }

  ofAttempt(attemptId: string): TurnBinding | undefined {
    return this.#byAttempt.get(attemptId);
  }

  /** The provider named the thread a turn made: the turn's events are routed by that ref from now on. */
  nameThread(binding: TurnBinding, threadRef: string | null): void {
    binding.makingThread = false;
    if (!threadRef || binding.threadRef === threadRef) return;
    const before = this.#threadKey(binding.sessionId, binding.threadRef);
    this.#deleteCurrent(before, binding);
    binding.threadRef = threadRef;
    const key = this.#threadKey(binding.sessionId, threadRef);
    this.#setCurrent(key, binding);
    this.#knownThreads.add(key);
  }

  /** The session's turn still waiting for the provider to name the thread it makes, if exactly one. */
  #makingThreadIn(sessionId: string): TurnBinding | undefined {
    const making = this.#currentIn(sessionId).filter((b) => b.makingThread);
    return making.length === 1 ? making[0] : undefined;
  }

  /** Forget an attempt once its run is terminal (keeps memory flat for long-lived runtimes). */
  release(attemptId: string): void {
    const binding = this.#byAttempt.get(attemptId);
    if (!binding) return;
    this.#byAttempt.delete(attemptId);
    const owner = ownerOf(binding);
    if (binding.nativeTurnRef) {
      const refKey = this.#refKey(binding.sessionId, binding.nativeTurnRef);
      // A later turn named alike (weak refs repeat) keeps the ref.
      if (this.#byTurnRef.get(refKey) === binding) this.#byTurnRef.delete(refKey);
      remember(this.#released, refKey, owner);
    }
    for (const childThreadRef of binding.childThreads.keys())
      remember(this.#releasedChildThreads, this.#threadKey(binding.sessionId, childThreadRef), owner);
    const key = this.#threadKey(binding.sessionId, binding.threadRef);
    this.#deleteCurrent(key, binding);
    const waiting = this.#waiting.get(key)?.filter((b) => b !== binding);
    if (waiting?.length) this.#waiting.set(key, waiting);
    else this.#waiting.delete(key);
  }

  /**
   * The finished run whose turn or child thread the event names: the event is late, and fenced. An untrusted turn ref
   * does not fence on its own: when the thread's current turn was named alike, the event is that turn's.
   */
  lateOwner(
    sessionId: string,
    event: Exclude<ProviderEvent, { type: "session.state" }>,
    trustsRefs: boolean,
  ): ReleasedOwner | undefined {
    const byTurn = this.namesFinishedTurn(sessionId, event.turnRef);
    const current = this.#current.get(this.#threadKey(sessionId, event.threadRef));
    const namedAlike = current?.nativeTurnRef != null && current.nativeTurnRef === event.turnRef;
    return (
      (byTurn && (trustsRefs || !namedAlike) ? byTurn : undefined) ??
      (event.threadRef ? this.#releasedChildThreads.get(this.#threadKey(sessionId, event.threadRef)) : undefined)
    );
  }

  /** The finished run whose turn had this native ref (remembered, bounded). */
  namesFinishedTurn(sessionId: string, turnRef: string | undefined): ReleasedOwner | undefined {
    return turnRef ? this.#released.get(this.#refKey(sessionId, turnRef)) : undefined;
  }

  /** A child thread a subagent of this turn starts on again is this turn's, no longer fenced. */
  reclaimChildThread(sessionId: string, childThreadRef: string): void {
    this.#releasedChildThreads.delete(this.#threadKey(sessionId, childThreadRef));
  }

  /** The session's turns that are still open (their provider threads' current turns; never those queued behind). */
  openIn(sessionId: string): TurnBinding[] {
    return this.#currentIn(sessionId).filter((b) => !b.closed);
  }

  /** A top-level provider thread of the session (never a subagent's). */
  isKnownThread(sessionId: string, threadRef: string): boolean {
    return this.#knownThreads.has(this.#threadKey(sessionId, threadRef));
  }

  /** Which turn an event belongs to: by native turn ref when given, else the thread's current turn. */
  locate(sessionId: string, event: Exclude<ProviderEvent, { type: "session.state" }>): TurnBinding | undefined {
    if (event.turnRef) {
      const byRef = this.#byTurnRef.get(this.#refKey(sessionId, event.turnRef));
      // The provider names a turn it held in its queue: it took that turn up.
      if (byRef) return this.isWaiting(byRef.attemptId) ? this.#takeUp(byRef) : byRef;
    }
    if (event.threadRef) {
      const current = this.#currentOf(this.#threadKey(sessionId, event.threadRef));
      if (current) return this.#sameTurn(current, event.turnRef);
      // A thread the session never named, ahead of the reply of the turn that makes it: that turn's thread.
      const making = this.#makingThreadIn(sessionId);
      if (making && !this.#knownThreads.has(this.#threadKey(sessionId, event.threadRef))) {
        this.nameThread(making, event.threadRef);
        return this.#sameTurn(making, event.turnRef);
      }
      // A child thread stays its turn's while that turn's run lives, even once a later attempt is current (its late
      // events are fenced there).
      for (const binding of this.#byAttempt.values()) {
        if (binding.sessionId === sessionId && binding.childThreads.has(event.threadRef)) return binding;
      }
      return undefined;
    }
    const current = this.#currentOf(sessionId);
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
    const refKey = this.#refKey(binding.sessionId, ref);
    // A turn that ended (a superseded attempt's) named alike: the ref is a finished turn's as well as this one's.
    const displaced = this.#byTurnRef.get(refKey);
    if (displaced && displaced !== binding && displaced.closed) remember(this.#released, refKey, ownerOf(displaced));
    this.#byTurnRef.set(refKey, binding);
  }
}

function ownerOf({ threadId, runId, attemptId }: TurnBinding): ReleasedOwner {
  return { threadId, runId, attemptId };
}

/** Remembers a finished turn's ref (or child thread), forgetting the oldest beyond the bound. */
function remember(map: Map<string, ReleasedOwner>, key: string, owner: ReleasedOwner): void {
  map.set(key, owner);
  if (map.size > RELEASED_TURNS_KEPT) map.delete(map.keys().next().value!);
}
