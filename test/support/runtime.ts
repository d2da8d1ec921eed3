import { mkdtemp, rm } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { sequentialIds, type RuntimeOptions, type TillerRuntime } from "../../src/index.js";
import type { ProviderAdapter, ProviderAdapterEvent } from "../../src/adapters/contract.js";
import { EventQueue } from "../../src/adapters/kit/eventQueue.js";
import type { DomainEvent, DomainEventOf, DomainEventType } from "../../src/domain/events.js";
import type { Runtime } from "../../src/runtime/runtime.js";
import type { LogRecord } from "../../src/runtime/store/eventLog.js";
import { openRuntime } from "./internals.js";

/** A runtime on a fresh temporary data directory, with deterministic ids. */
export async function openTestRuntime(
  providers: Record<string, ProviderAdapter>,
  options: Partial<RuntimeOptions> & { dataDir?: string } = {},
): Promise<{ rt: Runtime; dataDir: string; events: LogRecord<DomainEvent>[]; cleanup: () => Promise<void> }> {
  const dataDir = options.dataDir ?? (await mkdtemp(join(tmpdir(), "tiller-test-")));
  const rt = await openRuntime({ ids: sequentialIds(), ...options, dataDir, providers });
  const events: LogRecord<DomainEvent>[] = [];
  rt.subscribe({ afterSeq: rt.views.head }, (r) => events.push(r));
  return {
    rt,
    dataDir,
    events,
    cleanup: async () => {
      await rt.close();
      await rm(dataDir, { recursive: true, force: true });
    },
  };
}

/** Resolves with the first durable event (after `afterSeq`) that matches. */
export function nextEvent<T extends DomainEventType>(
  rt: TillerRuntime,
  type: T,
  match: (event: DomainEventOf<T>) => boolean = () => true,
  afterSeq = 0,
): Promise<LogRecord<DomainEventOf<T>>> {
  return new Promise((resolve) => {
    const stop = rt.subscribe({ afterSeq }, (record) => {
      if (record.event.type === type && match(record.event as DomainEventOf<T>)) {
        stop();
        resolve(record as LogRecord<DomainEventOf<T>>);
      }
    });
  });
}

export const ofType = <T extends DomainEventType>(records: LogRecord<DomainEvent>[], type: T): DomainEventOf<T>[] =>
  records.map((r) => r.event).filter((e): e is DomainEventOf<T> => e.type === type);

/** Records every adapter call (what the provider was asked, in native terms). */
export function recordCalls(adapter: ProviderAdapter): {
  adapter: ProviderAdapter;
  calls: Array<{ method: string; input: any }>;
} {
  const calls: Array<{ method: string; input: any }> = [];
  const wrapped = Object.create(adapter) as ProviderAdapter;
  for (const method of [
    "startSession",
    "ensureProviderThread",
    "sendRun",
    "steerRun",
    "interrupt",
    "respondToRequest",
    "forkThread",
    "stopSession",
  ] as const) {
    const original = adapter[method] as ((input: unknown) => Promise<unknown>) | undefined;
    if (!original) continue;
    (wrapped as any)[method] = (input: unknown) => {
      calls.push({ method, input });
      return original.call(adapter, input);
    };
  }
  return { adapter: wrapped, calls };
}

/**
 * Holds back provider events that match until released: a double at the process boundary,
 * to observe the runtime between an acknowledgement and the terminal that follows it.
 */
export function gateEvents(adapter: ProviderAdapter, hold: (e: ProviderAdapterEvent) => boolean) {
  let release!: () => void;
  const released = new Promise<void>((r) => (release = r));
  const wrapped = Object.create(adapter) as ProviderAdapter;
  wrapped.streamEvents = () => ({
    async *[Symbol.asyncIterator]() {
      for await (const e of adapter.streamEvents()) {
        if (hold(e)) await released;
        yield e;
      }
    },
  });
  return { adapter: wrapped, release };
}

/** The adapter with some methods replaced (a host that misbehaves at the process boundary). */
export function override(adapter: ProviderAdapter, methods: Partial<ProviderAdapter>): ProviderAdapter {
  return Object.assign(Object.create(adapter) as ProviderAdapter, methods);
}

