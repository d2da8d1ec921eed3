import type { ProviderCapabilities } from "../index.js";
import type { Harness } from "./harness.js";
import {
  claims,
  completed,
  declared,
  finding,
  refusal,
  textOfRun,
  told,
  untold,
  type Check,
  type Finding,
} from "./findings.js";
import { sessionChecks } from "./sessions.js";
import { toolChecks } from "./tools.js";
import { subagentChecks } from "./subagents.js";
import { switchingChecks } from "./switching.js";
import { holdingsChecks, rollbackSnapshot, snapshotAtFault } from "./holdings.js";
import { APPROVAL_FIELD, APPROVAL_KINDS, ARTIFACTS, type ArtifactKind } from "./model.js";

/**
 * What the seed says must be observable in each model state, checked on what a user sees (the run's status, its
 * items and requests, the `policy.applied` degradations in the log, typed `capability_unsupported` refusals) and on
 * the provider's own evidence (`WorldRun.lastTurn`). Each check gives the fields it exercises a finding.
 */

const lastTurn = (h: Harness) => h.world.lastTurn();
const priorOf = (h: Harness) => JSON.stringify(lastTurn(h)?.priorUserTexts ?? null);

function textTurn(h: Harness, caps: ProviderCapabilities): Finding[] {
  const runId = h.runId;
  const out: Finding[] = [];
  const terminal = h.terminal(runId);
  const correlation = terminal?.correlation ?? "(none)";
  const done = terminal?.status === "completed";
  const inferred = h.policies((e) => e.runId === runId).includes("terminal_inferred_from_idle");
  if (caps.turns.emitsTurnCompleted) {
    const sent = h.provider.some((e) => e.type === "turn.terminal");
    out.push(
      finding(
        "turns.emitsTurnCompleted",
        sent && !inferred && done,
        "the provider sent the turn's terminal",
        `run ${terminal?.status}, provider terminal ${sent ? "sent" : "never sent"}, correlation ${correlation}`,
      ),
    );
    if (caps.turns.terminalStatusQuality !== "none")
      out.push(
        finding(
          "turns.terminalStatusQuality",
          correlation === caps.turns.terminalStatusQuality,
          `the run's end is correlated ${correlation}`,
          `the run's end is correlated ${correlation}`,
        ),
      );
  } else {
    out.push(
      finding(
        "turns.emitsTurnCompleted",
        correlation === "inferred" && inferred && done,
        "no terminal: the end was inferred at idle (terminal_inferred_from_idle)",
        `run ${terminal?.status}, correlation ${correlation}, inferred from idle: ${inferred}`,
      ),
    );
  }
  if (caps.turns.emitsTurnStarted) {
    const started = h.provider.some((e) => e.type === "turn.started");
    out.push(finding("turns.emitsTurnStarted", started, "turn.started streamed", "no turn.started streamed"));
  }
  const bound = h.events("attempt.turn_bound", (e) => e.runId === runId)[0];
  const turnRef = bound?.nativeTurnRef ?? null;
  for (const f of ["turns.exposesNativeTurnId", "identity.nativeTurnIds"])
    if (claims(declared(caps, f)))
      out.push(finding(f, turnRef !== null, `native turn ref ${turnRef}`, "the turn was bound with no native ref"));
  const thread = h.events("provider_thread.bound", (e) => e.threadId === h.threadId)[0];
  const threadRef = thread?.nativeThreadRef ?? null;
  for (const f of ["threads.exposesNativeThreadId", "identity.nativeThreadIds"])
    if (claims(declared(caps, f)))
      out.push(finding(f, threadRef !== null, `native thread ref ${threadRef}`, "the thread has no native ref"));
  const message = h.events("node.started", (e) => e.runId === runId && e.kind === "assistant_message")[0];
  if (claims(caps.identity.nativeItemIds))
    out.push(
      finding(
        "identity.nativeItemIds",
        !!message?.nativeRef,
        `native item ref ${message?.nativeRef}`,
        message ? "the assistant message has no native ref" : "no assistant message",
      ),
    );
  const firstTurn = h.policies((e) => e.threadId === h.threadId).includes("thread_created_with_first_turn");
  out.push(
    caps.threads.canCreateEmptyThread
      ? finding("threads.canCreateEmptyThread", !firstTurn, "an empty thread was made", "made with its first turn")
      : finding("threads.canCreateEmptyThread", firstTurn, "thread_created_with_first_turn", "no degradation"),
  );
  if (caps.streaming.streamsAssistantText) {
    const deltas = h.provider.filter((e) => e.type === "item.delta" && e.kind === "assistant_message").length;
    out.push(
      finding("streaming.streamsAssistantText", deltas > 0, `text streamed in ${deltas} delta(s)`, "no text delta"),
    );
  }
  const closed = message && h.events("node.completed", (e) => e.nodeId === message.nodeId)[0];
  const settledBy = closed ? closed.settledBy : "(never)";
  out.push(
    caps.streaming.emitsMessageCompleted
      ? finding("streaming.emitsMessageCompleted", settledBy === "provider", "closed by the provider", settledBy)
      : finding("streaming.emitsMessageCompleted", settledBy === "runtime", "closed at the terminal", settledBy),
  );
  return out;
}

