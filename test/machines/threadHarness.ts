import { createActor } from "xstate";
import { fullCapabilities, type ProviderCapabilities } from "../../src/capabilities/index.js";
import type { DispatchMode } from "../../src/domain/entities.js";
import type { DomainEvent } from "../../src/domain/events.js";
import type { Effect, MachineEmitted, Outcome } from "../../src/machines/emitted.js";
import { threadMachine, type RollbackRequest, type ThreadInput } from "../../src/machines/thread.js";

/**
 * The thread machine alone, for thread.test.ts and threadRules.test.ts: createActor on it, everything it emits
 * collected (records, effects, outcomes), submits, run ends and rollbacks sent as events.
 */
export function openThread(input: Partial<ThreadInput> = {}) {
  const emitted: MachineEmitted[] = [];
  const actor = createActor(threadMachine, { input: { threadId: "thr_1", ...input } });
  actor.on("*", (e) => emitted.push(e));
  actor.start();
  const submit = (
    runId: string,
    mode: DispatchMode = "auto",
    capabilities: ProviderCapabilities = fullCapabilities(),
    providerTarget = "alpha",
  ) =>
    actor.send({
      type: "SUBMIT",
      runId,
      messageId: `msg_${runId}`,
      text: `text of ${runId}`,
      mode,
      providerTarget,
      capabilities,
    });
  const finish = (runId: string) => actor.send({ type: "RUN_FINISHED", runId });
  const rollback = (over: Partial<RollbackRequest> = {}) =>
    actor.send({
      type: "ROLLBACK",
      toRunId: "run_1",
      capabilities: fullCapabilities(),
      hasCheckpoint: true,
      laterTurns: 2,
      laterElsewhere: false,
      ...over,
    });
  const records = (): DomainEvent[] => emitted.flatMap((e) => (e.type === "record" ? [e.event] : []));
  const effects = (): Effect[] => emitted.flatMap((e) => (e.type === "effect" ? [e.effect] : []));
  const outcomes = (): Outcome[] => emitted.flatMap((e) => (e.type === "outcome" ? [e.outcome] : []));
  const policies = () => records().flatMap((r) => (r.type === "policy.applied" ? [r] : []));
  const started = () => effects().flatMap((e) => (e.type === "startRun" ? [e.runId] : []));
  /** Runs handed to the provider, each with whether it goes to the provider's own queue. */
  const handed = () => effects().flatMap((e) => (e.type === "startRun" ? [[e.runId, e.queued === true]] : []));
  const active = () => actor.getSnapshot().context.activeRunId;
  const state = () => actor.getSnapshot().value;
  const clear = () => void emitted.splice(0);
  return {
    actor,
    submit,
    finish,
    rollback,
    records,
    effects,
    outcomes,
    policies,
    started,
    handed,
    active,
    state,
    clear,
  };
}
