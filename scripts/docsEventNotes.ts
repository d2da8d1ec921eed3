/**
 * When each domain event is emitted, and what its less obvious fields mean: the prose of
 * docs/events.md, which scripts/docsEvents.ts merges with the fields it reads from the zod
 * schemas. A description given in the schema itself (`.describe()` or `.meta()`) wins over the
 * one here. The docs test fails when an event type has no entry here, or an entry names an
 * event type or a field the schema no longer has.
 */

export interface EventNote {
  /** When the runtime commits it. */
  when: string;
  /** Notes on single fields, by field name. */
  fields?: Record<string, string>;
}

export const EVENT_NOTES: Record<string, EventNote> = {
  "thread.created": {
    when: "`createThread` made an app thread, or `forkThread` made a fork (then with `lineage`).",
    fields: { lineage: "the parent thread and the run the fork starts after; null for a thread that is no fork" },
  },
  "run.created": {
    when: "`sendMessage` became a new run (started at once or queued); `ordinal` numbers the thread's runs from 1.",
    fields: { mode: "the mode the message was sent with" },
  },
  "run.state": {
    when:
      "A run moved to a non-terminal status: `starting` when an attempt begins, `running` when its turn streams, " +
      "`waiting` while a request of its is open.",
  },
  "run.terminal": {
    when:
      "A run ended, once: the provider reported the turn's terminal, the run failed (a lost session, a silent turn, " +
      "a provider error), was interrupted, or was cancelled (by `close()`, or by recovery after a crash: " +
      "`reason` `runtime_restarted`).",
    fields: {
      failure:
        "what failed, typed (`failureClass` is an error code such as `host_unavailable` or `turn_silent`); " +
        "null unless `status` is `failed`",
    },
  },
  "attempt.started": {
    when:
      "A run begins an attempt: its first one, or a new one after an interrupt-restart steer or a restart. " +
      "Its root node (`rootNodeId`) holds the turn's items.",
  },
  "attempt.turn_bound": {
    when:
      "The provider accepted the attempt's turn (`sendRun` replied): " +
      "the attempt is bound to its provider thread and turn.",
    fields: { nativeTurnRef: "the provider's own turn id, when it exposes one" },
  },
  "attempt.terminal": {
    when: "An attempt ended: with its run, or `superseded` when a steer by interrupt-restart replaced it.",
  },
  "node.started": {
    when:
      "An item of a turn began: an assistant message, reasoning, a tool or command, a file change, a subagent... " +
      "The node is keyed by its provider ref where the provider gives one (by the `identity` capability).",
    fields: {
      parentNodeId: "the node it hangs under (a subagent's items under the subagent); null for the root node",
      detail: "what the item is about: command, path, tool name...",
    },
  },
  "node.delta": {
    when:
      "A node streamed: assistant or reasoning text (`stream: text`), or command and tool output (`stream: output`). " +
      "The bulk of all events. The pieces of one node's stream that reach the log within one commit group (see " +
      "`groupCommitMs`) are one record, their texts joined in order: a record is not a provider frame.",
  },
  "node.completed": {
    when:
      "A node ended: the provider completed it, or the runtime closed it when its turn ended (`settledBy: runtime`: " +
      "the completion barrier).",
    fields: { settledBy: "`runtime` when the runtime closed it at the turn's end rather than on a provider event" },
  },
  "plan.updated": { when: "The provider published its plan (steps with statuses), where it emits plan updates." },
  "plan.proposed": { when: "The provider proposed a plan to approve (Claude leaving plan mode)." },
  "todo.updated": { when: "The provider's todo list changed (Claude's TodoWrite, the scripted `todo` step)." },
  "request.opened": {
    when:
      "The provider asked something that waits for an answer: an approval or a question. " +
      "Answer it with `respond({ requestId })`.",
    fields: {
      responseCapability:
        "whether it can still be answered: `live` in its session and host generation, or `not_resumable`",
    },
  },
  "request.resolved": {
    when: "A request was answered: by `respond` (`by: user`), or by the provider itself (`by: provider`).",
  },
  "request.closed": {
    when:
      "A request will never be answered: `expired` (its session died, or the runtime restarted: `not_resumable`) " +
      "or `cancelled` (its run ended).",
  },
  "interrupt.requested": {
    when:
      "`interrupt` (or a restart) was accepted for a run. The run becomes `interrupted` only when the provider " +
      "reports the terminal.",
    fields: {
      via: "`native`, `session_stop` (the destructive fallback), or `not_started` (the run had no attempt yet)",
    },
  },
  "interrupt.acknowledged": { when: "The provider took the interrupt of an attempt." },
  "interrupt.failed": {
    when:
      "An interrupt could not be delivered after bounded retries while the turn was live; " +
      "the run goes on and can be interrupted again.",
  },
  "steer.applied": {
    when:
      "A steer reached the run: natively into the live turn once the provider took it, " +
      "or by interrupt-restart as the new attempt's text.",
    fields: {
      sentAfterSeq:
        "the log head when the steer was sent: the transcript places it there, " +
        "even when the provider answered before the steer was recorded",
    },
  },
  "policy.applied": {
    when:
      "A degradation fired: a missing capability made the runtime do something else (`fallback`) " +
      "or refuse (`refused`). The policies are listed in [degradations.md](degradations.md).",
    fields: {
      threadId: "null for a session-wide policy (approvals, plan and todo artifacts)",
      capability: "the capability path the guard read",
    },
  },
  "event.fenced": {
    when:
      "A provider event arrived for an attempt that was superseded or a run that already ended: recorded, " +
      "never applied.",
  },
  "session.started": { when: "A provider session started; it carries the capability record in force for it." },
  "session.state": {
    when:
      "A provider session changed status: `ready` and `running` with its turns, `stopped` (idle, retired, closed, " +
      "or found stopped after a restart), `error` (its host died or its stream failed).",
  },
  "provider_thread.bound": {
    when: "An app thread was bound to a provider thread for a run: created, resumed, forked, or replaced (see `via`).",
    fields: {
      via:
        "`rebuilt`: replaces one that could not be resumed; `replaced`: one the provider reported broken; " +
        "`refreshed`: a fresh thread for a provider the conversation returns to without delta handoff; `realigned`: " +
        "a fresh thread after a divergent rollback; `rolled_back`: the same provider thread, moved by a rollback",
      resumeCursor: "what the adapter needs to resume the thread in a later session",
    },
  },
  "provider_thread.closed": {
    when:
      "The provider reported a thread unusable (a turn terminal with disposition `broken`): " +
      "the next run gets a replacement.",
  },
  "handoff.created": {
    when:
      "Before the turn that carries it: the conversation is handed to a provider thread that has not seen all of it " +
      "(a provider switch, a portable fork, a failed resume, a broken thread, a divergent rollback).",
    fields: {
      supersedesHandoffId:
        "an earlier handoff to the same provider thread that was never consumed: replaced, never edited",
    },
  },
  "fork.recorded": {
    when: "`forkThread` recorded the fork's lineage; how it forks is decided at its first run.",
    fields: {
      fromSubagentNodeId: "set for a fork of one subagent's conversation (`forkThread({ fromSubagentNodeId })`)",
    },
  },
  "subagent.thread_bound": {
    when:
      "A subagent's child thread became an addressable provider thread: the provider named it and its record " +
      "exposes subagent thread ids (`subagents.exposesSubagentThreadIds`); otherwise `subagent_not_addressable`.",
    fields: {
      providerThreadId: "derived from the subagent's node: a replayed transcript binds the same id",
      nativeThreadRef: "the provider's own id of the child thread: how wait, close and a native fork address it",
    },
  },
  "subagent.close_requested": {
    when: "`closeSubagent` asked the provider to close the subagent, before the call: a concurrent close asks no more.",
  },
  "fork.resolved": {
    when: "The fork's first run decided: a `native` provider fork, or a `portable` one from app context.",
  },
  "thread.model_changed": {
    when:
      "`sendMessage` with a new `model`: switched in the live session, " +
      "or by a new session where the provider cannot switch.",
  },
  "thread.mode_changed": {
    when:
      "`sendMessage` with a new `runtimeMode` (plan mode, approval policy): switched per turn in the live " +
      "session, or by a new session where the provider cannot switch.",
  },
  "checkpoint.captured": {
    when:
      "With the `checkpoints` option: a baseline before a run, a final checkpoint after it, " +
      "or a nested one for a subagent, committed to the private checkpoint store.",
  },
  "checkpoint.failed": { when: "A checkpoint could not be captured (the run goes on without it; `message` says why)." },
  "checkpoint.skipped": {
    when:
      "Filesystem activity that got no checkpoint of its own: written by runtimes before nested scopes " +
      "became app-owned (every subagent now gets one); still read from older logs.",
  },
  "rollback.started": {
    when:
      "`rollback` is about to touch the provider and the files; " +
      "recovery finds it if no `rollback.applied` follows.",
  },
  "checkpoint.restore_started": {
    when:
      "A rollback is about to restore files from a checkpoint: durable before the first file changes, " +
      "so a restart can finish it.",
  },
  "checkpoint.restore_settled": {
    when:
      "A restore that did not end normally: `finished` by recovery after a restart, " +
      "or `unknown` when it could not be finished (the files named may hold either state).",
  },
  "rollback.applied": {
    when: "A rollback finished: later runs are `rolled_back`, later checkpoints stale.",
    fields: {
      divergentProviderThreadIds:
        "provider threads whose conversation still holds the rolled-back runs: rebuilt on their next run",
    },
  },
  warning: {
    when:
      "Something worth saying that changes no state: a provider's own warning, a frame that could not be read, " +
      "a steer not delivered, a resume that fell back to a rebuild... Text is masked before it is recorded.",
  },
  "command.receipt": {
    when:
      "A command finished: its receipt under its `commandId`. " +
      "Repeating the id returns this receipt without repeating the work.",
  },
  "runtime.recovered": {
    when: "On open after a crash: runs left running were cancelled, their requests expired, queued runs requeued.",
  },
};
