import { spawn } from "node:child_process";
import { existsSync } from "node:fs";
import { mkdtemp } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import type { PolicyName } from "../../../src/index.js";
import { record, seed } from "../seed.js";
import { modelMachine, type PolicyModel } from "../suite.js";
import { World, type Flags } from "../world.js";

/** Models of the policies a thread meets: fork, rollback, nested checkpoints, provider switch, request expiry. */

const B = [true, false] as const;
const runIs = (status: string) => (w: World) => w.run().status === status;
const finish = async (w: World) =>
  void w.finish(w.forkThreadId && w.run().threadId === w.forkThreadId ? w.forkThreadId : w.threadId);
const finished = { type: "final" as const, meta: { expect: { until: runIs("completed") } } };
const started = async (w: World) => {
  if (!w.lastError) await w.until("the run to start", () => !["queued", "starting"].includes(w.run().status));
};
const send =
  (extra: Parameters<World["send"]>[1] = {}) =>
  async (w: World) => {
    await w.send("plain", extra);
    await started(w);
  };
const last = <T extends string>(w: World, type: T) =>
  w.records.filter((r) => r.event.type === type).at(-1)?.event as Record<string, unknown> | undefined;
const must = (ok: boolean, message: string) => {
  if (!ok) throw new Error(message);
};
/**
 * `count` runs one after the other, each running then completed, the last completed state named
 * `last` and left by `next` (the last run, while it runs, also by `whileLast`).
 */
function runsThen(
  count: number,
  last: string,
  next: Record<string, unknown>,
  whileLast: Record<string, unknown> = {},
): Record<string, unknown> {
  const states: Record<string, unknown> = { idle: { on: { SEND: "r1" } } };
  for (let n = 1; n <= count; n += 1) {
    const done = n === count ? last : ["one", "two", "three"][n - 1]!;
    const finishing = n === count ? whileLast : {};
    states[`r${n}`] = { meta: { expect: { until: runIs("running") } }, on: { FINISH: done, ...finishing } };
    states[done] = { meta: { expect: { until: runIs("completed") } }, on: n === count ? next : { SEND: `r${n + 1}` } };
  }
  return states;
}
/** Two finished runs, the usual starting point of thread-level policies. */
const twoRuns = (next: Record<string, unknown>, onSecond: Record<string, unknown> = {}) =>
  runsThen(2, "two", next, onSecond);

export const forkModel: PolicyModel = {
  name: "fork",
  reads: { "main.threads.canForkThread": B, "main.threads.canForkFromTurn": B },
  machine: modelMachine(
    "fork",
    {
      forksLatest: (f) => seed.forksNatively(record(f), false),
      forksInside: (f) => seed.forksNatively(record(f), true),
    },
    {
      ...twoRuns({ FORK: "forkedLatest", FORK_INSIDE: "forkedInside" }, { FORK: "forkRefused" }),
      forkRefused: { meta: { expect: { refused: "conflict" } }, on: { FINISH: "two" } },
      forkedLatest: { on: { SEND_ON_FORK: [{ guard: "forksLatest", target: "native" }, { target: "synthetic" }] } },
      forkedInside: { on: { SEND_ON_FORK: [{ guard: "forksInside", target: "native" }, { target: "synthetic" }] } },
      native: {
        meta: {
          expect: {
            until: runIs("running"),
            check: (w: World) => must(last(w, "fork.resolved")?.resolution === "native", "the fork was not native"),
          },
        },
        on: { FINISH: "done" },
      },
      synthetic: {
        meta: {
          expect: {
            until: runIs("running"),
            policies: ["synthetic_fork"],
            check: (w: World) => {
              must(last(w, "fork.resolved")?.resolution === "portable", "the fork was not portable");
              must(last(w, "handoff.created")?.reason === "fork", "the portable fork carried no context");
            },
          },
        },
        on: { FINISH: "done" },
      },
      done: finished,
    },
  ),
  drive: {
    SEND: send(),
    FINISH: finish,
    FORK: (w) => w.attempt(async () => (w.forkThreadId = (await w.rt.forkThread({ threadId: w.threadId })).threadId)),
    FORK_INSIDE: (w) =>
      w.attempt(
        async () =>
          (w.forkThreadId = (await w.rt.forkThread({ threadId: w.threadId, afterRunId: w.runIds[0]! })).threadId),
      ),
    SEND_ON_FORK: (w) => send({ threadId: w.forkThreadId! })(w),
  },
};

