import { assign, emit, fromPromise, not, setup } from "xstate";

/**
 * One host process per provider target (per host key): started on the first lease, shared
 * by every session on the target, released after an idle TTL, restarted after a crash with
 * bounded backoff until the restart budget is spent (then `unavailable`: callers get a typed
 * `host_unavailable`). Every process has a generation; an exit, release or loss that names
 * an older generation is ignored, so a late exit never touches its replacement.
 *
 * The machine holds no live resource: it invokes `startHost` (spawn + handshake, keyed in
 * `setup({ actors })`, provided by the registry) and emits what the registry must do or
 * tell (`ready`, `lost`, `unavailable`, `stopProcess`). Deadlines live in context, so the
 * delays are computed from them.
 *
 * A host a previous life of the runtime left running can be adopted instead of started
 * (`ADOPT`, with the generation it was recorded under: the log names that generation). An
 * adoption that fails is no crash of ours (the registry reaps that process): a fresh start
 * follows, under the next generation, without touching the restart budget.
 */

export interface SupervisorPolicy {
  startupTimeoutMs: number;
  idleTtlMs: number;
  /** Crashes (or failed starts) tolerated within `restartWindowMs`; one more makes the host unavailable. */
  restartBudget: number;
  restartWindowMs: number;
  /** Delay before the n-th restart (the last one repeats). */
  backoffMs: readonly number[];
}

export interface SupervisorContext {
  hostKey: string;
  target: string;
  policy: SupervisorPolicy;
  generation: number;
  leases: number;
  waiting: number;
  /** When recent crashes happened (ms), for the restart budget. */
  failures: number[];
  deadline: number | null;
  lastError: string | null;
}

export type SupervisorEvent =
  | { type: "ACQUIRE" }
  /** Like ACQUIRE, from idle: take up the surviving host recorded under `generation` rather than start one. */
  | { type: "ADOPT"; generation: number }
  | { type: "RELEASE"; generation: number }
  | { type: "EXITED"; generation: number; reason: string }
  /** The host is alive but unreachable (reconnects exhausted). */
  | { type: "LOST"; generation: number; reason: string }
  | { type: "STOP" };

export type SupervisorEmitted =
  | { type: "ready"; generation: number }
  | { type: "lost"; generation: number; reason: string }
  | { type: "unavailable"; reason: string }
  | { type: "stopProcess"; generation: number; reason: string };

const now = () => Date.now();
const isCurrent = ({ context, event }: { context: SupervisorContext; event: SupervisorEvent }) =>
  "generation" in event && event.generation === context.generation;

