import {
  createScriptedAdapter,
  defineCapabilities,
  minimalCapabilities,
  parseCapabilities,
  ProviderError,
  ScriptedBackend,
  type CapabilityOverrides,
  type ProviderAdapter,
  type ProviderAdapterEvent,
  type ProviderCapabilities,
  type ProviderEvent,
  type ProviderThreadHandle,
  type ProviderThreadSnapshot,
  type ScriptedAdapterOptions,
  type SendRunInput,
  type StartSessionInput,
} from "../../../src/index.js";

/**
 * A corpus of lying adapters for the conformance suite. Each lie is the scripted provider wrapped the way an outside
 * author would wrap it (through the package's public entry points only: `tiller-runtime`), telling exactly one lie
 * about its capability record: a method that claims to do what it does not, an event stream that drops, alters or
 * invents what the record promises, or a record that claims what the provider underneath does not honour. `field` is
 * the one field (as the capability seed defines it) the suite must refute for it, and no other.
 *
 * The honest controls (`HONEST`) are wrapped with the same helpers and tell no lie: the suite must refute nothing.
 */

type Factory = (options: ScriptedAdapterOptions) => ProviderAdapter;

export interface Lie {
  name: string;
  /** The dotted field it must be refuted on, e.g. `turns.supportsInterrupt`. */
  field: string;
  /** The kind of lie: `declared true, not done`, `declared false, done anyway`, `identity`, `queue`, ... */
  class: string;
  /** The record given to the scripted world (default: the full record). */
  capabilities?: CapabilityOverrides;
  adapter: Factory;
}

export interface Honest {
  name: string;
  capabilities?: ProviderCapabilities | CapabilityOverrides;
  /** Default: the scripted adapter as it is. */
  adapter?: Factory;
}

// ---------------------------------------------------------------------------------------------------------------
// Wrapping helpers
// ---------------------------------------------------------------------------------------------------------------

/** The adapter with some methods replaced (whatever the adapter is made of: an object, a class instance). */
export function overriding(adapter: ProviderAdapter, overrides: Partial<ProviderAdapter>): ProviderAdapter {
  return new Proxy(adapter, {
    get(target, property) {
      if (property in overrides) return overrides[property as keyof ProviderAdapter];
      const value = Reflect.get(target, property, target) as unknown;
      return typeof value === "function" ? (value as (...a: unknown[]) => unknown).bind(target) : value;
    },
  });
}

/** The adapter declaring `record`, both from `getCapabilities()` and at session start, whatever it honours. */
export function declaring(
  real: ProviderAdapter,
  record: ProviderCapabilities,
  overrides: Partial<ProviderAdapter> = {},
): ProviderAdapter {
  return overriding(real, {
    getCapabilities: () => record,
    startSession: async (input) => ({ ...(await real.startSession(input)), capabilities: record }),
    ...overrides,
  });
}

/** The record the world gave the adapter, resolved as the scripted provider resolves it. */
export function recordOf(options: ScriptedAdapterOptions): ProviderCapabilities {
  const given = options.capabilities;
  return given && "version" in given ? parseCapabilities(given) : defineCapabilities(given ?? {});
}

/** The record with one dotted field set. */
export function withField(caps: ProviderCapabilities, field: string, value: unknown): ProviderCapabilities {
  const [group, name] = field.split(".") as [keyof ProviderCapabilities, string];
  return parseCapabilities({ ...caps, [group]: { ...(caps[group] as object), [name]: value } });
}

/** Declares the record it was given; underneath, a provider honouring it with `field` true: it does it anyway. */
const doneAnyway =
  (field: string): Factory =>
  (options) =>
    declaring(
      createScriptedAdapter({ ...options, capabilities: withField(recordOf(options), field, true) }),
      recordOf(options),
    );

/** Declares the record it was given; underneath, a provider honouring it with `field` false: it does not do it. */
const notDone =
  (field: string): Factory =>
  (options) =>
    declaring(
      createScriptedAdapter({ ...options, capabilities: withField(recordOf(options), field, false) }),
      recordOf(options),
    );

/** The scripted adapter with some methods replaced; `real` is the scripted adapter underneath. */
const scriptedWith =
  (overrides: (real: ProviderAdapter, options: ScriptedAdapterOptions) => Partial<ProviderAdapter>): Factory =>
  (options) => {
    const real = createScriptedAdapter(options);
    return overriding(real, overrides(real, options));
  };

/** Each event to zero or more events, in order. */
export type EventMap = (event: ProviderEvent, sessionId: string) => ProviderEvent[] | Promise<ProviderEvent[]>;

function mapped(source: AsyncIterable<ProviderAdapterEvent>, map: EventMap): AsyncIterable<ProviderAdapterEvent> {
  return {
    async *[Symbol.asyncIterator]() {
      for await (const { sessionId, event } of source)
        for (const out of await map(event, sessionId)) yield { sessionId, event: out };
    },
  };
}

/** The adapter with its event stream (`streamEvents()`) passed through `map`, and some methods replaced. */
export function mappingEvents(
  adapter: ProviderAdapter,
  map: EventMap,
  overrides: Partial<ProviderAdapter> = {},
): ProviderAdapter {
  return overriding(adapter, { ...overrides, streamEvents: () => mapped(adapter.streamEvents(), map) });
}

/** The scripted adapter with its event stream passed through the map `make` builds (one per adapter). */
const streaming =
  (make: (options: ScriptedAdapterOptions) => EventMap): Factory =>
  (options) =>
    mappingEvents(createScriptedAdapter(options), make(options));

/** The scripted adapter, without the events `drop` picks. */
const dropping = (drop: (event: ProviderEvent) => boolean): Factory =>
  streaming(() => (event) => (drop(event) ? [] : [event]));

/** The scripted adapter, each event altered by `alter`. */
const altering = (alter: (event: ProviderEvent) => ProviderEvent): Factory =>
  streaming(() => (event) => [alter(event)]);

/** Events from several streams, as each arrives; ends when all have. */
function merge<T>(...sources: AsyncIterable<T>[]): AsyncIterable<T> {
  return {
    async *[Symbol.asyncIterator]() {
      const iterators = sources.map((s) => s[Symbol.asyncIterator]());
      const next = (i: number) => iterators[i]!.next().then((result) => ({ i, result }));
      const pending = new Map(iterators.map((_, i) => [i, next(i)]));
      while (pending.size > 0) {
        const { i, result } = await Promise.race(pending.values());
        if (result.done) {
          pending.delete(i);
          continue;
        }
        pending.set(i, next(i));
        yield result.value;
      }
    },
  };
}