function forkChecks(fields: string[], native: boolean, priorWanted: (h: Harness) => string[]): Check {
  return (h) => {
    const threadId = h.forkThreadId!;
    const resolution = h.events("fork.resolved", (e) => e.threadId === threadId)[0]?.resolution ?? "(none)";
    const synthetic = h.policies((e) => e.threadId === threadId).includes("synthetic_fork");
    const prior = JSON.stringify(h.latestTurnOn(threadId)?.priorUserTexts ?? null);
    const wanted = JSON.stringify(priorWanted(h));
    // A fork is its own conversation: the parent's next turn has not heard what the fork said.
    const parent = h.latestTurnOn(h.threadId);
    const heard = [...(parent?.priorUserTexts ?? []), parent?.context?.text ?? ""];
    const shared = !!h.forkText && heard.some((t) => t.includes(h.forkText!));
    const ok =
      !shared && (native ? resolution === "native" && !synthetic && prior === wanted : resolution === "portable");
    const seen =
      `fork ${resolution}, synthetic_fork ${synthetic ? "recorded" : "not recorded"}` +
      (shared ? `; the parent's next turn had what the fork said (${h.forkText})` : "");
    const yes = native ? `native fork; the provider had ${prior}` : `${seen}`;
    return fields.map((f) => finding(f, ok && (native || synthetic), yes, `${seen}; the provider had ${prior}`));
  };
}

/**
 * A plan streamed as it is made arrives while the turn works, before the reply it leads to (the path's turn updates
 * its plan, then replies); plan updates with item ids carry them.
 */
function planStream(h: Harness, caps: ProviderCapabilities, type: "plan.updated" | "todo.updated"): Finding[] {
  const out: Finding[] = [];
  const at = h.provider.findIndex((e) => e.type === type);
  const updates = h.provider.filter((e) => e.type === type);
  if (at < 0) return out;
  if (type === "plan.updated" && caps.streaming.streamsPlanText) {
    const reply = h.provider.findIndex((e) => "kind" in e && e.kind === "assistant_message");
    const early = reply < 0 || at < reply;
    const seen = early ? "the plan arrived while the turn worked" : "the plan arrived only after the turn's reply";
    out.push(finding("streaming.streamsPlanText", early, seen, seen));
  }
  if (caps.planning.planDeltasHaveItemIds) {
    const bare = updates.filter((e) => !("itemRef" in e) || !e.itemRef).length;
    const seen = `${bare} of ${updates.length} ${type} event(s) without an item id`;
    out.push(finding("planning.planDeltasHaveItemIds", bare === 0, seen, seen));
  }
  return out;
}

