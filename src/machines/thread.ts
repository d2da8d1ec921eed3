import { and, assign, enqueueActions, setup } from "xstate";
import {
  canInterrupt,
  canQueueNatively,
  canRollbackProvider,
  canSteerNatively,
  canSwitchModeInSession,
  canSwitchModelInSession,
  canVerifyProviderRollback,
} from "../capabilities/index.js";
import { effect, outcome, policyApplied, record, refuseUnsupported, type MachineEmitted } from "./emitted.js";
import { runCreated, type QueuedRun, type ThreadContext, type ThreadEvent, type ThreadInput } from "./threadModel.js";

export type { QueuedRun, RollbackRequest, ThreadContext, ThreadEvent, ThreadInput } from "./threadModel.js";

/**
 * The app thread: serializes work. At most one run is active; follow-ups are steered into
 * it, queued behind it, or restart it. A queued follow-up goes to a provider that queues
 * natively at once (it holds the turn behind the active one); otherwise the runtime holds it
 * and delivers it at the turn boundary, never mid-turn.
 */

export const threadMachine = setup({
  types: {
    context: {} as ThreadContext,
    events: {} as ThreadEvent,
    input: {} as ThreadInput,
    emitted: {} as MachineEmitted,
  },
  guards: {
    wantsSteer: ({ event }) => event.type === "SUBMIT" && event.mode === "steer",
    wantsRestart: ({ event }) => event.type === "SUBMIT" && event.mode === "restart",
    /** `auto` steers only when the provider can steer natively; otherwise it queues. */
    autoSteersNatively: ({ context, event }) =>
      event.type === "SUBMIT" &&
      event.mode === "auto" &&
      !!context.activeCapabilities &&
      canSteerNatively(context.activeCapabilities),
    canQueueNatively: ({ event }) => event.type === "SUBMIT" && canQueueNatively(event.capabilities),
    /**
     * The follow-up can wait in the provider's own queue: it goes to the active run's target with the active run's
     * settings, and nothing waits in the runtime's queue ahead of it (order is kept).
     */
    fitsProviderQueue: ({ context, event }) =>
      event.type === "SUBMIT" &&
      event.providerTarget === context.activeTarget &&
      !context.settingsChanged &&
      context.queue.length === 0,
    canSwitchModelInSession: ({ event }) =>
      event.type === "CHANGE_MODEL" && canSwitchModelInSession(event.capabilities),
    canSwitchModeInSession: ({ event }) => event.type === "CHANGE_MODE" && canSwitchModeInSession(event.capabilities),
    canRollbackProvider: ({ event }) => event.type === "ROLLBACK" && canRollbackProvider(event.capabilities),
    canVerifyProviderRollback: ({ event }) =>
      event.type === "ROLLBACK" && canVerifyProviderRollback(event.capabilities),
    /** The later runs left nothing in any provider conversation: only files need restoring. */
    providerUntouched: ({ event }) => event.type === "ROLLBACK" && event.laterTurns === 0 && !event.laterElsewhere,
    laterRunsStayedOnThread: ({ event }) => event.type === "ROLLBACK" && !event.laterElsewhere,
    hasCheckpoint: ({ event }) => event.type === "ROLLBACK" && event.hasCheckpoint,
    canInterruptActiveRun: ({ context }) =>
      (!!context.activeCapabilities && canInterrupt(context.activeCapabilities)) || context.allowSessionStopInterrupt,
    isActiveRun: ({ context, event }) => event.type === "RUN_FINISHED" && event.runId === context.activeRunId,
    hasQueuedRuns: ({ context }) => context.queue.length > 0,
    hasDeliveredRuns: ({ context }) => context.delivered.length > 0,
  },
  actions: {
    createAndStartRun: enqueueActions(({ context, event, enqueue }) => {
      if (event.type !== "SUBMIT") return;
      const { threadId } = context;
      enqueue.assign({
        activeRunId: event.runId,
        activeCapabilities: event.capabilities,
        activeTarget: event.providerTarget,
        settingsChanged: false,
        nextOrdinal: context.nextOrdinal + 1,
      });
      enqueue.emit(record(runCreated(context, event)));
      enqueue.emit(effect({ type: "startRun", threadId, runId: event.runId }));
      enqueue.emit(outcome({ command: "submit", disposition: "started", runId: event.runId, queuePosition: 0 }));
    }),
    createAndQueueRun: enqueueActions(({ context, event, enqueue }, params: { atHead: boolean }) => {
      if (event.type !== "SUBMIT") return;
      const entry = { runId: event.runId, providerTarget: event.providerTarget, capabilities: event.capabilities };
      const queue = params.atHead ? [entry, ...context.queue] : [...context.queue, entry];
      enqueue.assign({ queue, nextOrdinal: context.nextOrdinal + 1 });
      enqueue.emit(record(runCreated(context, event)));
      if (params.atHead) {
        enqueue.emit(effect({ type: "interruptRun", threadId: context.threadId, runId: context.activeRunId! }));
        enqueue.emit(outcome({ command: "submit", disposition: "restart", runId: event.runId }));
      } else {
        const queuePosition = queue.indexOf(entry) + 1;
        enqueue.emit(outcome({ command: "submit", disposition: "queued", runId: event.runId, queuePosition }));
      }
    }),
    /** The provider queues natively: the run goes to it now, to wait in its queue behind the active run. */
    createAndDeliverRun: enqueueActions(({ context, event, enqueue }) => {
      if (event.type !== "SUBMIT") return;
      const entry = { runId: event.runId, providerTarget: event.providerTarget, capabilities: event.capabilities };
      const delivered = [...context.delivered, entry];
      enqueue.assign({ delivered, nextOrdinal: context.nextOrdinal + 1 });
      enqueue.emit(record(runCreated(context, event)));
      enqueue.emit(effect({ type: "startRun", threadId: context.threadId, runId: event.runId, queued: true }));
      const queuePosition = delivered.length;
      enqueue.emit(outcome({ command: "submit", disposition: "queued", runId: event.runId, queuePosition }));
    }),
    /** The active run ended: the first run the provider holds is the active one now (it is already the provider's). */
    activateDelivered: enqueueActions(({ context, enqueue }) => {
      const [next, ...rest] = context.delivered;
      if (!next) return;
      const { runId, capabilities, providerTarget } = next;
      enqueue.assign({
        activeRunId: runId,
        activeCapabilities: capabilities,
        activeTarget: providerTarget,
        delivered: rest,
      });
    }),
    steerActiveRun: enqueueActions(({ context, event, enqueue }) => {
      if (event.type !== "SUBMIT") return;
      const activeRunId = context.activeRunId!;
      enqueue.emit(outcome({ command: "submit", disposition: "steer", runId: activeRunId }));
      enqueue.emit(
        effect({
          type: "steerRun",
          threadId: context.threadId,
          runId: activeRunId,
          text: event.text,
          messageId: event.messageId,
        }),
      );
    }),
    refuseRestart: enqueueActions(({ context, enqueue }) => {
      const detail = "restart needs to interrupt the active run, and the provider cannot interrupt";
      const where = { threadId: context.threadId, runId: context.activeRunId };
      refuseUnsupported(where, "submit", "interrupt_unsupported", detail).forEach((e) => enqueue.emit(e));
    }),
    startNextQueued: enqueueActions(({ context, enqueue }) => {
      const [next, ...rest] = context.queue;
      if (!next) return;
      enqueue.assign({
        activeRunId: next.runId,
        activeCapabilities: next.capabilities,
        activeTarget: next.providerTarget,
        settingsChanged: false,
        queue: rest,
      });
      enqueue.emit(effect({ type: "startRun", threadId: context.threadId, runId: next.runId }));
    }),
    /** The provider cannot queue follow-ups itself: the runtime holds them until the turn boundary. */
    holdQueueInRuntime: enqueueActions(({ context, event, enqueue }) => {
      if (event.type !== "SUBMIT") return;
      const detail = `run ${event.runId} waits in the runtime's queue for the active run to end`;
      enqueue.emit(policyApplied({ threadId: context.threadId, runId: event.runId }, "queue_held_by_runtime", detail));
    }),
    switchModel: enqueueActions(({ context, event, enqueue }, params: { via: "in_session" | "new_session" }) => {
      if (event.type !== "CHANGE_MODEL") return;
      const { threadId } = context;
      if (params.via === "new_session") {
        const detail =
          "the provider cannot switch models in a session; " + `model ${event.model} gets a new provider session`;
        enqueue.emit(policyApplied({ threadId, runId: null }, "model_switch_new_session", detail));
      }
      enqueue.emit(record({ type: "thread.model_changed", threadId, model: event.model, via: params.via }));
    }),
    switchMode: enqueueActions(({ context, event, enqueue }, params: { via: "in_session" | "new_session" }) => {
      if (event.type !== "CHANGE_MODE") return;
      const { threadId } = context;
      const { interaction, approvals } = event.runtimeMode;
      if (params.via === "new_session") {
        const detail =
          "the provider cannot switch runtime modes in a session; " +
          `mode ${interaction} with approvals ${approvals} gets a new provider session`;
        enqueue.emit(policyApplied({ threadId, runId: null }, "mode_switch_new_session", detail));
      }
      enqueue.emit(record({ type: "thread.mode_changed", threadId, runtimeMode: event.runtimeMode, via: params.via }));
    }),
    beginRollback: enqueueActions(
      ({ context, event, enqueue }, params: { via: "provider_rollback" | "divergent" | "files_only" }) => {
        if (event.type !== "ROLLBACK") return;
        const { threadId } = context;
        if (params.via === "divergent") {
          const { threads } = event.capabilities;
          const [why, capability] = canRollbackProvider(event.capabilities)
            ? ["later runs ran on another provider thread", null]
            : !threads.canRollbackThread
              ? ["the provider cannot roll its threads back", "threads.canRollbackThread"]
              : ["the provider cannot roll its conversation back", "checkpointing.providerCanRollbackConversation"];
          const detail = `${why}; files are restored from the checkpoint and the provider thread is marked divergent`;
          const where = { threadId, runId: event.toRunId };
          enqueue.emit(policyApplied(where, "rollback_divergent", detail, capability));
        }
        enqueue.emit(effect({ type: "rollbackThread", threadId, toRunId: event.toRunId, via: params.via }));
        enqueue.emit(outcome({ command: "rollback", via: params.via, threadId }));
      },
    ),
    /** The provider neither returns nor shows its conversation after the cut: the rollback is trusted. */
    rollbackByResume: enqueueActions(({ context, event, enqueue }) => {
      if (event.type !== "ROLLBACK") return;
      const detail =
        `the provider drops the last ${event.laterTurns} turn(s) by resuming its conversation ` +
        "at the last kept message; it cannot show the result, so the cut is trusted";
      enqueue.emit(policyApplied({ threadId: context.threadId, runId: event.toRunId }, "rollback_by_resume", detail));
    }),
    refuseRollback: enqueueActions(({ context, event, enqueue }) => {
      if (event.type !== "ROLLBACK") return;
      const detail =
        "there is no app checkpoint of that run to restore (checkpoints off, unsupported or failed) " +
        "and the provider cannot roll back this thread's later turns";
      refuseUnsupported(
        { threadId: context.threadId, runId: event.toRunId },
        "rollback",
        "rollback_unsupported",
        detail,
      ).forEach((e) => enqueue.emit(e));
    }),
    refuseRollbackWhileBusy: enqueueActions(({ enqueue }) => {
      enqueue.emit(
        outcome({
          command: "rollback",
          refused: "conflict",
          detail: "the thread has an active or queued run, or a rollback in progress",
        }),
      );
    }),
    resumeActiveRun: assign(({ event }) =>
      event.type === "REATTACHED"
        ? { activeRunId: event.runId, activeCapabilities: event.capabilities, activeTarget: event.providerTarget }
        : {},
    ),
    clearActiveRun: assign({ activeRunId: null, activeCapabilities: null, activeTarget: null }),
    /** The active run's follow-ups need other settings (model, mode) than the session it runs in. */
    noteSettingsChanged: assign({ settingsChanged: true }),
    /** The record a run's session announced is what decisions about that run read, active or still waiting. */
    updateActiveCapabilities: assign(({ context, event }) => {
      if (event.type !== "RUN_CAPABILITIES") return {};
      const announced = (q: QueuedRun) => (q.runId === event.runId ? { ...q, capabilities: event.capabilities } : q);
      return {
        activeCapabilities: event.runId === context.activeRunId ? event.capabilities : context.activeCapabilities,
        delivered: context.delivered.map(announced),
        queue: context.queue.map(announced),
      };
    }),
    /** A queued run ended before it became active (cancelled in the runtime's queue, or dropped by the provider). */
    dropFromQueue: assign({
      queue: ({ context, event }) =>
        event.type === "RUN_FINISHED" ? context.queue.filter((q) => q.runId !== event.runId) : context.queue,
      delivered: ({ context, event }) =>
        event.type === "RUN_FINISHED" ? context.delivered.filter((q) => q.runId !== event.runId) : context.delivered,
    }),
  },
}).createMachine({
  id: "thread",
  context: ({ input }) => ({
    threadId: input.threadId,
    activeCapabilities: null,
    allowSessionStopInterrupt: input.allowSessionStopInterrupt ?? false,
    activeRunId: null,
    queue: input.queue ?? [],
    delivered: [],
    activeTarget: null,
    settingsChanged: false,
    nextOrdinal: input.nextOrdinal ?? 1,
  }),
  initial: "idle",
  states: {
    idle: {
      on: {
        SUBMIT: { target: "busy", actions: "createAndStartRun" },
        RESUME: { guard: "hasQueuedRuns", target: "busy", actions: "startNextQueued" },
        REATTACHED: { target: "busy", actions: "resumeActiveRun" },
        ROLLBACK: [
          {
            guard: "providerUntouched",
            target: "rollingBack",
            actions: { type: "beginRollback", params: { via: "files_only" } },
          },
          {
            guard: and(["canRollbackProvider", "laterRunsStayedOnThread", "canVerifyProviderRollback"]),
            target: "rollingBack",
            actions: { type: "beginRollback", params: { via: "provider_rollback" } },
          },
          {
            guard: and(["canRollbackProvider", "laterRunsStayedOnThread"]),
            target: "rollingBack",
            actions: ["rollbackByResume", { type: "beginRollback", params: { via: "provider_rollback" } }],
          },
          {
            guard: "hasCheckpoint",
            target: "rollingBack",
            actions: { type: "beginRollback", params: { via: "divergent" } },
          },
          { actions: "refuseRollback" },
        ],
      },
    },
    /** Provider rollback and file restore in progress: new messages wait for it. */
    rollingBack: {
      on: {
        SUBMIT: { actions: { type: "createAndQueueRun", params: { atHead: false } } },
        ROLLBACK: { actions: "refuseRollbackWhileBusy" },
        ROLLBACK_DONE: [{ guard: "hasQueuedRuns", target: "busy", actions: "startNextQueued" }, { target: "idle" }],
        RUN_FINISHED: { actions: "dropFromQueue" },
      },
    },
    busy: {
      on: {
        SUBMIT: [
          { guard: "wantsSteer", actions: "steerActiveRun" },
          { guard: "autoSteersNatively", actions: "steerActiveRun" },
          {
            guard: and(["wantsRestart", "canInterruptActiveRun"]),
            actions: { type: "createAndQueueRun", params: { atHead: true } },
          },
          { guard: "wantsRestart", actions: "refuseRestart" },
          { guard: and(["canQueueNatively", "fitsProviderQueue"]), actions: "createAndDeliverRun" },
          // Another target or other settings: not the provider's queue to hold, and no missing capability either.
          { guard: "canQueueNatively", actions: { type: "createAndQueueRun", params: { atHead: false } } },
          { actions: [{ type: "createAndQueueRun", params: { atHead: false } }, "holdQueueInRuntime"] },
        ],
        ROLLBACK: { actions: "refuseRollbackWhileBusy" },
        RUN_FINISHED: [
          { guard: and(["isActiveRun", "hasDeliveredRuns"]), actions: "activateDelivered" },
          { guard: and(["isActiveRun", "hasQueuedRuns"]), actions: "startNextQueued" },
          { guard: "isActiveRun", target: "idle", actions: "clearActiveRun" },
          { actions: "dropFromQueue" },
        ],
        RUN_CAPABILITIES: { actions: "updateActiveCapabilities" },
      },
    },
  },
  on: {
    CHANGE_MODEL: [
      {
        guard: "canSwitchModelInSession",
        actions: ["noteSettingsChanged", { type: "switchModel", params: { via: "in_session" } }],
      },
      { actions: ["noteSettingsChanged", { type: "switchModel", params: { via: "new_session" } }] },
    ],
    CHANGE_MODE: [
      {
        guard: "canSwitchModeInSession",
        actions: ["noteSettingsChanged", { type: "switchMode", params: { via: "in_session" } }],
      },
      { actions: ["noteSettingsChanged", { type: "switchMode", params: { via: "new_session" } }] },
    ],
  },
});