/** A promise and its resolver. */
export function deferred(): { promise: Promise<void>; resolve: () => void } {
  let resolve!: () => void;
  const promise = new Promise<void>((r) => (resolve = r));
  return { promise, resolve };
}

/** Holds `startSession` until released: the run stays `starting` meanwhile. */
export function holdSessionStart(adapter: ProviderAdapter) {
  const gate = deferred();
  const wrapped = override(adapter, {
    startSession: async (input) => {
      await gate.promise;
      return adapter.startSession(input);
    },
  });
  return { adapter: wrapped, release: gate.resolve };
}

/** The error a promise rejects with, or null when it resolves. */
export async function rejection(promise: Promise<unknown>): Promise<unknown> {
  return promise.then(
    () => null,
    (e: unknown) => e,
  );
}

/** Sends a message on the thread and waits for its run to end. */
export const sendAndWait = async (
  rt: TillerRuntime,
  threadId: string,
  text: string,
  extra: { providerTarget?: string } = {},
) => rt.waitForRun((await rt.sendMessage({ threadId, text, ...extra })).runId);

/** Assistant text of a run's items, concatenated. */
export const said = (items: Array<{ kind: string; text?: string | null }>): string =>
  items
    .filter((i) => i.kind === "assistant_message")
    .map((i) => i.text ?? "")
    .join("");

/** An adapter whose first `times` interrupts fail (a host error at the process boundary), later ones go through. */
export function interruptFails(
  adapter: ProviderAdapter,
  times: number,
  message = "transient",
): { adapter: ProviderAdapter; calls: () => number } {
  let calls = 0;
  const wrapped = override(adapter, {
    interrupt: async (input) => {
      calls += 1;
      if (calls <= times) throw new Error(message);
      return adapter.interrupt(input);
    },
  });
  return { adapter: wrapped, calls: () => calls };
}

/** An adapter whose first `interrupt` fails (a transient host error), later ones go through. */
export const interruptFailsOnce = (adapter: ProviderAdapter, message = "transient") =>
  interruptFails(adapter, 1, message);

/** Polls until `condition` holds (tests wait on state, never assert on time); fails with `what` after `limitMs`. */
export async function until(what: string, condition: () => boolean, limitMs = 20_000): Promise<void> {
  const deadline = Date.now() + limitMs;
  while (!condition()) {
    if (Date.now() > deadline) throw new Error(`timed out waiting for ${what}`);
    await new Promise((r) => setTimeout(r, 5));
  }
}

/**
 * An in-process adapter whose event stream also carries frames a test injects (hostile frames,
 * or a provider saying its session died).
 */
export function withInjectedFrames(inner: ProviderAdapter): {
  adapter: ProviderAdapter;
  inject: (frame: unknown) => void;
} {
  const merged = new EventQueue<ProviderAdapterEvent>();
  let started = false;
  const adapter = Object.create(inner) as ProviderAdapter;
  adapter.streamEvents = () => {
    if (!started) {
      started = true;
      void (async () => {
        for await (const frame of inner.streamEvents()) merged.push(frame);
        merged.close();
      })();
    }
    return merged;
  };
  return { adapter, inject: (frame) => merged.push(frame as ProviderAdapterEvent) };
}

/** The first durable event (from the start of the log) that matches: which of several outcomes came first. */
export function firstEvent(rt: TillerRuntime, match: (event: DomainEvent) => boolean): Promise<DomainEvent> {
  return new Promise((resolve) => {
    const stop = rt.subscribe({ afterSeq: 0 }, ({ event }) => {
      if (!match(event)) return;
      stop();
      resolve(event);
    });
  });
}

/**
 * Injects a provider event on the thread the runtime bound first, in the session it started first
 * (`threadRef` set to that thread's native ref): what the provider says on the thread of the test's run.
 */
export function injectOnThread(
  inject: (frame: unknown) => void,
  events: LogRecord<DomainEvent>[],
  event: Record<string, unknown>,
): void {
  const [session] = ofType(events, "session.started");
  const [bound] = ofType(events, "provider_thread.bound");
  inject({ sessionId: session!.sessionId, event: { threadRef: bound!.nativeThreadRef, ...event } });
}