function artifactChecks(): Record<string, Check> {
  const out: Record<string, Check> = {};
  const events = { plan: "plan.updated", todo: "todo.updated", proposed_plan: "plan.proposed" } as const;
  const policy = {
    plan: "no_plan_artifacts",
    todo: "no_todo_artifacts",
    proposed_plan: "no_proposed_plans",
    question: "questions_as_text",
  };
  for (const kind of Object.keys(ARTIFACTS) as ArtifactKind[]) {
    const field = ARTIFACTS[kind];
    const produced = (h: Harness) =>
      kind === "question"
        ? h.events("request.opened", (e) => e.runId === h.runId && e.payload.kind === "user_input").length
        : h.events(events[kind], (e) => e.runId === h.runId).length;
    out[`shown_${kind}`] = (h, caps) => [
      finding(field, produced(h) > 0, `${kind} recorded`, `no ${kind} recorded`),
      ...(kind === "plan" || kind === "todo" ? planStream(h, caps, events[kind]) : []),
    ];
    out[`asText_${kind}`] = (h) => {
      const degraded = produced(h) === 0 && h.policies().includes(policy[kind]);
      return [finding(field, degraded, `${policy[kind]}`, `degradation ${policy[kind]} not as the seed says`)];
    };
  }
  out["answered_question"] = (h) => [completed(h, h.runId, ARTIFACTS.question)];
  return out;
}

function approvalChecks(): Record<string, Check> {
  const out: Record<string, Check> = {};
  for (const kind of APPROVAL_KINDS) {
    const field = APPROVAL_FIELD[kind];
    const opened = (h: Harness) => h.events("request.opened", (e) => e.runId === h.runId && e.payload.kind === kind);
    out[`asked_${kind}`] = (h, caps) => {
      const request = opened(h)[0];
      const found = [finding(field, !!request, `a ${kind} approval was asked`, `no ${kind} approval was asked`)];
      for (const f of ["approvals.approvalsHaveNativeRequestIds", "identity.nativeRequestIds"])
        if (request && claims(declared(caps, f)))
          found.push(finding(f, request.nativeRef !== null, `native ref ${request.nativeRef}`, "no native ref"));
      return found;
    };
    out[`approved_${kind}`] = (h) => [completed(h, h.runId, field)];
    out[`unasked_${kind}`] = (h, caps) => {
      // A provider that asks for nothing at all runs under the sandbox policy, recorded once for its session.
      const asksNothing = APPROVAL_KINDS.every((k) => !claims(declared(caps, APPROVAL_FIELD[k])));
      const bySandbox = !asksNothing || h.policies().includes("approvals_by_sandbox");
      const ok = opened(h).length === 0 && h.terminal(h.runId)?.status === "completed" && bySandbox;
      const yes = `ran under the sandbox without asking${asksNothing ? " (approvals_by_sandbox)" : ""}`;
      return [finding(field, ok, yes, `asked anyway, did not complete, or no approvals_by_sandbox`)];
    };
  }
  return out;
}

const both =
  (...all: Check[]): Check =>
  (h, caps) =>
    all.flatMap((check) => check(h, caps));
const forkThread = (h: Harness) => h.forkThreadId!;
/** The field a fork from an earlier turn answers for: the fork itself, or forking from a turn. */
const forkEarlierField = (caps: ProviderCapabilities) => [
  caps.threads.canForkThread ? "threads.canForkFromTurn" : "threads.canForkThread",
];
/** The field a divergent rollback answers for: the provider's rollback, where the thread allows one. */
const divergentField = (caps: ProviderCapabilities) => [
  caps.threads.canRollbackThread ? "checkpointing.providerCanRollbackConversation" : "threads.canRollbackThread",
];
/** A rollback returns to the app's checkpoint of the run it goes back to, where the app checkpoints files. */
const checkpointed: Check = (h, caps) => {
  if (!caps.checkpointing.appCanCheckpointFilesystem) return [];
  const checkpoint = (h.lastReceipt as { checkpointId?: string | null } | null)?.checkpointId ?? null;
  const seen = checkpoint ? `restored checkpoint ${checkpoint}` : "no checkpoint restored";
  return [finding("checkpointing.appCanCheckpointFilesystem", checkpoint !== null, seen, seen)];
};
const STEER = "turns.supportsActiveSteering";
const RESTART = "turns.supportsSteeringByInterruptRestart";
const receiptOf = (h: Harness) => h.lastReceipt as { disposition?: string; via?: string } | null;