/** The app can restore files: checkpoints are on and the provider's working tree can be checkpointed. */
const hasCheckpoint = (f: Flags) =>
  f["runtime.checkpoints"] === true && record(f).on("checkpointing.appCanCheckpointFilesystem");

const filesAfterRun1 = (w: World) => existsSync(join(w.cwd, "file-1.txt")) && !existsSync(join(w.cwd, "file-2.txt"));

/** A rollback to the first of two runs, read through the fields `reads` varies (the others at the base record's). */
function rollbackPolicyModel(name: string, reads: PolicyModel["reads"]): PolicyModel {
  return {
    name,
    reads,
    machine: modelMachine(
      "rollback",
      {
        canRollbackProvider: (f) => seed.rollback(record(f), hasCheckpoint(f)) === "trusted",
        verifiesRollback: (f) => seed.rollback(record(f), hasCheckpoint(f)) === "verified",
        hasCheckpoint: (f) => seed.rollback(record(f), hasCheckpoint(f)) === "divergent",
      },
      {
        ...twoRuns(
          {
            ROLLBACK: [
              { guard: "verifiesRollback", target: "rolledBack" },
              { guard: "canRollbackProvider", target: "rolledBackByResume" },
              { guard: "hasCheckpoint", target: "divergent" },
              { target: "refused" },
            ],
          },
          { ROLLBACK: "busy" },
        ),
        busy: { meta: { expect: { refused: "conflict" } }, on: { FINISH: "two" } },
        rolledBack: {
          meta: {
            expect: {
              until: (w: World) => w.run(w.runIds[1]).status === "rolled_back",
              check: (w: World) => {
                must(
                  (w.lastReceipt as { provider: string }).provider === "rolled_back",
                  "the provider was not rolled back",
                );
                const restored = (w.lastReceipt as { filesRestored: boolean }).filesRestored;
                must(!restored || filesAfterRun1(w), "files do not match run 1");
              },
            },
          },
          on: { SEND: "afterNative" },
        },
        rolledBackByResume: {
          meta: {
            expect: {
              until: (w: World) => w.run(w.runIds[1]).status === "rolled_back",
              policies: ["rollback_by_resume"],
              check: (w: World) =>
                must(
                  (w.lastReceipt as { provider: string }).provider === "rolled_back",
                  "the provider was not rolled back",
                ),
            },
          },
          on: { SEND: "afterNative" },
        },
        divergent: {
          meta: {
            expect: {
              until: (w: World) => w.run(w.runIds[1]).status === "rolled_back",
              policies: ["rollback_divergent"],
              check: (w: World) => must(filesAfterRun1(w), "files do not match run 1"),
            },
          },
          on: { SEND: "rebuilt" },
        },
        refused: {
          meta: { expect: { refused: "capability_unsupported", policies: ["rollback_unsupported"] } },
          on: { SEND: "plainNext" },
        },
        afterNative: {
          meta: {
            expect: {
              until: (w: World) => w.run().attempts[0]?.providerThreadId != null,
              check: (w: World) =>
                must(
                  w.run().attempts[0]!.providerThreadId === w.run(w.runIds[0]).attempts[0]!.providerThreadId,
                  "the rolled-back provider thread was not kept",
                ),
            },
          },
          on: { FINISH: "done" },
        },
        rebuilt: {
          meta: {
            expect: {
              until: runIs("running"),
              policies: ["divergent_thread_rebuilt"],
              check: (w: World) => {
                must(
                  last(w, "provider_thread.bound")?.via === "realigned",
                  "no fresh provider thread after the divergent rollback",
                );
                must(
                  last(w, "handoff.created")?.reason === "rollback_divergent",
                  "the fresh thread was not told the history",
                );
              },
            },
          },
          on: { FINISH: "done" },
        },
        plainNext: { meta: { expect: { until: runIs("running") } }, on: { FINISH: "done" } },
        done: finished,
      },
    ),
    drive: {
      SEND: send(),
      FINISH: finish,
      ROLLBACK: (w) => w.attempt(() => w.rt.rollback({ threadId: w.threadId, toRunId: w.runIds[0]! })),
    },
  };
}