export const hostSupervisorMachine = setup({
  types: {
    context: {} as SupervisorContext,
    events: {} as SupervisorEvent,
    input: {} as { hostKey: string; target: string; policy: SupervisorPolicy },
    emitted: {} as SupervisorEmitted,
  },
  actors: {
    /** Spawns generation `generation` and completes its handshake (rejects on failure or timeout). */
    startHost: fromPromise<void, { generation: number; timeoutMs: number }>(async () => {
      throw new Error("startHost is provided by the host registry");
    }),
    /** Connects to the surviving host of generation `generation` (rejects if it cannot be taken up). */
    adoptHost: fromPromise<void, { generation: number; timeoutMs: number }>(async () => {
      throw new Error("adoptHost is provided by the host registry");
    }),
  },
  delays: {
    untilDeadline: ({ context }) => Math.max(0, (context.deadline ?? now()) - now()),
  },
  guards: {
    isCurrentGeneration: isCurrent,
    hasOtherLeases: ({ context }) => context.leases > 1,
    hasWaiters: ({ context }) => context.waiting > 0,
    /** A crash within the window: the next start waits out a backoff first. */
    failedRecently: ({ context }) => context.failures.some((t) => t > now() - context.policy.restartWindowMs),
    restartBudgetSpent: ({ context }) =>
      context.failures.filter((t) => t > now() - context.policy.restartWindowMs).length > context.policy.restartBudget,
  },
  actions: {
    nextGeneration: assign({ generation: ({ context }) => context.generation + 1 }),
    adoptGeneration: assign({
      generation: ({ context, event }) => (event.type === "ADOPT" ? event.generation : context.generation),
    }),
    addWaiter: assign({ waiting: ({ context }) => context.waiting + 1 }),
    grantWaiters: assign({ leases: ({ context }) => context.leases + context.waiting, waiting: 0 }),
    addLease: assign({ leases: ({ context }) => context.leases + 1 }),
    dropLease: assign({ leases: ({ context }) => Math.max(0, context.leases - 1) }),
    armIdleRelease: assign({ leases: 0, deadline: ({ context }) => now() + context.policy.idleTtlMs }),
    armBackoff: assign({
      deadline: ({ context }) => {
        const { backoffMs } = context.policy;
        const recent = context.failures.filter((t) => t > now() - context.policy.restartWindowMs).length;
        return now() + (backoffMs[Math.min(Math.max(recent - 1, 0), backoffMs.length - 1)] ?? 0);
      },
    }),
    recordFailure: assign({
      failures: ({ context }) => [...context.failures.filter((t) => t > now() - context.policy.restartWindowMs), now()],
      lastError: ({ event }) =>
        "reason" in event
          ? event.reason
          : "error" in event
            ? String((event as { error: unknown }).error)
            : "host failed",
      leases: 0,
    }),
    announceReady: emit(({ context }) => ({ type: "ready" as const, generation: context.generation })),
    announceLost: emit(({ context }) => ({
      type: "lost" as const,
      generation: context.generation,
      reason: context.lastError ?? "host failed",
    })),
    announceUnavailable: emit(({ context }) => ({
      type: "unavailable" as const,
      reason:
        `${context.target}: host restart budget spent ` +
        `(${context.policy.restartBudget} restarts in ${context.policy.restartWindowMs} ms); ` +
        `last error: ${context.lastError ?? "unknown"}`,
    })),
    stopProcess: emit(({ context }, params: { reason: string }) => ({
      type: "stopProcess" as const,
      generation: context.generation,
      reason: params.reason,
    })),
  },
}).createMachine({
  id: "hostSupervisor",
  context: ({ input }) => ({
    ...input,
    generation: 0,
    leases: 0,
    waiting: 0,
    failures: [],
    deadline: null,
    lastError: null,
  }),
  initial: "idle",
  states: {
    /** No process. */
    idle: {
      on: {
        ACQUIRE: [
          { guard: "restartBudgetSpent", target: "unavailable", actions: "announceUnavailable" },
          { guard: "failedRecently", target: "backoff", actions: ["addWaiter", "armBackoff"] },
          { target: "starting", actions: ["addWaiter", "nextGeneration"] },
        ],
        ADOPT: { target: "adopting", actions: ["addWaiter", "adoptGeneration"] },
      },
    },
    /** Taking up a host a previous life left running; if that fails, a fresh one is started. */
    adopting: {
      invoke: {
        src: "adoptHost",
        input: ({ context }) => ({ generation: context.generation, timeoutMs: context.policy.startupTimeoutMs }),
        onDone: { target: "ready", actions: ["grantWaiters", "announceReady"] },
        onError: { target: "starting", actions: "nextGeneration" },
      },
      on: { ACQUIRE: { actions: "addWaiter" } },
    },
    starting: {
      invoke: {
        src: "startHost",
        input: ({ context }) => ({ generation: context.generation, timeoutMs: context.policy.startupTimeoutMs }),
        onDone: { target: "ready", actions: ["grantWaiters", "announceReady"] },
        onError: {
          target: "failed",
          actions: ["recordFailure", { type: "stopProcess", params: { reason: "start failed" } }],
        },
      },
      on: {
        ACQUIRE: { actions: "addWaiter" },
        EXITED: { guard: "isCurrentGeneration", target: "failed", actions: "recordFailure" },
      },
    },
    ready: {
      on: {
        ACQUIRE: { actions: "addLease" },
        RELEASE: [
          // A lease of a process that is already gone: nothing to give back.
          { guard: not("isCurrentGeneration") },
          { guard: "hasOtherLeases", actions: "dropLease" },
          { target: "idleCountdown", actions: "armIdleRelease" },
        ],
        EXITED: { guard: "isCurrentGeneration", target: "failed", actions: ["recordFailure", "announceLost"] },
        LOST: {
          guard: "isCurrentGeneration",
          target: "failed",
          actions: ["recordFailure", "announceLost", { type: "stopProcess", params: { reason: "unreachable" } }],
        },
      },
    },
    /** No lease left: the process is stopped when the TTL runs out, unless someone acquires first. */
    idleCountdown: {
      after: { untilDeadline: { target: "idle", actions: { type: "stopProcess", params: { reason: "idle" } } } },
      on: {
        ACQUIRE: { target: "ready", actions: "addLease" },
        EXITED: { guard: "isCurrentGeneration", target: "idle" },
        LOST: {
          guard: "isCurrentGeneration",
          target: "idle",
          actions: { type: "stopProcess", params: { reason: "unreachable" } },
        },
      },
    },
    /** A crash or failed start: retry for whoever waits (after a backoff), within the budget. */
    failed: {
      always: [
        { guard: "restartBudgetSpent", target: "unavailable", actions: "announceUnavailable" },
        { guard: "hasWaiters", target: "backoff", actions: "armBackoff" },
        { target: "idle" },
      ],
    },
    backoff: {
      after: { untilDeadline: { target: "starting", actions: "nextGeneration" } },
      on: { ACQUIRE: { actions: "addWaiter" } },
    },
    /** Until the crashes age out of the restart window: then the next acquire tries again. */
    unavailable: {
      entry: assign({ waiting: 0 }),
      on: {
        ACQUIRE: [
          { guard: "restartBudgetSpent", actions: "announceUnavailable" },
          { target: "starting", actions: ["addWaiter", "nextGeneration"] },
        ],
      },
    },
    stopped: { type: "final" },
  },
  on: {
    STOP: { target: ".stopped", actions: { type: "stopProcess", params: { reason: "runtime stopping" } } },
  },
});
