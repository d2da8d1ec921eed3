import { createActor } from "xstate";
import { fullCapabilities } from "../../src/capabilities/index.js";
import type { DomainEvent } from "../../src/domain/events.js";
import { pendingCall, providerThreadMachine, type LoadSituation } from "../../src/machines/providerThread.js";

/**
 * The provider-thread machine alone, started for app thread `thr_1` on target `alpha`, with what the tests send it
 * (a load situation, a binding) and read from it (its records, the provider call it waits on).
 */
export function openProviderThread() {
  const records: DomainEvent[] = [];
  const actor = createActor(providerThreadMachine, { input: { appThreadId: "thr_1", providerTarget: "alpha" } });
  actor.on("*", (emitted) => {
    if (emitted.type === "record") records.push(emitted.event);
  });
  actor.start();
  const load = (situation: Partial<LoadSituation> = {}) =>
    actor.send({
      type: "LOAD",
      situation: {
        sessionId: "ses_1",
        capabilities: fullCapabilities(),
        stored: null,
        divergent: false,
        missedRuns: false,
        hadBroken: false,
        fork: null,
        ...situation,
      },
    });
  const bind = (providerThreadId = "pth_new") =>
    actor.send({
      type: "BOUND",
      providerThreadId,
      handle: { threadRef: "native-1", resumeCursor: "cursor-1" },
      cwd: "/work",
    });
  const call = () => pendingCall(actor.getSnapshot())?.call ?? null;
  const types = () => records.map((r) => (r.type === "policy.applied" ? `policy:${r.policy}` : r.type));
  const policiesApplied = () => records.filter((r) => r.type === "policy.applied");
  return { actor, records, load, bind, call, types, policiesApplied };
}