/** Events a wrapper sends of its own, beside the provider's. */
class Outbox<T> implements AsyncIterable<T> {
  readonly #items: T[] = [];
  #wake: (() => void) | null = null;
  #closed = false;

  push(item: T): void {
    this.#items.push(item);
    this.#wake?.();
  }

  close(): void {
    this.#closed = true;
    this.#wake?.();
  }

  async *[Symbol.asyncIterator](): AsyncIterator<T> {
    for (;;) {
      while (this.#items.length > 0) yield this.#items.shift()!;
      if (this.#closed) return;
      await new Promise<void>((resolve) => (this.#wake = resolve));
      this.#wake = null;
    }
  }
}

type Item = Extract<ProviderEvent, { type: "item.started" | "item.delta" | "item.completed" }>;
const isItem = (e: ProviderEvent): e is Item =>
  e.type === "item.started" || e.type === "item.delta" || e.type === "item.completed";
/** Item kinds that are tools (what the record's `tools` group speaks of). */
const TOOL_KINDS: ReadonlySet<string> = new Set(["command_execution", "tool_call", "file_change"]);
const isToolItem = (e: ProviderEvent): e is Item => isItem(e) && TOOL_KINDS.has(e.kind);
const isMessageItem = (e: ProviderEvent): e is Item =>
  isItem(e) && (e.kind === "assistant_message" || e.kind === "reasoning");
/** Requests that are approvals (not questions, not calls back to the embedder's tools). */
const isApproval = (kind: string) => kind !== "user_input" && kind !== "dynamic_tool";

/** An event without one of its fields. */
function without<E extends ProviderEvent>(event: E, key: string): E {
  const copy = { ...event } as Record<string, unknown>;
  delete copy[key];
  return copy as E;
}

/** A turn's terminal as a provider sends it. */
function terminal(where: { threadRef?: string | null; turnRef?: string | null }, status: "interrupted") {
  return {
    type: "turn.terminal" as const,
    ...(where.threadRef ? { threadRef: where.threadRef } : {}),
    ...(where.turnRef ? { turnRef: where.turnRef } : {}),
    status,
    threadDisposition: "reusable" as const,
    failureClass: null,
    message: null,
    retryable: false,
  };
}

/** The thread's turns as the scripted provider keeps them (none for a thread it does not know). */
const turnsOf = (backend: ScriptedBackend, cursor: string) => backend.threads.get(cursor)?.turns.length ?? 0;

/** The options with a backend the wrapper can read (the world passes one; else a fresh one, as the adapter would). */
const withBackend = (options: ScriptedAdapterOptions) => ({
  ...options,
  backend: options.backend ?? new ScriptedBackend(),
});

/**
 * The top-level turns a provider runs, by thread (cursor) and session, as its `sendRun` replies and its terminals tell
 * (needs native turn refs: the full record's).
 */
class Running {
  readonly #turns = new Map<string, { cursor: string; sessionId: string }>();
  /** Terminals seen before their `sendRun` reply was. */
  readonly #ended = new Set<string>();

  started(turnRef: string | null, cursor: string, sessionId: string): void {
    if (turnRef && !this.#ended.delete(turnRef)) this.#turns.set(turnRef, { cursor, sessionId });
  }

  /** A terminal ends its turn: the thread it ran on (null: not one of these turns). */
  see(event: ProviderEvent): string | null {
    if (event.type !== "turn.terminal" || !event.turnRef) return null;
    const where = this.#turns.get(event.turnRef);
    if (!where) {
      this.#ended.add(event.turnRef);
      return null;
    }
    this.#turns.delete(event.turnRef);
    return where.cursor;
  }

  busy(cursor: string): boolean {
    return [...this.#turns.values()].some((t) => t.cursor === cursor);
  }

  /** Another thread of the session runs a turn. */
  busyBeside(sessionId: string, cursor: string): boolean {
    return [...this.#turns.values()].some((t) => t.sessionId === sessionId && t.cursor !== cursor);
  }

  /** The session stopped: its turns end with it. */
  forget(sessionId: string): void {
    for (const [ref, t] of this.#turns) if (t.sessionId === sessionId) this.#turns.delete(ref);
  }
}

/**
 * A queue kept by the wrapper: a turn sent while its thread runs one is held (`sendRun` answers with a ref of the
 * wrapper's) and handed to the provider once the thread's turn ended, oldest first (`fifo`: honest), newest first
 * (`lifo`: two queued turns run swapped), or `never`. The turn taken up streams under the ref the runtime was given.
 */
function holdingQueue(real: ProviderAdapter, order: "fifo" | "lifo" | "never"): ProviderAdapter {
  const running = new Running();
  const outbox = new Outbox<ProviderAdapterEvent>();
  const held = new Map<string, Array<{ input: SendRunInput; turnRef: string }>>();
  const shown = new Map<string, string>();
  const realOf = new Map<string, string>();
  let count = 0;
  const show = (ref: string | null | undefined) => (ref ? (shown.get(ref) ?? ref) : ref);
  const unshow = (ref: string | null) => (ref ? (realOf.get(ref) ?? ref) : ref);
  const isHeld = (ref: string | null) => [...held.values()].some((q) => q.some((h) => h.turnRef === ref));
  const showEvent = (event: ProviderEvent): ProviderEvent =>
    "turnRef" in event && event.turnRef && shown.has(event.turnRef)
      ? ({ ...event, turnRef: show(event.turnRef) } as ProviderEvent)
      : event;
  const showSnapshot = (s: ProviderThreadSnapshot): ProviderThreadSnapshot => ({
    ...s,
    turns: s.turns.map((t) => ({ ...t, turnRef: show(t.turnRef) ?? null })),
  });

  async function takeUp(cursor: string): Promise<void> {
    const queue = held.get(cursor);
    if (order === "never" || !queue?.length || running.busy(cursor)) return;
    const next = order === "fifo" ? queue.shift()! : queue.pop()!;
    const { turnRef } = await real.sendRun(next.input);
    if (turnRef) {
      shown.set(turnRef, next.turnRef);
      realOf.set(next.turnRef, turnRef);
    }
    running.started(turnRef, cursor, next.input.sessionId);
  }

  const events = mapped(real.streamEvents(), async (event) => {
    const ended = running.see(event);
    if (ended) await takeUp(ended);
    return [showEvent(event)];
  });
  return overriding(real, {
    streamEvents: () => merge(events, outbox),
    async sendRun(input) {
      const cursor = input.thread.resumeCursor;
      if (!input.newThread && (running.busy(cursor) || (held.get(cursor)?.length ?? 0) > 0)) {
        count += 1;
        const turnRef = `sturn-held-${count}`;
        held.set(cursor, [...(held.get(cursor) ?? []), { input, turnRef }]);
        return { turnRef };
      }
      const result = await real.sendRun(input);
      running.started(result.turnRef, result.thread?.resumeCursor ?? cursor, input.sessionId);
      return result;
    },
    async interrupt(input) {
      const queue = held.get(input.thread.resumeCursor) ?? [];
      const at = queue.findIndex((h) => h.turnRef === input.turnRef);
      if (at < 0) return real.interrupt({ ...input, turnRef: unshow(input.turnRef) });
      // A held turn the runtime interrupts never runs: its terminal says so.
      queue.splice(at, 1);
      outbox.push({
        sessionId: input.sessionId,
        event: terminal({ ...input.thread, turnRef: input.turnRef }, "interrupted"),
      });
    },
    isTurnAlive: async (input) =>
      isHeld(input.turnRef) || ((await real.isTurnAlive?.({ ...input, turnRef: unshow(input.turnRef) })) ?? false),
    respondToRequest: (input) =>
      real.respondToRequest({ ...input, request: { ...input.request, turnRef: unshow(input.request.turnRef) } }),
    steerRun: real.steerRun && ((input) => real.steerRun!({ ...input, turnRef: unshow(input.turnRef) })),
    forkThread:
      real.forkThread && ((input) => real.forkThread!({ ...input, afterTurnRef: unshow(input.afterTurnRef) })),
    readThreadSnapshot:
      real.readThreadSnapshot && (async (input) => showSnapshot(await real.readThreadSnapshot!(input))),
    rollbackThread:
      real.rollbackThread &&
      (async (input) => {
        const result = await real.rollbackThread!(input);
        return result?.snapshot ? { ...result, snapshot: showSnapshot(result.snapshot) } : result;
      }),
    async stopSession(input) {
      for (const [cursor, queue] of held)
        held.set(
          cursor,
          queue.filter((h) => h.input.sessionId !== input.sessionId),
        );
      running.forget(input.sessionId);
      await real.stopSession(input);
    },
    async close() {
      await real.close();
      outbox.close();
    },
  });
}

/**
 * A provider that runs a turn sent while its thread runs one at once, beside it: a second scripted adapter on the same
 * backend (the same conversations) takes it, and its events join the stream.
 */
function runningAtOnce(options: ScriptedAdapterOptions): ProviderAdapter {
  const real = createScriptedAdapter(options);
  const twin = createScriptedAdapter(options);
  const running = new Running();
  const starts = new Map<string, StartSessionInput>();
  const twinSessions = new Set<string>();
  const twinTurns = new Set<string>();
  const owner = (turnRef: string | null) => (turnRef && twinTurns.has(turnRef) ? twin : real);
  const seen: EventMap = (event) => {
    running.see(event);
    return [event];
  };
  // The twin's session is the same session: its own state changes are not the provider's.
  const twinEvents = mapped(twin.streamEvents(), (event) => (event.type === "session.state" ? [] : seen(event, "")));
  return overriding(real, {
    streamEvents: () => merge(mapped(real.streamEvents(), seen), twinEvents),
    async startSession(input) {
      starts.set(input.sessionId, input);
      return real.startSession(input);
    },
    async stopSession(input) {
      running.forget(input.sessionId);
      if (twinSessions.delete(input.sessionId)) await twin.stopSession(input);
      await real.stopSession(input);
    },
    async sendRun(input) {
      const cursor = input.thread.resumeCursor;
      const busy = !input.newThread && running.busy(cursor);
      if (busy && !twinSessions.has(input.sessionId)) {
        await twin.startSession(starts.get(input.sessionId)!);
        twinSessions.add(input.sessionId);
      }
      const result = await (busy ? twin : real).sendRun(input);
      if (busy && result.turnRef) twinTurns.add(result.turnRef);
      running.started(result.turnRef, result.thread?.resumeCursor ?? cursor, input.sessionId);
      return result;
    },
    interrupt: (input) => owner(input.turnRef).interrupt(input),
    isTurnAlive: async (input) => (await owner(input.turnRef).isTurnAlive?.(input)) ?? false,
    respondToRequest: (input) => owner(input.request.turnRef).respondToRequest(input),
    steerRun: real.steerRun && ((input) => owner(input.turnRef).steerRun!(input)),
    async close() {
      await twin.close();
      await real.close();
    },
  });
}

/** How a wrapper shows the provider's native refs (each absent: as they are). */
interface Naming {
  /** A thread's ref (`child`: a subagent's child thread). */
  thread?: (ref: string, child: boolean) => string;
  /** A turn's ref, in its thread (the real thread ref). */
  turn?: (ref: string, thread: string) => string;
  /** An item's ref, in its turn (`thread|turn`, real refs). */
  item?: (ref: string, turn: string) => string;
  request?: (ref: string) => string;
}

/** One kind of ref, shown renamed: the same real ref always shows the same; a shown ref maps back to the latest. */
class Names {
  readonly #shown = new Map<string, string>();
  readonly #real = new Map<string, string>();
  /** The latest name a real ref showed as, in any scope. */
  readonly #latest = new Map<string, string>();

  constructor(private readonly name: ((ref: string, scope: string) => string) | undefined) {}

  show<R extends string | null | undefined>(ref: R, scope = ""): R {
    if (!ref || !this.name) return ref;
    const key = `${scope}\u0000${ref}`;
    let shown = this.#shown.get(key);
    if (shown === undefined) {
      shown = this.name(ref, scope);
      this.#shown.set(key, shown);
    }
    this.#real.set(`${scope}\u0000${shown}`, ref);
    this.#latest.set(ref, shown);
    return shown as R;
  }

  /** The latest name of a ref shown in some scope. */
  showAnywhere<R extends string | null | undefined>(ref: R): R {
    return ref ? ((this.#latest.get(ref) ?? ref) as R) : ref;
  }

  real<R extends string | null | undefined>(shown: R, scope = ""): R {
    if (!shown || !this.name) return shown;
    return (this.#real.get(`${scope}\u0000${shown}`) ?? shown) as R;
  }
}

/** A naming that numbers refs in each scope from 1: `<kind>-1`, `<kind>-2`... (ids unique only in their scope). */
function ordinals(kind: string): (ref: string, scope: string) => string {
  const counts = new Map<string, number>();
  return (_ref, scope) => {
    const n = (counts.get(scope) ?? 0) + 1;
    counts.set(scope, n);
    return `${kind}-${n}`;
  };
}

/**
 * The scripted adapter with its native refs shown as `naming` says, everywhere the runtime sees them (handles, turn
 * refs, events, snapshots) and mapped back everywhere the runtime passes them in. Resume cursors stay the provider's.
 */
const renaming =
  (naming: () => Naming): Factory =>
  (options) => {
    const real = createScriptedAdapter(options);
    const names = naming();
    const children = new Set<string>();
    const thread = names.thread;
    const threads = new Names(thread ? (ref) => thread(ref, children.has(ref)) : undefined);
    const turns = new Names(names.turn);
    const items = new Names(names.item);
    const requests = new Names(names.request);
    const showHandle = <H extends ProviderThreadHandle>(h: H): H => ({ ...h, threadRef: threads.show(h.threadRef) });
    const realAddress = <H extends ProviderThreadHandle>(h: H): H => ({
      ...h,
      threadRef: threads.real(h.threadRef),
      resumeCursor: threads.real(h.resumeCursor),
    });
    const showSnapshot = (s: ProviderThreadSnapshot, cursor: string): ProviderThreadSnapshot => ({
      threadRef: threads.show(s.threadRef),
      turns: s.turns.map((t) => ({ ...t, turnRef: turns.show(t.turnRef, s.threadRef ?? cursor) })),
    });
    const showEvent = (event: ProviderEvent): ProviderEvent => {
      const out = { ...event } as Record<string, unknown>;
      const threadRef = "threadRef" in event ? event.threadRef : undefined;
      const turnRef = "turnRef" in event ? event.turnRef : undefined;
      if (event.type === "subagent.started" && event.childThreadRef) children.add(event.childThreadRef);
      if (threadRef) out.threadRef = threads.show(threadRef);
      if (turnRef) out.turnRef = turns.show(turnRef, threadRef ?? "");
      const scope = `${threadRef ?? ""}|${turnRef ?? ""}`;
      if ("itemRef" in event && event.itemRef) out.itemRef = items.show(event.itemRef, scope);
      if ("parentItemRef" in event && event.parentItemRef) out.parentItemRef = items.showAnywhere(event.parentItemRef);
      if ("requestRef" in event && event.requestRef) out.requestRef = requests.show(event.requestRef);
      if ("childThreadRef" in event && event.childThreadRef) out.childThreadRef = threads.show(event.childThreadRef);
      return out as ProviderEvent;
    };
    const realTurn = <T extends { thread: ProviderThreadHandle & { cwd: string }; turnRef: string | null }>(
      input: T,
    ) => {
      const address = realAddress(input.thread);
      return { ...input, thread: address, turnRef: turns.real(input.turnRef, address.resumeCursor) };
    };
    return mappingEvents(real, (event) => [showEvent(event)], {
      ensureProviderThread: async (input) => showHandle(await real.ensureProviderThread(input)),
      async sendRun(input) {
        const address = realAddress(input.thread);
        const result = await real.sendRun({ ...input, thread: address });
        const cursor = result.thread?.resumeCursor ?? address.resumeCursor;
        return {
          turnRef: turns.show(result.turnRef, cursor),
          ...(result.thread ? { thread: showHandle(result.thread) } : {}),
        };
      },
      steerRun: real.steerRun && ((input) => real.steerRun!(realTurn(input))),
      interrupt: (input) => real.interrupt(realTurn(input)),
      isTurnAlive: async (input) => (await real.isTurnAlive?.(realTurn(input))) ?? false,
      respondToRequest(input) {
        const address = realAddress(input.thread);
        const request = {
          ...input.request,
          requestRef: requests.real(input.request.requestRef),
          turnRef: turns.real(input.request.turnRef, address.resumeCursor),
        };
        return real.respondToRequest({ ...input, thread: address, request });
      },
      readThreadSnapshot:
        real.readThreadSnapshot &&
        (async (input) => {
          const address = realAddress(input.thread);
          return showSnapshot(await real.readThreadSnapshot!({ ...input, thread: address }), address.resumeCursor);
        }),
      rollbackThread:
        real.rollbackThread &&
        (async (input) => {
          const address = realAddress(input.thread);
          const result = await real.rollbackThread!({ ...input, thread: address });
          if (!result) return result;
          return {
            ...(result.snapshot ? { snapshot: showSnapshot(result.snapshot, address.resumeCursor) } : {}),
            ...(result.handle ? { handle: showHandle(result.handle) } : {}),
          };
        }),
      forkThread:
        real.forkThread &&
        (async (input) => {
          const address = realAddress(input.thread);
          const afterTurnRef = turns.real(input.afterTurnRef, address.resumeCursor);
          return showHandle(await real.forkThread!({ ...input, thread: address, afterTurnRef }));
        }),
      waitForSubagent:
        real.waitForSubagent &&
        ((input) =>
          real.waitForSubagent!({
            ...input,
            thread: realAddress(input.thread),
            childThreadRef: threads.real(input.childThreadRef),
          })),
      closeSubagent:
        real.closeSubagent &&
        ((input) =>
          real.closeSubagent!({
            ...input,
            thread: realAddress(input.thread),
            childThreadRef: threads.real(input.childThreadRef),
          })),
    });
  };

// ---------------------------------------------------------------------------------------------------------------
// The lies
// ---------------------------------------------------------------------------------------------------------------

const QUEUES: CapabilityOverrides = { turns: { supportsQueuedMessages: true } };
/** A provider that queues, on a record without app checkpoints (a queued turn reaches it while one runs). */
const QUEUES_NO_CHECKPOINTS: CapabilityOverrides = { ...QUEUES, checkpointing: { appCanCheckpointFilesystem: false } };
const TRUE_NOT_DONE = "declared true, not done";
const FALSE_DONE = "declared false, done anyway";

export const LIES: Lie[] = [
  // ----- turns -----
  {
    name: "steer-resolves-without-steering",
    field: "turns.supportsActiveSteering",
    class: TRUE_NOT_DONE,
    adapter: scriptedWith(() => ({ steerRun: async () => {} })),
  },
  {
    name: "interrupt-acknowledged-turn-goes-on",
    field: "turns.supportsInterrupt",
    class: TRUE_NOT_DONE,
    adapter: scriptedWith(() => ({ interrupt: async () => {} })),
  },
  {
    name: "no-turn-started",
    field: "turns.emitsTurnStarted",
    class: TRUE_NOT_DONE,
    adapter: dropping((e) => e.type === "turn.started"),
  },
  {
    // The terminal it sends is not the turn's completion: the turn goes on after it (emitsTurnCompleted promises
    // the terminal that ends the turn).
    name: "delta-after-terminal",
    field: "turns.emitsTurnCompleted",
    class: FALSE_DONE,
    adapter: streaming(() => {
      const children = new Set<string>();
      /** The latest assistant message of each turn. */
      const lastMessage = new Map<string, string>();
      return (event) => {
        if (event.type === "subagent.started" && event.childThreadRef) children.add(event.childThreadRef);
        if (event.type === "item.started" && event.kind === "assistant_message" && event.turnRef && event.itemRef)
          lastMessage.set(event.turnRef, event.itemRef);
        if (event.type !== "turn.terminal" || !event.turnRef || children.has(event.threadRef ?? "")) return [event];
        const itemRef = lastMessage.get(event.turnRef);
        const late: ProviderEvent = {
          type: "item.delta",
          ...(event.threadRef ? { threadRef: event.threadRef } : {}),
          turnRef: event.turnRef,
          ...(itemRef ? { itemRef } : {}),
          kind: "assistant_message",
          stream: "text",
          delta: " (and one more thing)",
        };
        return [event, late];
      };
    }),
  },
  {
    // A strong terminal status is one to trust; this one says completed for a turn that was interrupted.
    name: "terminal-says-completed-when-interrupted",
    field: "turns.terminalStatusQuality",
    class: TRUE_NOT_DONE,
    adapter: altering((e) =>
      e.type === "turn.terminal" && e.status === "interrupted" ? { ...e, status: "completed" } : e,
    ),
  },
  {
    name: "queued-message-dropped",
    field: "turns.supportsQueuedMessages",
    class: "queue",
    capabilities: QUEUES,
    adapter: (options) => holdingQueue(createScriptedAdapter(options), "never"),
  },
  {
    name: "queued-message-run-at-once",
    field: "turns.supportsQueuedMessages",
    class: "queue",
    capabilities: QUEUES,
    adapter: runningAtOnce,
  },
  {
    // As above, on a record without app checkpoints: with them, the runtime hands a queued turn to the provider only
    // once the active run ended (its baseline capture waits for the run before), so no provider queue holds anything.
    name: "queued-message-dropped-without-app-checkpoints",
    field: "turns.supportsQueuedMessages",
    class: "queue",
    capabilities: QUEUES_NO_CHECKPOINTS,
    adapter: (options) => holdingQueue(createScriptedAdapter(options), "never"),
  },
  {
    name: "queued-message-run-at-once-without-app-checkpoints",
    field: "turns.supportsQueuedMessages",
    class: "queue",
    capabilities: QUEUES_NO_CHECKPOINTS,
    adapter: runningAtOnce,
  },
  {
    name: "queued-messages-swapped",
    field: "turns.supportsQueuedMessages",
    class: "queue",
    capabilities: QUEUES,
    adapter: (options) => holdingQueue(createScriptedAdapter(options), "lifo"),
  },

  // ----- threads -----
  {
    name: "fork-is-fresh-empty-thread",
    field: "threads.canForkThread",
    class: TRUE_NOT_DONE,
    adapter: scriptedWith((real) => ({
      // Only a fork of the whole thread lies (a fork from a turn is another field).
      forkThread: (input) =>
        input.afterTurnRef === null
          ? real.ensureProviderThread({ sessionId: input.sessionId, cwd: input.cwd })
          : real.forkThread!(input),
    })),
  },
  {
    name: "fork-shares-parent-thread",
    field: "threads.canForkThread",
    class: "fork isolation",
    adapter: scriptedWith((real) => ({
      forkThread: async (input) =>
        input.afterTurnRef === null
          ? { threadRef: input.thread.threadRef, resumeCursor: input.thread.resumeCursor }
          : real.forkThread!(input),
    })),
  },
  {
    name: "fork-from-turn-ignores-the-turn",
    field: "threads.canForkFromTurn",
    class: TRUE_NOT_DONE,
    adapter: scriptedWith((real) => ({ forkThread: (input) => real.forkThread!({ ...input, afterTurnRef: null }) })),
  },
  {
    // rollbackThread is the method threads.canRollbackThread declares (checkpointing's providerCanRollbackConversation
    // says the same of the conversation; the thread's method is what does nothing here).
    name: "rollback-does-nothing",
    field: "threads.canRollbackThread",
    class: TRUE_NOT_DONE,
    adapter: scriptedWith((real) => ({
      // What it returns is the conversation it holds (true): it just never cut it.
      rollbackThread: async ({ sessionId, thread }) => ({
        snapshot: await real.readThreadSnapshot!({ sessionId, thread }),
      }),
    })),
  },
  {
    name: "rollback-returns-no-snapshot",
    field: "checkpointing.providerRollbackReturnsSnapshot",
    class: TRUE_NOT_DONE,
    adapter: scriptedWith((real) => ({
      rollbackThread: async (input) => {
        await real.rollbackThread!(input);
      },
    })),
  },
  {
    name: "rollback-returns-fabricated-snapshot",
    field: "checkpointing.providerRollbackReturnsSnapshot",
    class: "snapshots",
    adapter: scriptedWith((real) => ({
      // Rolls back, and returns as many turns as it now holds, but not the ones it holds.
      rollbackThread: async (input) => {
        const result = await real.rollbackThread!(input);
        const turns = result?.snapshot?.turns ?? [];
        const fabricated = turns.map((t, i) => ({ ...t, userText: `a turn ${i}`, assistantText: "an answer" }));
        return { snapshot: { threadRef: result?.snapshot?.threadRef ?? null, turns: fabricated } };
      },
    })),
  },
  {
    name: "snapshot-is-empty",
    field: "threads.canReadThreadSnapshot",
    class: "snapshots",
    adapter: scriptedWith(() => ({
      readThreadSnapshot: async ({ thread }) => ({ threadRef: thread.threadRef, turns: [] }),
    })),
  },
  {
    // The snapshot the runtime reads to check the conversation against its checkpoints
    // (providerCanReadConversationSnapshot: the conversation as it is now); a stale one is not that.
    name: "snapshot-is-stale",
    field: "checkpointing.providerCanReadConversationSnapshot",
    class: "snapshots",
    adapter: scriptedWith((real) => ({
      readThreadSnapshot: async (input) => {
        const snapshot = await real.readThreadSnapshot!(input);
        return { ...snapshot, turns: snapshot.turns.slice(0, -1) };
      },
    })),
  },

  // ----- sessions -----
  {
    name: "second-thread-refused-while-one-runs",
    field: "sessions.supportsMultipleProviderThreadsPerSession",
    class: TRUE_NOT_DONE,
    adapter: (options) => {
      const real = createScriptedAdapter(options);
      const running = new Running();
      return mappingEvents(
        real,
        (event) => {
          running.see(event);
          return [event];
        },
        {
          async sendRun(input) {
            const cursor = input.thread.resumeCursor;
            if (running.busyBeside(input.sessionId, cursor))
              throw new ProviderError("the provider runs one thread of a session at a time", { cursor });
            const result = await real.sendRun(input);
            running.started(result.turnRef, result.thread?.resumeCursor ?? cursor, input.sessionId);
            return result;
          },
          async stopSession(input) {
            running.forget(input.sessionId);
            await real.stopSession(input);
          },
        },
      );
    },
  },
  {
    name: "model-switch-ignored",
    field: "sessions.supportsModelSwitchInSession",
    class: TRUE_NOT_DONE,
    adapter: scriptedWith((real) => ({ sendRun: (input) => real.sendRun({ ...input, model: null }) })),
  },
  {
    name: "mode-switch-ignored",
    field: "sessions.supportsRuntimeModeSwitchInSession",
    class: TRUE_NOT_DONE,
    adapter: scriptedWith((real) => ({
      sendRun: (input) => {
        const { runtimeMode: _ignored, ...rest } = input;
        return real.sendRun(rest);
      },
    })),
  },
  {
    // Declares that a request outlives the runtime, with the method that takes its session up again: the in-process
    // provider dies with the runtime, and the method never finds the session.
    name: "pending-requests-never-reattached",
    field: "sessions.pendingRequestsSurviveRestart",
    class: "requests across restart",
    capabilities: { sessions: { pendingRequestsSurviveRestart: true } },
    adapter: (options) => {
      const record = recordOf(options);
      const field = "sessions.pendingRequestsSurviveRestart";
      const real = createScriptedAdapter({ ...options, capabilities: withField(record, field, false) });
      return declaring(real, record, { reattachSession: async () => null });
    },
  },

  // ----- streaming -----
  {
    name: "no-assistant-text-deltas",
    field: "streaming.streamsAssistantText",
    class: TRUE_NOT_DONE,
    adapter: dropping((e) => e.type === "item.delta" && e.kind === "assistant_message"),
  },
  {
    name: "no-reasoning-deltas",
    field: "streaming.streamsReasoning",
    class: TRUE_NOT_DONE,
    adapter: dropping((e) => e.type === "item.delta" && e.kind === "reasoning"),
  },
  {
    name: "tool-output-not-streamed",
    field: "streaming.streamsToolOutput",
    class: TRUE_NOT_DONE,
    adapter: dropping((e) => e.type === "item.delta" && e.stream === "output"),
  },
  {
    name: "no-message-completed",
    field: "streaming.emitsMessageCompleted",
    class: TRUE_NOT_DONE,
    adapter: dropping((e) => e.type === "item.completed" && e.kind === "assistant_message"),
  },

  // ----- tools -----
  {
    name: "tool-started-dropped",
    field: "tools.emitsToolStarted",
    class: TRUE_NOT_DONE,
    adapter: dropping((e) => e.type === "item.started" && isToolItem(e)),
  },
  {
    name: "tool-completed-dropped",
    field: "tools.emitsToolCompleted",
    class: TRUE_NOT_DONE,
    adapter: dropping((e) => e.type === "item.completed" && isToolItem(e)),
  },
  {
    // Output at completion only (not streamed, as the record says), and then not even there.
    name: "tool-output-missing",
    field: "tools.emitsToolOutput",
    class: TRUE_NOT_DONE,
    capabilities: { streaming: { streamsToolOutput: false } },
    adapter: altering((e) => (e.type === "item.completed" && isToolItem(e) ? without(e, "output") : e)),
  },
  {
    name: "tool-item-ids-absent",
    field: "tools.exposesToolItemIds",
    class: TRUE_NOT_DONE,
    adapter: streaming(() => {
      const tools = new Set<string>();
      return (event) => {
        if (isToolItem(event) && event.itemRef) {
          tools.add(event.itemRef);
          return [without(event, "itemRef")];
        }
        // An approval names the tool's item: by no ref either.
        if (event.type === "request.opened" && event.itemRef && tools.has(event.itemRef))
          return [without(event, "itemRef")];
        return [event];
      };
    }),
  },
  {
    name: "mcp-tool-reported-undeclared",
    field: "tools.supportsMcpTools",
    class: FALSE_DONE,
    adapter: streaming(() => {
      let count = 0;
      return (event) => {
        if (event.type !== "item.completed" || (event.kind !== "command_execution" && event.kind !== "tool_call"))
          return [event];
        // After the command, a call of a tool of an MCP server.
        count += 1;
        const where = {
          ...(event.threadRef ? { threadRef: event.threadRef } : {}),
          ...(event.turnRef ? { turnRef: event.turnRef } : {}),
        };
        const itemRef = `sitem-mcp-${count}`;
        const detail = { toolName: "search_docs", mcp: { server: "docs", tool: "search_docs" }, input: { q: "x" } };
        return [
          event,
          { type: "item.started", ...where, itemRef, kind: "tool_call", detail },
          { type: "item.completed", ...where, itemRef, kind: "tool_call", status: "completed", output: "no match" },
        ];
      };
    }),
  },
  {
    // The tool's item is where the provider says what tool started (its kind): this one says a file changed, not
    // that a command ran (no field of the seed names tool kinds; the started event is what announces the tool).
    name: "command-reported-as-file-change",
    field: "tools.emitsToolStarted",
    class: "tool identity",
    adapter: altering((e) => (isItem(e) && e.kind === "command_execution" ? { ...e, kind: "file_change" } : e)),
  },
  {
    // As above: a command the world scripted, announced as a generic tool call.
    name: "command-reported-as-tool-call",
    field: "tools.emitsToolStarted",
    class: "tool identity",
    adapter: altering((e) => (isItem(e) && e.kind === "command_execution" ? { ...e, kind: "tool_call" } : e)),
  },

  // ----- approvals -----
  {
    name: "command-approval-never-asked",
    field: "approvals.supportsCommandApproval",
    class: TRUE_NOT_DONE,
    adapter: notDone("approvals.supportsCommandApproval"),
  },
  {
    name: "file-change-approval-undeclared",
    field: "approvals.supportsFileChangeApproval",
    class: FALSE_DONE,
    capabilities: { approvals: { supportsFileChangeApproval: false } },
    adapter: doneAnyway("approvals.supportsFileChangeApproval"),
  },
  {
    name: "subagent-approval-undeclared",
    field: "approvals.approvalsCanOriginateFromSubagents",
    class: FALSE_DONE,
    capabilities: { approvals: { approvalsCanOriginateFromSubagents: false } },
    adapter: doneAnyway("approvals.approvalsCanOriginateFromSubagents"),
  },
  {
    name: "approvals-without-request-ids",
    field: "approvals.approvalsHaveNativeRequestIds",
    class: TRUE_NOT_DONE,
    adapter: streaming(() => {
      const approvals = new Set<string>();
      return (event) => {
        if (event.type === "request.opened" && event.requestRef && isApproval(event.request.kind)) {
          approvals.add(event.requestRef);
          return [without(event, "requestRef")];
        }
        if (event.type === "request.resolved" && event.requestRef && approvals.has(event.requestRef))
          return [without(event, "requestRef")];
        return [event];
      };
    }),
  },
  {
    // Says its approval callbacks outlive the connection that asked (false: not live only); the in-process
    // provider's die with the runtime.
    name: "approval-callbacks-declared-durable",
    field: "approvals.approvalCallbacksAreLiveOnly",
    class: "requests across restart",
    capabilities: { approvals: { approvalCallbacksAreLiveOnly: false } },
    adapter: (options) =>
      declaring(
        createScriptedAdapter({
          ...options,
          capabilities: withField(recordOf(options), "approvals.approvalCallbacksAreLiveOnly", true),
        }),
        recordOf(options),
      ),
  },

  // ----- planning -----
  {
    name: "no-plan-updated",
    field: "planning.emitsPlanUpdated",
    class: TRUE_NOT_DONE,
    adapter: dropping((e) => e.type === "plan.updated"),
  },
  {
    name: "plan-updated-undeclared",
    field: "planning.emitsPlanUpdated",
    class: FALSE_DONE,
    capabilities: { planning: { emitsPlanUpdated: false } },
    adapter: doneAnyway("planning.emitsPlanUpdated"),
  },
  {
    name: "no-todo-list",
    field: "planning.emitsTodoList",
    class: TRUE_NOT_DONE,
    adapter: dropping((e) => e.type === "todo.updated"),
  },
  {
    name: "proposed-plan-only-as-text",
    field: "planning.emitsProposedPlan",
    class: TRUE_NOT_DONE,
    adapter: notDone("planning.emitsProposedPlan"),
  },
  {
    name: "structured-question-undeclared",
    field: "planning.supportsStructuredQuestions",
    class: FALSE_DONE,
    capabilities: { planning: { supportsStructuredQuestions: false } },
    adapter: doneAnyway("planning.supportsStructuredQuestions"),
  },
  {
    name: "plan-updates-without-item-ids",
    field: "planning.planDeltasHaveItemIds",
    class: TRUE_NOT_DONE,
    adapter: altering((e) =>
      e.type === "plan.updated" || e.type === "todo.updated" || e.type === "plan.proposed" ? without(e, "itemRef") : e,
    ),
  },

  // ----- subagents -----
  {
    name: "subagent-lifecycle-dropped",
    field: "subagents.emitsSubagentLifecycle",
    class: TRUE_NOT_DONE,
    adapter: dropping((e) => e.type === "subagent.started" || e.type === "subagent.completed"),
  },
  {
    name: "subagent-reported-undeclared",
    field: "subagents.supportsSubagents",
    class: FALSE_DONE,
    capabilities: { subagents: { supportsSubagents: false } },
    adapter: doneAnyway("subagents.supportsSubagents"),
  },
  {
    name: "subagent-wait-returns-at-once",
    field: "subagents.canWaitForSubagents",
    class: "subagent wait",
    adapter: scriptedWith(() => ({ waitForSubagent: async () => ({ status: "completed" }) })),
  },
  {
    name: "subagent-close-does-nothing",
    field: "subagents.canCloseSubagents",
    class: TRUE_NOT_DONE,
    adapter: scriptedWith(() => ({ closeSubagent: async () => {} })),
  },

  // ----- context -----
  {
    name: "summary-ignores-transcript",
    field: "context.canGenerateSummaries",
    class: TRUE_NOT_DONE,
    adapter: scriptedWith(() => ({
      summarize: async () => "Summary written by the scripted provider:\nThe user and the assistant talked.",
    })),
  },
  {
    // The bound summarize is asked to keep is the record's maxRecommendedHandoffChars (the runtime passes it as
    // maxChars): a summary over it breaks the number the record declares.
    name: "summary-over-its-bound",
    field: "context.maxRecommendedHandoffChars",
    class: "summary bounds",
    adapter: scriptedWith(() => ({
      summarize: async ({ transcript, maxChars }) => {
        const head = "Summary written by the scripted provider:\n";
        return head + transcript + "\n" + "In more detail: ".padEnd(maxChars + 1, "and then more. ");
      },
    })),
  },
  {
    name: "handoff-context-dropped",
    field: "context.canConsumeHandoffSummaries",
    class: TRUE_NOT_DONE,
    adapter: scriptedWith((real) => ({ sendRun: (input) => real.sendRun({ ...input, context: null }) })),
  },
  {
    // A thread that has turns told only what it missed: the delta handoff.
    name: "delta-handoff-dropped",
    field: "context.supportsDeltaHandoff",
    class: TRUE_NOT_DONE,
    adapter: (options) => {
      const opened = withBackend(options);
      const real = createScriptedAdapter(opened);
      return overriding(real, {
        sendRun: (input) =>
          real.sendRun(
            input.context && !input.newThread && turnsOf(opened.backend, input.thread.resumeCursor) > 0
              ? { ...input, context: null }
              : input,
          ),
      });
    },
  },
  {
    // A fresh thread told the whole conversation: the full-thread handoff.
    name: "full-handoff-dropped",
    field: "context.supportsFullThreadHandoff",
    class: TRUE_NOT_DONE,
    adapter: (options) => {
      const opened = withBackend(options);
      const real = createScriptedAdapter(opened);
      return overriding(real, {
        sendRun: (input) =>
          real.sendRun(
            input.context && (input.newThread || turnsOf(opened.backend, input.thread.resumeCursor) === 0)
              ? { ...input, context: null }
              : input,
          ),
      });
    },
  },
  {
    name: "developer-context-taken-as-user-text",
    field: "context.acceptsDeveloperContext",
    class: TRUE_NOT_DONE,
    adapter: scriptedWith((real) => ({
      sendRun: (input) =>
        real.sendRun(
          input.context?.delivery === "developer"
            ? { ...input, context: { ...input.context, delivery: "synthetic_user" } }
            : input,
        ),
    })),
  },

  // ----- identity -----
  {
    name: "same-thread-ref-for-every-thread",
    field: "identity.nativeThreadIds",
    class: "identity",
    adapter: renaming(() => ({ thread: (ref, child) => (child ? ref : "thread-main") })),
  },
  {
    name: "same-turn-ref-for-every-turn",
    field: "identity.nativeTurnIds",
    class: "identity",
    adapter: renaming(() => ({ turn: () => "turn-current" })),
  },
  {
    name: "same-request-ref-for-every-request",
    field: "identity.nativeRequestIds",
    class: "identity",
    adapter: renaming(() => ({ request: () => "request-pending" })),
  },
  {
    // Ids unique only in their thread (turn-1, turn-2 in each): what the seed calls weak, declared strong.
    name: "turn-ids-weak-declared-strong",
    field: "identity.nativeTurnIds",
    class: "identity",
    adapter: renaming(() => ({ turn: ordinals("turn") })),
  },
  {
    // Ids unique only in their turn (item-1, item-2 in each): what the seed calls weak, declared strong.
    name: "item-ids-weak-declared-strong",
    field: "identity.nativeItemIds",
    class: "identity",
    adapter: renaming(() => ({ item: ordinals("item") })),
  },
  {
    name: "item-ref-changes-at-completion",
    field: "identity.nativeItemIds",
    class: "identity",
    adapter: altering((e) => (e.type === "item.completed" && e.itemRef ? { ...e, itemRef: `${e.itemRef}-done` } : e)),
  },
  {
    // Messages and reasoning carry no native id although item ids are strong (tool items keep theirs: those are
    // tools.exposesToolItemIds').
    name: "message-item-ids-absent",
    field: "identity.nativeItemIds",
    class: "identity",
    adapter: altering((e) => (isMessageItem(e) ? without(e, "itemRef") : e)),
  },

  // ----- the record itself -----
  {
    // getCapabilities() says the provider does not steer; the session's record (what the suite reads) says it
    // does, and the provider does.
    name: "record-differs-between-getCapabilities-and-session",
    field: "turns.supportsActiveSteering",
    class: "record",
    adapter: (options) => {
      const real = createScriptedAdapter(options);
      const before = withField(recordOf(options), "turns.supportsActiveSteering", false);
      return overriding(real, { getCapabilities: () => before });
    },
  },
];

// ---------------------------------------------------------------------------------------------------------------
// Honest controls
// ---------------------------------------------------------------------------------------------------------------

export const HONEST: Honest[] = [
  {
    name: "honest: scripted full, through a transparent proxy",
    adapter: (o) => overriding(createScriptedAdapter(o), {}),
  },
  { name: "honest: scripted minimal", capabilities: minimalCapabilities() },
  {
    name: "honest: some fields false",
    capabilities: {
      turns: { supportsActiveSteering: false, supportsQueuedMessages: true },
      threads: { canForkFromTurn: false },
      streaming: { emitsMessageCompleted: false, streamsReasoning: false },
      approvals: { supportsFileChangeApproval: false },
      planning: { emitsTodoList: false, emitsPlanUpdated: false },
      subagents: { canCloseSubagents: false },
    },
  },
  {
    name: "honest: stream re-wrapped, every event unchanged",
    adapter: (o) => mappingEvents(createScriptedAdapter(o), (event) => [event]),
  },
  {
    name: "honest: declaring the record it honours",
    adapter: (o) => {
      const real = createScriptedAdapter(o);
      return declaring(real, real.getCapabilities());
    },
  },
  {
    name: "honest: every native ref renamed one to one",
    adapter: renaming(() => {
      const prefix = (ref: string) => `renamed-${ref}`;
      return { thread: prefix, turn: prefix, item: prefix, request: prefix };
    }),
  },
  {
    name: "honest: queue held by the wrapper, in order",
    capabilities: QUEUES,
    adapter: (options) => holdingQueue(createScriptedAdapter(options), "fifo"),
  },
  {
    // Without app checkpoints the queued turn reaches the wrapper while the first runs: its queue is exercised.
    name: "honest: queue held by the wrapper, in order, without app checkpoints",
    capabilities: QUEUES_NO_CHECKPOINTS,
    adapter: (options) => holdingQueue(createScriptedAdapter(options), "fifo"),
  },
];