export const rollbackModel = rollbackPolicyModel("rollback", {
  "main.threads.canRollbackThread": B,
  "main.checkpointing.providerCanReadConversationSnapshot": B,
  "main.checkpointing.appCanCheckpointFilesystem": B,
  "runtime.checkpoints": B,
  "main.checkpointing.providerRollbackReturnsSnapshot": [false],
});

/** What the provider's side of a rollback reads: whether it rolls its conversation back, and how the cut is checked. */
export const rollbackVerificationModel = rollbackPolicyModel("rollback verification", {
  "main.checkpointing.providerCanRollbackConversation": B,
  "main.checkpointing.providerRollbackReturnsSnapshot": B,
  "main.threads.canReadThreadSnapshot": B,
  "runtime.checkpoints": [false],
});

const subagentNode = (w: World) => w.run(w.runIds[0]).items.find((i) => i.kind === "subagent")?.id;
const subagentFile = (w: World) => existsSync(join(w.cwd, "sub-1.txt"));

/**
 * Nested checkpoint scopes are app-owned: a subagent's edits can be undone on their own whatever
 * the provider's record; the record decides only whether the provider's nested conversation
 * could follow ("nested checkpoint unsupported": only the root conversation is the provider's).
 */
export const nestedCheckpointModel: PolicyModel = {
  name: "checkpoints",
  reads: { "main.checkpointing.supportsNestedCheckpointScopes": B, "runtime.checkpoints": B },
  machine: modelMachine(
    "nested",
    {
      nested: (f) => seed.nestedCheckpoints(record(f)),
      checkpoints: (f) => f["runtime.checkpoints"] === true && record(f).on("checkpointing.appCanCheckpointFilesystem"),
    },
    {
      idle: { on: { SEND: "running" } },
      running: { meta: { expect: { until: runIs("running") } }, on: { FINISH: "done" } },
      done: {
        meta: {
          expect: {
            until: runIs("completed"),
            check: (w: World) => must(subagentFile(w), "the subagent wrote no file"),
          },
        },
        on: {
          UNDO: [{ guard: "checkpoints", target: "undone" }, { target: "refused" }],
        },
      },
      undone: {
        always: [{ guard: "nested", target: "undoneNested" }, { target: "undoneRootOnly" }],
      },
      undoneNested: {
        type: "final",
        meta: { expect: { check: (w: World) => must(!subagentFile(w), "the subagent's file is still there") } },
      },
      undoneRootOnly: {
        type: "final",
        meta: {
          expect: {
            policies: ["root_checkpoint_only"],
            check: (w: World) => must(!subagentFile(w), "the subagent's file is still there"),
          },
        },
      },
      refused: {
        type: "final",
        meta: {
          expect: {
            refused: "capability_unsupported",
            policies: ["subagent_undo_unsupported"],
            check: (w: World) => must(subagentFile(w), "a refused undo changed the files"),
          },
        },
      },
    },
  ),
  drive: {
    SEND: async (w) => void (await w.send("subagent")),
    FINISH: finish,
    UNDO: (w) => w.attempt(() => w.rt.undoSubagent({ threadId: w.threadId, nodeId: subagentNode(w)! })),
  },
};

const bReceived = (w: World) =>
  [...w.backends.get("b")!.threads.values()].flatMap((t) => t.turns).at(-1)?.context?.delivery;