export const checks: Record<string, Check> = {
  answered: textTurn,
  resumed: (h) => {
    const rebuilt = h.events("provider_thread.bound", (e) => e.threadId === h.threadId && e.via === "rebuilt");
    const ok =
      h.terminal(h.runId)?.status === "completed" && rebuilt.length === 0 && priorOf(h).includes(textOfRun(h, 0));
    const seen = `${rebuilt.length ? "the thread was rebuilt" : "resumed"}; the provider had ${priorOf(h)}`;
    return [finding("primitive.resume", ok, seen, seen)];
  },
  forkedNative: () => [],
  forkedSynthetic: () => [],
  forkNativeAnswered: forkChecks(["threads.canForkThread"], true, (h) => [textOfRun(h, 0)]),
  forkSyntheticAnswered: both(
    forkChecks(["threads.canForkThread"], false, () => []),
    told(forkThread),
  ),
  forkedUntold: () => [],
  forkRefused: untold(() => ["threads.canForkThread"]),
  forkedEarlierUntold: () => [],
  forkEarlierRefused: untold(forkEarlierField),
  forkedEarlierNative: () => [],
  forkedEarlierSynthetic: () => [],
  // The fork of the whole thread has its own path: this one answers for forking from a turn.
  forkEarlierNativeAnswered: forkChecks(["threads.canForkFromTurn"], true, (h) => [textOfRun(h, 0)]),
  forkEarlierSyntheticAnswered: both(
    (h, caps) => forkChecks(forkEarlierField(caps), false, () => [])(h, caps),
    told(forkThread),
  ),
  rolledBack: both((h, caps) => {
    const provider = h.rollbackReceipt?.provider ?? h.lastError?.code ?? "(none)";
    // A rollback the runtime could not take as done, because of the snapshot it returned, is the snapshot's fault.
    const blamed = provider === "rolled_back" ? null : snapshotAtFault(h, caps);
    if (blamed) return blamed.fields.map((f) => finding(f, false, "", blamed.why));
    return ["threads.canRollbackThread", "checkpointing.providerCanRollbackConversation"].map((f) =>
      finding(f, provider === "rolled_back", "the provider rolled back", `rollback: ${provider}`),
    );
  }, checkpointed),
  rolledBackAnswered: both((h) => {
    const ok = priorOf(h) === JSON.stringify([textOfRun(h, 0)]);
    return ["threads.canRollbackThread", "checkpointing.providerCanRollbackConversation"].map((f) =>
      finding(f, ok, `after the rollback the provider had ${priorOf(h)}`, `the provider still had ${priorOf(h)}`),
    );
  }, rollbackSnapshot),
  rolledBackDivergent: both((h, caps) => {
    const provider = (h.lastReceipt as { provider?: string } | null)?.provider ?? h.lastError?.code ?? "(none)";
    const ok = provider === "divergent" && h.policies().includes("rollback_divergent");
    const field = caps.threads.canRollbackThread
      ? "checkpointing.providerCanRollbackConversation"
      : "threads.canRollbackThread";
    return [finding(field, ok, "files restored, provider thread divergent", `rollback: ${provider}`)];
  }, checkpointed),
  divergentRebuilt: both(
    told((h) => h.threadId),
    (h, caps) => {
      // Recorded for the thread as its next run realigns it (the policy names no run of its own).
      const ok = h.policies((e) => e.threadId === h.threadId).includes("divergent_thread_rebuilt");
      return divergentField(caps).map((f) => finding(f, ok, "divergent_thread_rebuilt on the next run", "not rebuilt"));
    },
  ),
  rebuildRefused: untold(divergentField),
  rollbackRefused: (h) =>
    refusal(h, "rollback_unsupported", ["threads.canRollbackThread", "checkpointing.appCanCheckpointFilesystem"]),
  steered: (h) => {
    const receipt = receiptOf(h);
    const ok = receipt?.disposition === "steered" && receipt.via === "native";
    return [finding(STEER, ok, "steered natively", `steer ${receipt?.disposition ?? h.lastError?.code}`)];
  },
  steeredDone: (h) => {
    const steers = lastTurn(h)?.steers ?? [];
    const ok = steers.includes(h.steerText) && h.terminal(h.runId)?.status === "completed";
    return [
      finding(STEER, ok, "the provider's turn took the steer", `the provider's turn saw ${JSON.stringify(steers)}`),
    ];
  },
  steerRestarted: (h, caps) => {
    const runId = h.runId;
    const receipt = receiptOf(h);
    const attempts = h.events("attempt.started", (e) => e.runId === runId);
    const restarted = attempts.length === 2 && attempts[1]!.reason === "steering_restart";
    const policy = h.policies((e) => e.runId === runId).includes("steer_by_interrupt_restart");
    const tookSteer = lastTurn(h)?.text === h.steerText;
    const ok = receipt?.via === "interrupt_restart" && restarted && policy && tookSteer;
    const seen = `receipt via ${receipt?.via}, ${attempts.length} attempts, policy ${policy}, took steer ${tookSteer}`;
    // Restarting waits for the interrupted attempt to end: one that never did is the interrupt's fault.
    if (receipt?.via === "interrupt_restart" && attempts.length === 1 && caps.turns.supportsInterrupt)
      return [finding("turns.supportsInterrupt", false, "", `${seen}: the interrupted attempt never ended`)];
    const out = [finding(STEER, ok, "steer_by_interrupt_restart", seen), finding(RESTART, ok, "restarted", seen)];
    if (caps.turns.supportsInterrupt)
      out.push(finding("turns.supportsInterrupt", ok, "interrupted for the restart", seen));
    return [...out, completed(h, runId, RESTART)];
  },
  steerRefused: (h) => refusal(h, "steer_unsupported", [STEER]),
  interrupted: (h, caps) => {
    const status = h.terminal(h.runId)?.status ?? "(not ended)";
    const via = (h.lastReceipt as { via?: string } | null)?.via;
    // The held turn could not have ended on its own (its gate was never opened): its terminal says interrupted.
    const said = h.provider.findLast((e) => e.type === "turn.terminal");
    const mislabelled = !!said && said.type === "turn.terminal" && said.status !== "interrupted";
    if (mislabelled && claims(caps.turns.terminalStatusQuality) && via === "native")
      return [finding("turns.terminalStatusQuality", false, "", `the interrupted turn's terminal said ${said.status}`)];
    const ok = status === "interrupted" && via === "native";
    return [finding("turns.supportsInterrupt", ok, "interrupted natively", `interrupt via ${via}, run ${status}`)];
  },
  interruptRefused: (h) => refusal(h, "interrupt_unsupported", ["turns.supportsInterrupt"]),
  queuedAtProvider: (h) => {
    const held = h.policies().includes("queue_held_by_runtime");
    return [finding("turns.supportsQueuedMessages", !held, "handed to the provider", "held by the runtime")];
  },
  queuedByRuntime: (h) => {
    const held = h.policies().includes("queue_held_by_runtime");
    return [finding("turns.supportsQueuedMessages", held, "queue_held_by_runtime", "no queue_held_by_runtime")];
  },
  askedAgain: (h, caps) => {
    const refs = h.events("request.opened").map((e) => e.nativeRef);
    const seen = `${refs.length} requests, native refs ${refs.join(", ")}`;
    if (caps.identity.nativeRequestIds !== "strong" || refs.some((r) => !r)) return [];
    return [finding("identity.nativeRequestIds", refs.length >= 2 && new Set(refs).size === refs.length, seen, seen)];
  },
  ...holdingsChecks,
  ...subagentChecks,
  ...sessionChecks,
  ...toolChecks,
  ...switchingChecks,
  ...approvalChecks(),
  ...artifactChecks(),
};
