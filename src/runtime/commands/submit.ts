import type { z } from "zod";
import type { SendMessageInput, SendMessageInputSchema, SendMessageReceipt } from "../../domain/commands.js";
import { DEFAULT_RUNTIME_MODE, sameRuntimeMode } from "../../domain/entities.js";
import type { DomainEvent } from "../../domain/events.js";
import type { IdSource } from "../../domain/ids.js";
import { policyEvent, type Outcome } from "../../machines/emitted.js";
import type { PolicyName } from "../../machines/policies.js";
import type { Actors } from "../actors.js";
import { handoffRefusalFor } from "../handoff.js";
import type { Projections, ThreadView } from "../projections.js";
import type { Target } from "../targets.js";
import { findTarget, findThread } from "./checks.js";
import { expectOutcome, refusal } from "./outcomes.js";

/** What submitting a message needs: the thread actors, the read model, ids, and the dispatcher's step. */
export interface SubmitHost {
  readonly views: Projections;
  readonly actors: Pick<Actors, "threads">;
  readonly ids: IdSource;
  run(fn: () => void): Outcome[];
  commit(event: DomainEvent): void;
}

/** What submitting a message needs: the thread actors, the read model, ids, the targets, the dispatcher's step. */
export interface SendMessageHost extends SubmitHost {
  readonly targets: ReadonlyMap<string, Target>;
}

type Parsed = Omit<SendMessageInput, "mode" | "commandId"> & { mode: NonNullable<SendMessageInput["mode"]> };

/** The target: the one asked for, else the thread's last run's, else the thread's. */
export function sendMessage(
  d: SendMessageHost,
  p: z.output<typeof SendMessageInputSchema>,
): Omit<SendMessageReceipt, "commandId"> {
  const thread = findThread(d, p.threadId);
  const providerTarget = p.providerTarget ?? thread.runs.at(-1)?.providerTarget ?? thread.providerTarget;
  const target = findTarget(d, providerTarget, "providerTarget");
  return submitMessage(d, thread, target, p);
}

/**
 * A user message to a thread, as the thread machine decides it: a new run (started or
 * queued), a steer into the active run, or a restart. A switch to a provider that could not
 * be told the conversation is refused before anything is recorded for the run; a model
 * change goes through the thread's model-switch policy first.
 */
export function submitMessage(
  d: SendMessageHost,
  thread: ThreadView,
  target: Target,
  p: Parsed,
): Omit<SendMessageReceipt, "commandId"> {
  const providerTarget = target.id;
  const threadActor = d.actors.threads.get(thread.threadId)!;
  const refused = handoffRefusalFor(
    d.views,
    thread.threadId,
    { id: target.id, capabilities: target.capabilities(), adapterForks: !!target.adapter.forkThread },
    (id) => d.targets.get(id)?.capabilities() ?? null,
  );
  if (refused) {
    const policy = (refused.details as { policy: PolicyName }).policy;
    d.run(() => d.commit(policyEvent({ threadId: thread.threadId, runId: null }, policy, refused.message)));
    throw refused;
  }
  if (p.model && p.model !== thread.model) {
    d.run(() => threadActor.send({ type: "CHANGE_MODEL", model: p.model!, capabilities: target.capabilities() }));
  }
  const runtimeMode = p.runtimeMode && { ...DEFAULT_RUNTIME_MODE, ...p.runtimeMode };
  if (runtimeMode && !sameRuntimeMode(runtimeMode, thread.runtimeMode)) {
    d.run(() => threadActor.send({ type: "CHANGE_MODE", runtimeMode, capabilities: target.capabilities() }));
  }
  const runId = d.ids.next("run");
  const submitEvent = {
    type: "SUBMIT" as const,
    runId,
    messageId: d.ids.next("msg"),
    text: p.text,
    mode: p.mode,
    providerTarget,
    capabilities: target.capabilities(),
  };
  const outcomes = d.run(() => threadActor.send(submitEvent));
  const submit = expectOutcome(outcomes, "submit");
  const base = { threadId: thread.threadId, via: null, queuePosition: 0 };
  if ("disposition" in submit) {
    if (submit.disposition === "started" || submit.disposition === "queued") {
      return { ...base, runId: submit.runId, disposition: submit.disposition, queuePosition: submit.queuePosition };
    }
    if (submit.disposition === "restart") return { ...base, runId: submit.runId, disposition: "restarting" as const };
  }
  const steer = expectOutcome(outcomes, "steer");
  if ("via" in steer) return { ...base, runId: steer.runId, disposition: "steered" as const, via: steer.via };
  if (p.mode === "auto" && steer.refused === "conflict") {
    // `auto` steers only what can take a steer now (e.g. not a run being interrupted): else it queues.
    const queued = expectOutcome(
      d.run(() => threadActor.send({ ...submitEvent, mode: "queue" })),
      "submit",
    );
    if ("disposition" in queued && queued.disposition === "queued")
      return { ...base, runId: queued.runId, disposition: "queued" as const, queuePosition: queued.queuePosition };
  }
  throw refusal(steer);
}