export const providerSwitchModel: PolicyModel = {
  name: "provider switch",
  targets: ["a", "b"],
  reads: {
    "a.context.supportsDeltaHandoff": B,
    "b.context.acceptsDeveloperContext": B,
    "b.context.acceptsSystemContext": B,
    "b.context.acceptsSyntheticUserContext": B,
  },
  machine: modelMachine(
    "providerSwitch",
    {
      bTakesContext: (f) => ["developer", "system"].includes(seed.delivery(record(f, "b"))),
      bTakesUserContext: (f) => seed.delivery(record(f, "b")) === "synthetic_user",
      aTakesDelta: (f) => seed.returnsWithDelta(record(f, "a")),
    },
    {
      ...runsThen(1, "onA", {
        SWITCH: [
          { guard: "bTakesContext", target: "onB" },
          { guard: "bTakesUserContext", target: "onBAsUser" },
          { target: "refused" },
        ],
      }),
      onB: {
        meta: {
          expect: {
            until: runIs("running"),
            check: (w: World) => {
              const wanted = seed.delivery(record(w.flags, "b"));
              must(bReceived(w) === wanted, `b got ${bReceived(w)} context, the seed says ${wanted}`);
            },
          },
        },
        on: { FINISH: "doneB" },
      },
      onBAsUser: {
        meta: {
          expect: {
            until: runIs("running"),
            policies: ["handoff_as_user_context"],
            check: (w: World) => must(bReceived(w) === "synthetic_user", "b did not get user context"),
          },
        },
        on: { FINISH: "doneB" },
      },
      refused: {
        type: "final",
        meta: { expect: { refused: "capability_unsupported", policies: ["handoff_unsupported"] } },
      },
      doneB: {
        meta: { expect: { until: runIs("completed") } },
        on: { RETURN: [{ guard: "aTakesDelta", target: "returned" }, { target: "refreshed" }] },
      },
      returned: {
        meta: {
          expect: {
            until: runIs("running"),
            check: (w: World) =>
              must(last(w, "handoff.created")?.strategy === "delta_since_last_seen", "no delta handoff"),
          },
        },
        on: { FINISH: "done" },
      },
      refreshed: {
        meta: {
          expect: {
            until: runIs("running"),
            policies: ["handoff_fresh_thread"],
            check: (w: World) => {
              must(
                last(w, "provider_thread.bound")?.via === "refreshed",
                "the returning provider did not get a fresh thread",
              );
              must(last(w, "handoff.created")?.strategy === "full_thread_summary", "no full summary");
            },
          },
        },
        on: { FINISH: "done" },
      },
      done: finished,
    },
  ),
  drive: { SEND: send(), FINISH: finish, SWITCH: send({ providerTarget: "b" }), RETURN: send({ providerTarget: "a" }) },
};

/** A switch from `a` to `b` and back, where `a` takes no deltas (its return needs a whole-conversation summary). */
export const switchAdmissionModel: PolicyModel = {
  name: "switch admission",
  targets: ["a", "b"],
  reads: {
    "a.sessions.supportsProviderSwitchingViaHandoff": B,
    "b.sessions.supportsProviderSwitchingViaHandoff": B,
    "b.context.canConsumeHandoffSummaries": B,
    "b.context.supportsFullThreadHandoff": B,
    "a.context.supportsDeltaHandoff": [false],
    "a.context.supportsFullThreadHandoff": B,
  },
  machine: modelMachine(
    "switchAdmission",
    {
      toB: (f) => seed.handoffAdmission(record(f, "a"), record(f, "b"), "full") === "admitted",
      switchRefused: (f) => seed.handoffAdmission(record(f, "a"), record(f, "b"), "full") === "switch_refused",
      summaryRefused: (f) => seed.handoffAdmission(record(f, "a"), record(f, "b"), "full") === "summary_refused",
      backToA: (f) => seed.handoffAdmission(record(f, "b"), record(f, "a"), "full") === "admitted",
    },
    {
      ...runsThen(1, "onA", {
        SWITCH: [
          { guard: "toB", target: "onB" },
          { guard: "switchRefused", target: "switchRefused" },
          { guard: "summaryRefused", target: "summaryRefused" },
          { target: "fullRefused" },
        ],
      }),
      switchRefused: refusedBy("provider_switch_unsupported"),
      summaryRefused: refusedBy("handoff_summary_unsupported"),
      fullRefused: refusedBy("full_handoff_unsupported"),
      onB: {
        meta: {
          expect: {
            until: runIs("running"),
            check: (w: World) => must(last(w, "handoff.created")?.toTarget === "b", "b was not told the conversation"),
          },
        },
        on: { FINISH: "doneB" },
      },
      doneB: {
        meta: { expect: { until: runIs("completed") } },
        on: { RETURN: [{ guard: "backToA", target: "refreshed" }, { target: "returnRefused" }] },
      },
      refreshed: {
        meta: {
          expect: {
            until: runIs("running"),
            policies: ["handoff_fresh_thread"],
            check: (w: World) => must(last(w, "handoff.created")?.toTarget === "a", "a was not told the conversation"),
          },
        },
        on: { FINISH: "done" },
      },
      returnRefused: refusedBy("full_handoff_unsupported"),
      done: finished,
    },
  ),
  drive: { SEND: send(), FINISH: finish, SWITCH: send({ providerTarget: "b" }), RETURN: send({ providerTarget: "a" }) },
};

