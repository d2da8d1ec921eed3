import { vi } from "vitest";
import { createActor, fromPromise } from "xstate";
import { fullCapabilities } from "../../src/capabilities/index.js";
import { DEFAULT_RUNTIME_MODE } from "../../src/domain/entities.js";
import type { DomainEvent } from "../../src/domain/events.js";
import {
  sessionMachine,
  type SessionInput,
  type SessionSignal,
  type StartedSession,
  type StartSessionInput,
} from "../../src/machines/session.js";

/**
 * The session machine alone (createActor, its records and signals), with the provider calls it invokes as
 * controllable promises: a start or a re-attach waits until the test settles it (`provider`); a stop is noted.
 */

export const IDLE_MS = 60_000;

export interface SessionHarness {
  actor: ReturnType<typeof createActor<typeof sessionMachine>>;
  records: DomainEvent[];
  signals: SessionSignal[];
  startInputs: StartSessionInput[];
  reattachInputs: { sessionId: string }[];
  stops: string[];
  /** Settles the pending provider call (start or re-attach). */
  provider: { resolve(value: StartedSession): void; reject(error: unknown): void };
}

export function openSession(overrides: Partial<SessionInput> = {}, snapshot?: unknown): SessionHarness {
  const records: DomainEvent[] = [];
  const signals: SessionSignal[] = [];
  const startInputs: StartSessionInput[] = [];
  const reattachInputs: { sessionId: string }[] = [];
  const stops: string[] = [];
  let pending!: SessionHarness["provider"];
  const call = () => new Promise<StartedSession>((resolve, reject) => (pending = { resolve, reject }));
  const logic = sessionMachine.provide({
    actors: {
      startSession: fromPromise<StartedSession, StartSessionInput>(({ input }) => {
        startInputs.push(input);
        return call();
      }),
      reattachSession: fromPromise<StartedSession, { sessionId: string }>(({ input }) => {
        reattachInputs.push(input);
        return call();
      }),
      stopSession: fromPromise<void, { sessionId: string }>(async ({ input }) => void stops.push(input.sessionId)),
    },
  });
  const input: SessionInput = {
    sessionId: "ses_1",
    providerTarget: "alpha",
    provider: "scripted",
    sandbox: "workspace-write",
    cwd: "/work",
    model: "model-a",
    runtimeMode: DEFAULT_RUNTIME_MODE,
    declared: fullCapabilities(),
    idleMs: IDLE_MS,
    ...overrides,
  };
  const actor = createActor(logic, snapshot ? { input, snapshot: snapshot as never } : { input });
  actor.on("*", (emitted) => {
    if (emitted.type === "record") records.push(emitted.event);
    else if (emitted.type === "ready" || emitted.type === "startFailed" || emitted.type === "stopping")
      signals.push(emitted);
  });
  actor.start();
  const provider = { resolve: (v: StartedSession) => pending.resolve(v), reject: (e: unknown) => pending.reject(e) };
  return { actor, records, signals, startInputs, reattachInputs, stops, provider };
}

/** Lets the invoked promise settle and the machine take its result (the clock is faked). */
export const settled = () => vi.advanceTimersByTimeAsync(0);
