import { vi } from "vitest";
import { createActor, fromPromise } from "xstate";
import {
  hostSupervisorMachine,
  type SupervisorEmitted,
  type SupervisorPolicy,
} from "../../src/machines/hostSupervisor.js";

/**
 * The host supervisor alone, for target `alpha`: its host start and adoption are promises the test settles; what it
 * emits is kept. The clock is the test's to fake (TTLs, backoff and the restart window are clock boundaries).
 */

export const POLICY: SupervisorPolicy = {
  startupTimeoutMs: 5_000,
  idleTtlMs: 30_000,
  restartBudget: 2,
  restartWindowMs: 60_000,
  backoffMs: [100, 1_000],
};

export interface HostCall {
  generation: number;
  timeoutMs: number;
  resolve(): void;
  reject(error: Error): void;
}

/** Lets the invoked promise settle and the machine take its result. */
export const settled = () => vi.advanceTimersByTimeAsync(0);

export function openSupervisor(policy: Partial<SupervisorPolicy> = {}) {
  const emitted: SupervisorEmitted[] = [];
  const starts: HostCall[] = [];
  const adoptions: HostCall[] = [];
  const pending = (calls: HostCall[]) =>
    fromPromise<void, { generation: number; timeoutMs: number }>(
      ({ input }) => new Promise<void>((resolve, reject) => calls.push({ ...input, resolve, reject })),
    );
  const logic = hostSupervisorMachine.provide({
    actors: { startHost: pending(starts), adoptHost: pending(adoptions) },
  });
  const actor = createActor(logic, {
    input: { hostKey: "alpha:0123", target: "alpha", policy: { ...POLICY, ...policy } },
  });
  actor.on("*", (e) => emitted.push(e));
  actor.start();
  const send = (event: Parameters<typeof actor.send>[0]) => actor.send(event);
  const state = () => actor.getSnapshot().value;
  /** Settles a start or an adoption: it succeeds, or fails with `error`. */
  const settle = async (call: HostCall | undefined, error?: string) => {
    if (error === undefined) call!.resolve();
    else call!.reject(new Error(error));
    await settled();
  };
  /** The latest start succeeds / fails, and the machine takes the result. */
  const up = () => settle(starts.at(-1));
  const down = (message = "handshake failed") => settle(starts.at(-1), message);
  const generations = () => starts.map((s) => s.generation);
  const clear = () => void emitted.splice(0);
  return { actor, emitted, starts, adoptions, send, state, settle, up, down, generations, clear };
}