/** A typed refusal recorded by its policy, and nothing recorded for the refused run. */
function refusedBy(policy: PolicyName) {
  return {
    type: "final" as const,
    meta: {
      expect: {
        refused: "capability_unsupported",
        policies: [policy],
        check: (w: World) => must(w.run().status === "completed", "the refused message changed the thread"),
      },
    },
  };
}

/**
 * Three runs on `a`, then a switch to `b`, which may write the summary itself, and whose
 * recommended handoff size may be too small for the local summariser to tell them all.
 */
export const handoffBoundModel: PolicyModel = {
  name: "handoff bound",
  targets: ["a", "b"],
  reads: { "b.context.maxRecommendedHandoffChars": [16_000, 150], "b.context.canGenerateSummaries": B },
  machine: modelMachine(
    "handoffBound",
    {
      providerWrites: (f) => seed.summaryWriter(record(f, "b")) === "provider",
      // Three runs of the model world take more than 150 characters to tell.
      tellsAll: (f) => seed.handoffBound(record(f, "b")) >= 1_000,
    },
    {
      ...runsThen(3, "three", {
        SWITCH: [
          { guard: "providerWrites", target: "toldByProvider" },
          { guard: "tellsAll", target: "toldAll" },
          { target: "toldNewest" },
        ],
      }),
      toldByProvider: {
        meta: {
          expect: {
            until: runIs("running"),
            check: (w: World) => {
              const handoff = last(w, "handoff.created")!;
              must(handoff.summarizedBy === "provider", "b did not write the summary");
              must(w.backends.get("b")!.summaries.length === 1, "b was not asked for a summary");
              must((handoff.text as string).length <= seed.handoffBound(record(w.flags, "b")), "over the bound");
              must((handoff.coveredRunIds as string[]).length === 3, "b's summary does not carry every run");
            },
          },
        },
        on: { FINISH: "done" },
      },
      toldAll: {
        meta: {
          expect: {
            until: runIs("running"),
            policies: ["summary_by_local_summariser"],
            check: (w: World) => {
              const handoff = last(w, "handoff.created")!;
              must((handoff.coveredRunIds as string[]).length === 3, "not every run was told");
            },
          },
        },
        on: { FINISH: "done" },
      },
      toldNewest: {
        meta: {
          expect: {
            until: runIs("running"),
            policies: ["summary_by_local_summariser", "handoff_runs_omitted"],
            check: (w: World) => {
              const handoff = last(w, "handoff.created")!;
              const bound = seed.handoffBound(record(w.flags, "b"));
              must((handoff.text as string).length <= bound, "the summary is over the recommended size");
              const told = [...(handoff.omittedRunIds as string[]), ...(handoff.coveredRunIds as string[])];
              must(told.join() === w.runIds.slice(0, 3).join(), "the log does not say which runs were told");
              must((handoff.omittedRunIds as string[]).length > 0, "no run was left out");
            },
          },
        },
        on: { FINISH: "done" },
      },
      done: finished,
    },
  ),
  drive: { SEND: send(), FINISH: finish, SWITCH: send({ providerTarget: "b" }) },
};

/** A thread whose run delegated to a subagent; the subagent's conversation is forked into a thread of its own. */
export const subagentForkModel: PolicyModel = {
  name: "subagent fork",
  reads: {
    "main.subagents.canForkSubagentThread": B,
    "main.threads.canForkFromSubagentThread": B,
    // A portable fork needs context the provider takes: here, only as a user message, or none.
    "main.context.acceptsDeveloperContext": [false],
    "main.context.acceptsSystemContext": [false],
    "main.context.acceptsSyntheticUserContext": B,
  },
  machine: modelMachine(
    "subagentFork",
    {
      native: (f) => seed.forksSubagentNatively(record(f)),
      portable: (f) => seed.delivery(record(f)) !== "refused",
    },
    {
      idle: { on: { SEND: "delegated" } },
      delegated: {
        meta: { expect: { until: (w: World) => w.run().items.some((i) => i.kind === "subagent") } },
        on: { RELEASE: "released" },
      },
      released: {
        meta: { expect: { until: (w: World) => w.run().items.some((i) => i.text === `parent ${w.n}`) } },
        on: { FINISH: "done" },
      },
      done: {
        meta: { expect: { until: runIs("completed") } },
        on: {
          FORK: [
            { guard: "native", target: "forked" },
            { guard: "portable", target: "forked" },
            { target: "forkRefused" },
          ],
        },
      },
      forkRefused: {
        type: "final",
        meta: {
          expect: {
            refused: "capability_unsupported",
            policies: ["subagent_fork_unsupported"],
            check: (w: World) => must(w.rt.listThreads().length === 1, "a refused fork made a thread"),
          },
        },
      },
      forked: { on: { SEND_ON_FORK: [{ guard: "native", target: "native" }, { target: "synthetic" }] } },
      native: {
        meta: {
          expect: {
            until: runIs("running"),
            check: (w: World) => must(last(w, "fork.resolved")?.resolution === "native", "the fork was not native"),
          },
        },
        on: { FINISH: "forkDone" },
      },
      synthetic: {
        meta: {
          expect: {
            until: runIs("running"),
            policies: ["subagent_fork_synthetic", "handoff_as_user_context"],
            check: (w: World) => {
              must(last(w, "fork.resolved")?.resolution === "portable", "the fork was not portable");
              must(
                String(last(w, "handoff.created")?.text).includes(`look at ${w.n - 1}`),
                "the fork was not told the subagent's prompt",
              );
            },
          },
        },
        on: { FINISH: "forkDone" },
      },
      forkDone: finished,
    },
  ),
  drive: {
    SEND: async (w) => void (await w.send("delegate")),
    RELEASE: async (w) => w.backends.get("main")!.openGate(`sub-${w.n}`),
    FINISH: finish,
    FORK: (w) =>
      w.attempt(async () => {
        const nodeId = w.run(w.runIds[0]).items.find((i) => i.kind === "subagent")!.id;
        w.forkThreadId = (await w.rt.forkThread({ threadId: w.threadId, fromSubagentNodeId: nodeId })).threadId;
      }),
    SEND_ON_FORK: (w) => send({ threadId: w.forkThreadId! })(w),
  },
};

const emptyThreadsAsked = (w: World) => w.calls.made.get("ensureProviderThread") ?? 0;
const boundThreads = (w: World) => w.records.filter((r) => r.event.type === "provider_thread.bound");

/** A thread's first run, then its second: its provider thread made empty first, or by the first turn. */
export const threadCreationModel: PolicyModel = {
  name: "thread creation",
  reads: { "main.threads.canCreateEmptyThread": B },
  machine: modelMachine(
    "threadCreation",
    { withTurn: (f) => seed.makesThreadsWithTurns(record(f)) },
    {
      idle: { on: { SEND: [{ guard: "withTurn", target: "madeByTurn" }, { target: "madeEmpty" }] } },
      madeEmpty: {
        meta: {
          expect: {
            until: (w: World) => runIs("running")(w) && boundThreads(w).length === 1,
            check: (w: World) => must(emptyThreadsAsked(w) === 1, "no empty thread was asked for"),
          },
        },
        on: { FINISH: "one" },
      },
      madeByTurn: {
        meta: {
          expect: {
            until: (w: World) => runIs("running")(w) && boundThreads(w).length === 1,
            policies: ["thread_created_with_first_turn"],
            check: (w: World) => {
              must(emptyThreadsAsked(w) === 0, "an empty thread was asked for");
              must(!!(boundThreads(w)[0]!.event as { resumeCursor?: string }).resumeCursor, "bound without a cursor");
            },
          },
        },
        on: { FINISH: "one" },
      },
      one: { meta: { expect: { until: runIs("completed") } }, on: { SEND: "two" } },
      two: {
        meta: {
          expect: {
            until: runIs("running"),
            check: (w: World) => {
              const [first, second] = w.runIds.map((id) => w.run(id).attempts[0]?.providerThreadId);
              must(first === second, "the second run is on another provider thread");
              must(boundThreads(w).length === 1, "the thread was made again");
            },
          },
        },
        on: { FINISH: "done" },
      },
      done: finished,
    },
  ),
  drive: { SEND: send(), FINISH: finish },
};

const crashChild = join(import.meta.dirname, "..", "crashChild.ts");

/**
 * Runs crashChild.ts on `dir` (data in `<dir>/data`, target `main`) and SIGKILLs it once its run awaits an approval:
 * the thread id. `hosted`: the provider runs in a host process on a unix socket, which outlives the runtime. `plain`:
 * its run is streaming, held at its gate, instead.
 */
export async function crashWithApprovalPending(
  dir: string,
  flags: Flags,
  hosted = false,
  kind: "approval" | "plain" | "both" | "interrupted" = "approval",
): Promise<string> {
  const args = ["--import", "tsx", crashChild, dir, JSON.stringify(flags), hosted ? "hosted" : "in-process", kind];
  const child = spawn(process.execPath, args, { stdio: ["ignore", "pipe", "inherit"] });
  const exited = new Promise((done) => child.on("exit", done));
  const threadId = await new Promise<string>((resolve, reject) => {
    let out = "";
    child.stdout.on("data", (chunk: Buffer) => {
      out += chunk.toString();
      const ready = /ready (\S+)/.exec(out);
      if (ready) resolve(ready[1]!);
    });
    child.on("exit", (code) => reject(new Error(`crash child exited early (${code})`)));
  });
  child.kill("SIGKILL");
  await exited;
  return threadId;
}

/**
 * A runtime SIGKILLed with an approval pending, reopened on the same data directory. The provider runs in a host
 * process that outlives the runtime: whether the request is still answerable is the record's to say.
 */
export async function crashedWorld(flags: Flags): Promise<World> {
  const dir = await mkdtemp(join(tmpdir(), "tiller-model-"));
  const threadId = await crashWithApprovalPending(dir, flags, true);
  const world = await World.open(flags, ["main"], {}, dir, { hosted: true });
  world.threadId = threadId;
  world.adoptRun(world.rt.views.threads.get(threadId)!.runs[0]!.runId, 1);
  world.n = 1;
  return world;
}

const requestShownExpired = (w: World) =>
  must(w.rt.affordances(w.threadId).requests[0]?.state === "expired", "the request is not shown expired");

export const requestExpiryModel: PolicyModel = {
  name: "request expiry",
  reads: { "main.sessions.pendingRequestsSurviveRestart": B, "main.approvals.approvalCallbacksAreLiveOnly": B },
  open: crashedWorld,
  machine: modelMachine(
    "requestExpiry",
    {
      survives: (f) => seed.requestsSurviveRestart(record(f)),
      reattaches: (f) => seed.requestsSurviveRestart(record(f)) && seed.approvalsOutliveConnection(record(f)),
    },
    {
      idle: {
        on: {
          RECOVERED: [
            { guard: "reattaches", target: "reattached" },
            { guard: "survives", target: "expiredWithConnection" },
            { target: "expired" },
          ],
        },
      },
      // The host outlived the runtime and holds the turn: the run still waits on its request, which is answerable.
      reattached: {
        meta: {
          expect: {
            until: runIs("waiting"),
            check: (w: World) =>
              must(w.rt.affordances(w.threadId).requests[0]?.state === "respondable", "the request is not answerable"),
          },
        },
        on: { RESPOND: "answered" },
      },
      answered: { meta: { expect: { until: runIs("running") } }, on: { FINISH: "done" } },
      expiredWithConnection: {
        meta: { expect: { until: runIs("cancelled"), policies: ["requests_expire_with_connection"] } },
        on: { RESPOND: "notResumable" },
      },
      expired: {
        meta: { expect: { until: runIs("cancelled"), policies: ["requests_expire_on_restart"] } },
        on: { RESPOND: "notResumable" },
      },
      notResumable: {
        meta: { expect: { refused: "not_resumable", check: requestShownExpired } },
        on: { SEND: "running" },
      },
      running: { meta: { expect: { until: runIs("running") } }, on: { FINISH: "done" } },
      done: finished,
    },
  ),
  drive: {
    RECOVERED: async () => undefined,
    RESPOND: (w) =>
      w.attempt(() =>
        w.rt.respond({
          requestId: [...w.rt.views.requests.keys()][0]!,
          response: { kind: "decision", decision: "accept" },
        }),
      ),
    SEND: send(),
    FINISH: finish,
  },
};

export const threadPolicyModels = [
  threadCreationModel,
  forkModel,
  switchAdmissionModel,
  subagentForkModel,
  handoffBoundModel,
  rollbackModel,
  rollbackVerificationModel,
  nestedCheckpointModel,
  providerSwitchModel,
  requestExpiryModel,
];
