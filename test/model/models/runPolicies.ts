import type { PolicyName } from "../../../src/index.js";
import { existsSync } from "node:fs";
import { join } from "node:path";
import { record, seed } from "../seed.js";
import { modelMachine, type PolicyModel } from "../suite.js";
import { World } from "../world.js";

/**
 * Models of the policies a single run meets: interrupt, steer, queue, terminals, messages, approvals, artifacts, model
 * switch.
 */

const B = [true, false] as const;
const runIs = (status: string) => (w: World) => w.run().status === status;
const statusOf = (w: World, runId: string) => w.rt.views.runs.get(runId)?.status;
const finished = (status = "completed") => ({ type: "final" as const, meta: { expect: { until: runIs(status) } } });
const sendThenRun = (kind: string) => async (w: World) => {
  await w.send(kind);
  await w.until(`${kind} run starts`, () => w.run().status !== "queued" && w.run().status !== "starting");
};
const finish = async (w: World) => void w.finish();

export const interruptModel: PolicyModel = {
  name: "interrupt",
  reads: { "main.turns.supportsInterrupt": B, "runtime.allowSessionStopInterrupt": B },
  options: (flags) => ({ allowSessionStopInterrupt: flags["runtime.allowSessionStopInterrupt"] === true }),
  machine: modelMachine(
    "interrupt",
    {
      canInterrupt: (f) => seed.interrupt(record(f), false) === "native",
      mayStopSession: (f) =>
        seed.interrupt(record(f), f["runtime.allowSessionStopInterrupt"] === true) === "stop_session",
    },
    {
      idle: { on: { SEND: "running" } },
      running: {
        meta: { expect: { until: runIs("running") } },
        on: {
          INTERRUPT: [
            { guard: "canInterrupt", target: "interrupted" },
            { guard: "mayStopSession", target: "stoppedSession" },
            { target: "refused" },
          ],
          FINISH: "completed",
        },
      },
      refused: {
        meta: { expect: { refused: "capability_unsupported", policies: ["interrupt_unsupported"] } },
        on: { FINISH: "completed" },
      },
      interrupted: finished("interrupted"),
      stoppedSession: {
        type: "final",
        meta: { expect: { until: runIs("interrupted"), policies: ["interrupt_by_session_stop"] } },
      },
      completed: finished(),
    },
  ),
  drive: {
    SEND: sendThenRun("plain"),
    INTERRUPT: (w) => w.attempt(() => w.rt.interrupt({ runId: w.runId })),
    FINISH: finish,
  },
};

const interruptsSent = (w: World) => w.calls.made.get("interrupt") ?? 0;

/** An interrupt asked after the provider accepted a turn and before it took it up (a `late:` turn, gated). */
export const turnStartModel: PolicyModel = {
  name: "turn start",
  reads: { "main.turns.emitsTurnStarted": B },
  machine: modelMachine(
    "turnStart",
    { holds: (f) => seed.holdsInterruptUntilAnnounced(record(f)) },
    {
      idle: { on: { SEND: "accepted" } },
      accepted: {
        meta: { expect: { until: (w: World) => w.calls.made.get("sendRun") === 1 && w.calls.inFlight === 0 } },
        on: { INTERRUPT: [{ guard: "holds", target: "held" }, { target: "sent" }] },
      },
      held: {
        meta: {
          expect: {
            check: (w: World) => must(interruptsSent(w) === 0, "the interrupt was sent before the turn was announced"),
          },
        },
        on: { START: "interrupted" },
      },
      sent: {
        meta: { expect: { until: (w: World) => interruptsSent(w) === 1 } },
        on: { START: "interrupted" },
      },
      interrupted: {
        type: "final",
        meta: {
          expect: {
            until: runIs("interrupted"),
            check: (w: World) => must(interruptsSent(w) === 1, `${interruptsSent(w)} interrupts sent`),
          },
        },
      },
    },
  ),
  drive: {
    SEND: (w) => w.send("late"),
    INTERRUPT: (w) => w.attempt(() => w.rt.interrupt({ runId: w.runId })),
    START: async (w) => {
      for (const backend of w.backends.values()) backend.openGate(`start-${w.n}`);
    },
  },
};

const fencedEvents = (w: World) => w.records.filter((r) => r.event.type === "event.fenced").length;

/**
 * A provider that names every turn `turn-1`: a second run's events name the first, finished turn.
 * Trusted turn ids fence them as the old turn's; evidence-only ids give them to the current turn.
 */
export const turnIdentityModel: PolicyModel = {
  name: "turn identity",
  reads: { "main.identity.nativeTurnIds": ["strong", "weak", "none"], "main.turns.exposesNativeTurnId": B },
  open: (flags) => World.open(flags, ["main"], {}, undefined, { declaredOnly: true, sameTurnRefs: true }),
  machine: modelMachine(
    "turnIdentity",
    { trusts: (f) => seed.trustsTurnRefs(record(f)) },
    {
      idle: { on: { SEND: "r1" } },
      r1: { meta: { expect: { until: runIs("running") } }, on: { FINISH: "one" } },
      one: {
        meta: { expect: { until: runIs("completed") } },
        on: { SEND: [{ guard: "trusts", target: "fenced" }, { target: "r2" }] },
      },
      fenced: {
        type: "final",
        meta: {
          expect: {
            until: (w: World) => fencedEvents(w) > 0,
            check: (w: World) =>
              must(w.run().status !== "completed", "the second run took events the ref gave the first"),
          },
        },
      },
      r2: {
        meta: {
          expect: {
            until: runIs("running"),
            policies: ["turn_refs_as_evidence"],
            check: (w: World) => must(fencedEvents(w) === 0, "the current turn's events were fenced"),
          },
        },
        on: { FINISH: "done" },
      },
      done: {
        type: "final",
        meta: { expect: { until: runIs("completed"), check: (w: World) => must(fencedEvents(w) === 0, "fenced") } },
      },
    },
  ),
  drive: { SEND: sendThenRun("plain"), FINISH: finish },
};

const messages = (w: World) => w.run().items.filter((i) => i.kind === "assistant_message");

/** A provider that sends every item's start twice: one item where items have ids, two where they have none. */
export const itemIdentityModel: PolicyModel = {
  name: "item identity",
  reads: { "main.identity.nativeItemIds": ["strong", "weak", "none"] },
  open: (flags) => World.open(flags, ["main"], {}, undefined, { repeatItemStarts: true }),
  machine: modelMachine(
    "itemIdentity",
    { sameItem: (f) => seed.repeatedStartIsSameItem(record(f)) },
    {
      idle: { on: { SEND: "running" } },
      running: {
        meta: {
          expect: { until: (w: World) => runIs("running")(w) && messages(w).some((m) => m.text === `working ${w.n}`) },
        },
        on: { FINISH: [{ guard: "sameItem", target: "oneEach" }, { target: "twoEach" }] },
      },
      oneEach: {
        type: "final",
        meta: {
          expect: {
            until: runIs("completed"),
            check: (w: World) => must(messages(w).length === 2, `${messages(w).length} messages for two`),
          },
        },
      },
      twoEach: {
        type: "final",
        meta: {
          expect: {
            until: runIs("completed"),
            check: (w: World) => {
              must(messages(w).length === 4, `${messages(w).length} messages for two started twice`);
              must(
                messages(w).every((m) => m.status === "complete"),
                "an item was left open",
              );
            },
          },
        },
      },
    },
  ),
  drive: { SEND: sendThenRun("plain"), FINISH: finish },
};

const toolItem = (w: World) => w.run().items.find((i) => i.kind === "tool");

/** The embedder registered a tool `lookup`; the turn calls it. */
export const toolCallbackModel: PolicyModel = {
  name: "tool callbacks",
  reads: { "main.tools.supportsDynamicToolCallbacks": B },
  options: () => ({
    tools: [
      {
        name: "lookup",
        description: "looks an order up",
        inputSchema: { type: "object" },
        handler: (input: unknown) => `order ${(input as { order: number }).order} shipped`,
      },
    ],
  }),
  machine: modelMachine(
    "toolCallbacks",
    { callsBack: (f) => seed.callsToolsBack(record(f)) },
    {
      idle: { on: { SEND: [{ guard: "callsBack", target: "calledBack" }, { target: "notOffered" }] } },
      calledBack: {
        meta: {
          expect: {
            until: (w: World) => w.records.some((r) => r.event.type === "request.resolved"),
            check: (w: World) => {
              const answer = w.records
                .map((r) => r.event as Record<string, unknown>)
                .find((e) => e.type === "request.resolved");
              const response = answer?.response as { kind?: string; output?: string } | undefined;
              must(
                response?.kind === "tool_result" && response.output === `order ${w.n} shipped`,
                "the tool was not run",
              );
              must(w.rt.affordances(w.threadId).tools.callbacks === "offered", "the tool is not offered");
            },
          },
        },
        on: { FINISH: "completed" },
      },
      notOffered: {
        meta: {
          expect: {
            until: runIs("running"),
            policies: ["dynamic_tools_unsupported"],
            check: (w: World) => {
              must(!w.records.some((r) => r.event.type === "request.opened"), "a tool was called back");
              must(w.rt.affordances(w.threadId).tools.callbacks === "unsupported", "the tool is said offered");
            },
          },
        },
        on: { FINISH: "completed" },
      },
      completed: finished(),
    },
  ),
  drive: { SEND: sendThenRun("callback"), FINISH: finish },
};

/** A provider that tags a tool call with its MCP server and tool, whatever its record says. */
export const mcpToolModel: PolicyModel = {
  name: "mcp tools",
  reads: { "main.tools.supportsMcpTools": B },
  open: (flags) => World.open(flags, ["main"], {}, undefined, { declaredOnly: true }),
  machine: modelMachine(
    "mcpTools",
    { names: (f) => seed.namesMcpTools(record(f)) },
    {
      idle: { on: { SEND: [{ guard: "names", target: "named" }, { target: "plain" }] } },
      named: {
        meta: {
          expect: {
            until: (w: World) => toolItem(w)?.status === "complete",
            check: (w: World) => {
              const mcp = toolItem(w)?.detail?.mcp as { server?: string; tool?: string } | undefined;
              must(mcp?.server === "docs" && mcp.tool === "search", "the MCP tool is not named");
            },
          },
        },
        on: { FINISH: "completed" },
      },
      plain: {
        meta: {
          expect: {
            until: (w: World) => toolItem(w)?.status === "complete",
            policies: ["mcp_tools_unavailable"],
            check: (w: World) => must(toolItem(w)?.detail?.mcp === undefined, "an MCP tag from a provider without MCP"),
          },
        },
        on: { FINISH: "completed" },
      },
      completed: finished(),
    },
  ),
  drive: { SEND: sendThenRun("mcp"), FINISH: finish },
};

export const steerModel: PolicyModel = {
  name: "steer",
  reads: {
    "main.turns.supportsActiveSteering": B,
    "main.turns.supportsSteeringByInterruptRestart": B,
    "main.turns.supportsInterrupt": B,
  },
  machine: modelMachine(
    "steer",
    {
      canSteerNatively: (f) => seed.steer(record(f)) === "native",
      canSteerByInterruptRestart: (f) => seed.steer(record(f)) === "interrupt_restart",
    },
    {
      idle: { on: { SEND: "running" } },
      running: {
        meta: { expect: { until: runIs("running") } },
        on: {
          STEER: [
            { guard: "canSteerNatively", target: "steeredNatively" },
            { guard: "canSteerByInterruptRestart", target: "restarted" },
            { target: "refused" },
          ],
        },
      },
      steeredNatively: {
        meta: { expect: { until: (w: World) => w.run().items.some((i) => i.intent === "steer") } },
        on: { FINISH: "completed" },
      },
      restarted: {
        meta: {
          expect: {
            until: (w: World) => w.run().attempts.length === 2 && w.run().status === "running",
            policies: ["steer_by_interrupt_restart"],
            check: (w: World) => {
              const [first, second] = w.run().attempts;
              if (first?.status !== "superseded" || second?.reason !== "steering_restart")
                throw new Error("the steer did not supersede attempt 1");
            },
          },
        },
        on: { FINISH: "completed" },
      },
      refused: {
        meta: { expect: { refused: "capability_unsupported", policies: ["steer_unsupported"] } },
        on: { FINISH: "completed" },
      },
      completed: finished(),
    },
  ),
  drive: { SEND: sendThenRun("plain"), STEER: (w) => w.send("steer", { mode: "steer" }), FINISH: finish },
};

/**
 * Two threads, each with a run, on a provider without interrupts where a session stop is
 * allowed: stopping a session shared with the other thread's run would end that run too.
 */
export const sharedSessionModel: PolicyModel = {
  name: "shared session",
  reads: {
    "main.sessions.supportsMultipleProviderThreadsPerSession": B,
    "main.threads.exposesNativeThreadId": B,
    "main.identity.nativeThreadIds": ["strong", "none"],
    "main.turns.supportsInterrupt": [false],
    "runtime.allowSessionStopInterrupt": [true],
  },
  options: () => ({ allowSessionStopInterrupt: true }),
  machine: modelMachine(
    "sharedSession",
    { shares: (f) => seed.sharesSessions(record(f)) },
    {
      idle: { on: { SEND: "running" } },
      running: { meta: { expect: { until: runIs("running") } }, on: { SEND_OTHER: "both" } },
      both: {
        meta: {
          expect: {
            until: (w: World) => statusOf(w, w.runIds[1]!) === "running",
            check: (w: World) => {
              const sessions = w.records.filter((r) => r.event.type === "session.started").length;
              must(sessions === (seed.sharesSessions(record(w.flags)) ? 1 : 2), `${sessions} sessions for two threads`);
            },
          },
        },
        on: { INTERRUPT: [{ guard: "shares", target: "refused" }, { target: "stoppedOwn" }] },
      },
      refused: {
        meta: {
          expect: {
            refused: "capability_unsupported",
            policies: ["session_stop_refused_shared"],
            check: (w: World) => must(statusOf(w, w.runIds[1]!) === "running", "the other thread's run was ended"),
          },
        },
        on: { FINISH_OTHER: "otherDone" },
      },
      otherDone: {
        meta: { expect: { until: (w: World) => statusOf(w, w.runIds[1]!) === "completed" } },
        on: { INTERRUPT: "stoppedAlone" },
      },
      stoppedAlone: {
        type: "final",
        meta: {
          expect: {
            until: (w: World) => statusOf(w, w.runIds[0]!) === "interrupted",
            policies: ["interrupt_by_session_stop"],
          },
        },
      },
      stoppedOwn: {
        type: "final",
        meta: {
          expect: {
            until: (w: World) => statusOf(w, w.runIds[0]!) === "interrupted",
            policies: ["interrupt_by_session_stop"],
            check: (w: World) => must(statusOf(w, w.runIds[1]!) === "running", "the other thread's run was ended"),
          },
        },
      },
    },
  ),
  drive: {
    SEND: sendThenRun("plain"),
    SEND_OTHER: async (w) => {
      const other = (await w.rt.createThread({ providerTarget: "main", cwd: w.cwd })).threadId;
      await w.send("plain", { threadId: other });
    },
    INTERRUPT: (w) => w.attempt(() => w.rt.interrupt({ runId: w.runIds[0]! })),
    FINISH_OTHER: async (w) => void w.finish(w.run(w.runIds[1]).threadId),
  },
};

/** How many turns the runtime has handed the provider. */
const turnsSent = (w: World) => w.calls.made.get("sendRun") ?? 0;

export const queueModel: PolicyModel = {
  name: "queue",
  reads: { "main.turns.supportsQueuedMessages": B },
  machine: modelMachine(
    "queue",
    { canQueueNatively: (f) => seed.queue(record(f)) === "provider" },
    {
      idle: { on: { SEND: "running" } },
      running: {
        meta: { expect: { until: runIs("running") } },
        on: { QUEUE: [{ guard: "canQueueNatively", target: "queuedAtProvider" }, { target: "heldByRuntime" }] },
      },
      // The provider holds the follow-up: it was handed over at once, while the first turn runs.
      queuedAtProvider: {
        meta: {
          expect: {
            until: (w: World) => runIs("queued")(w) && turnsSent(w) === 2,
            check: (w: World) => must(statusOf(w, w.runIds[0]!) === "running", "the active run was touched"),
          },
        },
        on: { FINISH: "next", INTERRUPT_QUEUED: "droppedAtProvider" },
      },
      heldByRuntime: {
        meta: {
          expect: {
            until: runIs("queued"),
            policies: ["queue_held_by_runtime"],
            check: (w: World) => must(turnsSent(w) === 1, "the held run went to the provider"),
          },
        },
        on: { FINISH: "next", INTERRUPT_QUEUED: "dropped" },
      },
      // An interrupt of a run the runtime holds: it never starts (cancelled, not_started), and the active run goes on.
      dropped: {
        meta: {
          expect: {
            until: runIs("cancelled"),
            check: (w: World) => {
              must((w.lastReceipt as { via?: string })?.via === "not_started", "the queued run was started");
              must(w.run().attempts.length === 0, "the queued run has an attempt");
              must(statusOf(w, w.runIds[0]!) === "running", "the active run was touched");
            },
          },
        },
        on: { FINISH: "firstOnly" },
      },
      // An interrupt of a run the provider holds goes to the provider, which drops it from its queue: it ends
      // interrupted without having run, and the active run goes on.
      droppedAtProvider: {
        meta: {
          expect: {
            until: runIs("interrupted"),
            check: (w: World) => {
              must((w.lastReceipt as { via?: string })?.via === "native", "the interrupt did not go to the provider");
              const turns = [...w.backends.get("main")!.threads.values()].flatMap((t) => t.turns);
              must(turns.length === 1, "the provider ran the dropped turn");
              must(statusOf(w, w.runIds[0]!) === "running", "the active run was touched");
            },
          },
        },
        on: { FINISH: "firstOnly" },
      },
      firstOnly: {
        type: "final",
        meta: { expect: { until: (w: World) => statusOf(w, w.runIds[0]!) === "completed" } },
      },
      // The queued run starts only at the boundary: after the first run's terminal.
      next: {
        meta: {
          expect: { until: (w: World) => statusOf(w, w.runIds[0]!) === "completed" && w.run().status === "running" },
        },
        on: { FINISH: "completed" },
      },
      completed: finished(),
    },
  ),
  drive: {
    SEND: sendThenRun("plain"),
    QUEUE: (w) => w.send("plain", { mode: "queue" }),
    INTERRUPT_QUEUED: (w) => w.attempt(() => w.rt.interrupt({ runId: w.runId })),
    FINISH: finish,
  },
};

/** A run ended (completed, unless said), its terminal's correlation strength (run.terminal) as the seed says. */
function correlatedAs(correlation: string, policies: PolicyName[], status = "completed") {
  return {
    type: "final" as const,
    meta: {
      expect: {
        until: runIs(status),
        policies,
        check: (w: World) =>
          must(w.run().correlation === correlation, `the terminal's correlation is ${w.run().correlation}`),
      },
    },
  };
}

export const terminalModel: PolicyModel = {
  name: "terminals",
  reads: { "main.turns.emitsTurnCompleted": B, "main.turns.terminalStatusQuality": ["strong", "weak", "none"] },
  machine: modelMachine(
    "terminals",
    {
      reportsTurnTerminals: (f) => seed.terminal(record(f)) !== "inferred",
      strong: (f) => seed.terminal(record(f)) === "strong",
    },
    {
      idle: { on: { SEND: "running" } },
      running: {
        meta: { expect: { until: runIs("running") } },
        on: {
          FINISH: [{ guard: "reportsTurnTerminals", target: "reported" }, { target: "inferred" }],
          INTERRUPT: [{ guard: "reportsTurnTerminals", target: "interruptReported" }, { target: "interruptInferred" }],
        },
      },
      reported: { always: [{ guard: "strong", target: "completed" }, { target: "weak" }] },
      completed: correlatedAs("strong", []),
      weak: correlatedAs("weak", ["terminal_weak_correlation"]),
      inferred: correlatedAs("inferred", ["terminal_inferred_from_idle"]),
      interruptReported: { always: [{ guard: "strong", target: "interrupted" }, { target: "interruptedWeak" }] },
      interrupted: correlatedAs("strong", [], "interrupted"),
      interruptedWeak: correlatedAs("weak", ["terminal_weak_correlation"], "interrupted"),
      // No turn terminals: the interrupted turn still ends interrupted, inferred when the session goes idle.
      interruptInferred: correlatedAs("inferred", ["terminal_inferred_from_idle"], "interrupted"),
    },
  ),
  drive: {
    SEND: sendThenRun("plain"),
    FINISH: finish,
    INTERRUPT: (w) => w.attempt(() => w.rt.interrupt({ runId: w.runId })),
  },
};

export const messageModel: PolicyModel = {
  name: "messages",
  reads: { "main.streaming.emitsMessageCompleted": B, "main.streaming.streamsAssistantText": B },
  machine: modelMachine(
    "messages",
    {
      closedByRuntime: (f) => seed.closesMessagesAtTerminal(record(f)),
      streamsText: (f) => seed.itemLifecycle(record(f)).assistantText === "streamed",
    },
    {
      idle: { on: { SEND: "running" } },
      running: {
        meta: {
          expect: {
            // The run's first message is all there before FINISH (whole, where the provider does not stream text).
            until: (w: World) =>
              runIs("running")(w) &&
              w.run().items.some((i) => i.kind === "assistant_message" && i.text === `working ${w.n}`),
            policies: (w: World) =>
              seed.itemLifecycle(record(w.flags)).assistantText === "streamed" ? [] : ["assistant_text_at_completion"],
          },
        },
        on: {
          FINISH: [
            { guard: "closedByRuntime", target: "closedAtTerminal" },
            { guard: "streamsText", target: "completed" },
            { target: "wholeAtCompletion" },
          ],
        },
      },
      completed: finished(),
      wholeAtCompletion: {
        type: "final",
        meta: {
          expect: {
            until: runIs("completed"),
            check: (w: World) => {
              const messages = w.run().items.filter((i) => i.kind === "assistant_message");
              must(
                messages.length > 0 && messages.every((m) => m.status === "complete" && !!m.text),
                "no whole message",
              );
            },
          },
        },
      },
      closedAtTerminal: {
        type: "final",
        meta: {
          expect: {
            until: runIs("completed"),
            policies: ["messages_closed_at_terminal"],
            check: (w: World) => {
              const messages = w.run().items.filter((i) => i.kind === "assistant_message");
              if (messages.some((m) => m.status !== "complete" || !m.text))
                throw new Error("an assistant message was left open or empty");
            },
          },
        },
      },
    },
  ),
  drive: { SEND: sendThenRun("plain"), FINISH: finish },
};

/** Every item the log started, it also completed: one lifecycle, whatever the provider sent. */
function everyItemCompleted(w: World): void {
  const completed = new Set(
    w.records.filter((r) => r.event.type === "node.completed").map((r) => (r.event as { nodeId: string }).nodeId),
  );
  const open = w.records
    .filter((r) => r.event.type === "node.started" && r.event.runId === w.runId)
    .map((r) => r.event as { nodeId: string; kind: string })
    .filter((e) => !completed.has(e.nodeId));
  must(open.length === 0, `items left open: ${open.map((e) => e.kind).join(", ")}`);
}

/** What affordances say a UI can expect of the thread's items is what the seed says of the record. */
function lifecycleAsSeedSays(w: World): void {
  const wanted = seed.itemLifecycle(record(w.flags));
  const { items } = w.rt.affordances(w.threadId);
  const said = {
    assistantText: items.assistantText,
    reasoning: items.reasoning,
    toolOutput: items.toolOutput,
    toolStarted: items.tools.started,
    toolCompleted: items.tools.completed,
    toolIds: items.tools.ids,
  };
  must(JSON.stringify(said) === JSON.stringify(wanted), `affordances say ${JSON.stringify(said)}`);
}

/** A turn with reasoning, a command with output and a reply, on a provider that may not stream or report each. */
export const toolLifecycleModel: PolicyModel = {
  name: "item lifecycle",
  reads: {
    "main.tools.emitsToolStarted": B,
    "main.tools.emitsToolCompleted": B,
    "main.tools.emitsToolOutput": B,
    "main.streaming.streamsToolOutput": B,
    "main.tools.exposesToolItemIds": B,
    "main.streaming.streamsReasoning": B,
  },
  machine: modelMachine(
    "itemLifecycle",
    {},
    {
      idle: {
        meta: { expect: { check: lifecycleAsSeedSays } },
        on: { SEND: "running" },
      },
      running: { meta: { expect: { until: runIs("running") } }, on: { FINISH: "completed" } },
      completed: {
        type: "final",
        meta: {
          expect: {
            until: runIs("completed"),
            policies: (w: World) => [
              ...(record(w.flags).on("streaming.streamsReasoning") ? [] : ["reasoning_at_completion" as const]),
              ...(seed.toolDegradations(record(w.flags)) as PolicyName[]),
            ],
            check: (w: World) => {
              everyItemCompleted(w);
              lifecycleAsSeedSays(w);
            },
          },
        },
      },
    },
  ),
  drive: { SEND: sendThenRun("tools"), FINISH: finish },
};

const APPROVALS = [
  "supportsCommandApproval",
  "supportsFileReadApproval",
  "supportsFileChangeApproval",
  "supportsApplyPatchApproval",
];
const pendingRequest = (w: World) => w.rt.views.pendingRequests(w.threadId)[0];

export const approvalModel: PolicyModel = {
  name: "approvals",
  reads: Object.fromEntries(APPROVALS.map((f) => [`main.approvals.${f}`, B])),
  machine: modelMachine(
    "approvals",
    {
      asksForCommands: (f) => seed.asksForCommands(record(f)),
      hasStructuredApprovals: (f) => seed.approvals(record(f)) === "structured",
    },
    {
      idle: {
        on: {
          SEND: [
            { guard: "asksForCommands", target: "waiting" },
            { guard: "hasStructuredApprovals", target: "notAsked" },
            { target: "sandboxed" },
          ],
        },
      },
      waiting: {
        meta: {
          expect: {
            until: runIs("waiting"),
            check: (w: World) =>
              void (
                w.rt.affordances(w.threadId).requests[0]?.state === "respondable" || fail("approval not respondable")
              ),
          },
        },
        on: { APPROVE: "approved" },
      },
      approved: { meta: { expect: { until: runIs("running") } }, on: { FINISH: "completed" } },
      notAsked: { meta: { expect: { until: commandDone } }, on: { FINISH: "completed" } },
      sandboxed: {
        meta: {
          expect: {
            until: commandDone,
            policies: ["approvals_by_sandbox"],
            check: (w: World) =>
              void (w.rt.affordances(w.threadId).approvals === "sandbox_only" || fail("approvals not sandbox_only")),
          },
        },
        on: { FINISH: "completed" },
      },
      completed: finished(),
    },
  ),
  drive: {
    SEND: (w) => w.send("approval"),
    APPROVE: (w) =>
      w.attempt(() =>
        w.rt.respond({ requestId: pendingRequest(w)!.requestId, response: { kind: "decision", decision: "accept" } }),
      ),
    FINISH: finish,
  },
};

const opened = (w: World) =>
  w.records.filter((r) => r.event.type === "request.opened").map((r) => r.event as Record<string, unknown>);
const nodeStarted = (w: World, nodeId: unknown) =>
  w.records
    .map((r) => r.event as Record<string, unknown>)
    .find((e) => e.type === "node.started" && e.nodeId === nodeId);
/** How the runtime addressed its last answer to the provider: by native request id or by ordinal. */
const answeredWith = (w: World) => {
  const input = w.calls.lastInput.get("respondToRequest") as { request: { requestRef: string | null } } | undefined;
  return input?.request.requestRef ? "id" : "ordinal";
};
const approveOpen = (w: World) =>
  w.attempt(() =>
    w.rt.respond({ requestId: pendingRequest(w)!.requestId, response: { kind: "decision", decision: "accept" } }),
  );

/** The subagent's request, after the root's was answered by native id or by ordinal. */
function subagentAsked(answeredBy: "id" | "ordinal") {
  return {
    meta: {
      expect: {
        until: (w: World) => opened(w).length === 2,
        policies: (w: World) =>
          seed.subagentRequestsHangUnderSubagent(record(w.flags)) ? [] : ["subagent_request_at_root" as const],
        check: (w: World) => {
          must(answeredWith(w) === answeredBy, `the first answer went back by ${answeredWith(w)}`);
          const request = opened(w)[1]!;
          const parent = nodeStarted(w, nodeStarted(w, request.nodeId)?.parentNodeId);
          const wanted = seed.subagentRequestsHangUnderSubagent(record(w.flags)) ? "subagent" : "root_turn";
          must(parent?.kind === wanted, `the subagent's request hangs under a ${String(parent?.kind)}`);
          const ids = opened(w).map((e) => e.requestId);
          must(new Set(ids).size === 2, "two requests got one id");
        },
      },
    },
    on: { APPROVE: "answered" },
  };
}

/**
 * A provider that asks before a command at the root and another inside a subagent, and sends
 * request ids, whatever its record declares: the record decides what the runtime accepts and how.
 */
export const requestArrivalModel: PolicyModel = {
  name: "request arrival",
  reads: {
    "main.approvals.supportsCommandApproval": B,
    "main.approvals.approvalsHaveNativeRequestIds": B,
    "main.approvals.approvalsCanOriginateFromSubagents": B,
    "main.identity.nativeRequestIds": ["strong", "none"],
  },
  open: (flags) => World.open(flags, ["main"], {}, undefined, { declaredOnly: true }),
  machine: modelMachine(
    "requestArrival",
    {
      asksForCommands: (f) => seed.asksForCommands(record(f)),
      byOrdinal: (f) => seed.requestsByOrdinal(record(f)),
    },
    {
      idle: { on: { SEND: [{ guard: "asksForCommands", target: "rootAsked" }, { target: "declined" }] } },
      declined: {
        meta: {
          expect: {
            until: (w: World) =>
              w.run().items.filter((i) => i.kind === "command" && i.status === "complete").length === 2,
            policies: (w: World) => [
              "undeclared_request_declined" as const,
              ...(seed.approvalsByOrdinal(record(w.flags)) ? ["requests_by_turn_ordinal" as const] : []),
            ],
            check: (w: World) => {
              must(opened(w).length === 0, "a request the record denies was shown");
              must(
                w.run().items.every((i) => i.kind !== "command" || i.detail?.status === "declined"),
                "an undeclared request was not declined",
              );
            },
          },
        },
        on: { FINISH: "completed" },
      },
      rootAsked: {
        meta: {
          expect: {
            until: (w: World) => opened(w).length === 1,
            policies: (w: World) => (seed.approvalsByOrdinal(record(w.flags)) ? ["requests_by_turn_ordinal"] : []),
          },
        },
        on: {
          APPROVE: [{ guard: "byOrdinal", target: "subagentAskedAfterOrdinal" }, { target: "subagentAskedAfterId" }],
        },
      },
      // The first answer went back by the request's native id, or by its turn and ordinal.
      subagentAskedAfterId: subagentAsked("id"),
      subagentAskedAfterOrdinal: subagentAsked("ordinal"),
      answered: {
        meta: { expect: { until: (w: World) => w.rt.views.pendingRequests(w.threadId).length === 0 } },
        on: { FINISH: "completed" },
      },
      completed: finished(),
    },
  ),
  drive: { SEND: (w) => w.send("asks"), APPROVE: approveOpen, FINISH: finish },
};

function commandDone(w: World): boolean {
  return (
    w.run().items.some((i) => i.kind === "command" && i.status === "complete") &&
    w.rt.views.pendingRequests(w.threadId).length === 0
  );
}

function fail(message: string): never {
  throw new Error(message);
}

export const artifactModel: PolicyModel = {
  name: "artifacts",
  reads: {
    "main.planning.emitsPlanUpdated": B,
    "main.planning.emitsTodoList": B,
    "main.planning.planDeltasHaveItemIds": B,
    "main.streaming.streamsPlanText": B,
  },
  machine: modelMachine(
    "artifacts",
    {},
    {
      idle: { on: { SEND: "running" } },
      running: {
        meta: {
          expect: {
            // The plan and the todo list come before the reply: all three are in once it is.
            until: (w: World) =>
              w.run().items.some((i) => i.kind === "assistant_message" && i.text === `planned ${w.n}`),
            policies: (w: World) => seed.artifactDegradations(record(w.flags)) as PolicyName[],
          },
        },
        on: { FINISH: "completed" },
      },
      completed: {
        type: "final",
        meta: {
          expect: {
            until: runIs("completed"),
            check: (w: World) => {
              const { panels } = w.rt.affordances(w.threadId);
              const r = record(w.flags);
              if (panels.plan !== r.on("planning.emitsPlanUpdated") || panels.todo !== r.on("planning.emitsTodoList")) {
                throw new Error(`panels ${JSON.stringify(panels)} do not follow the artifacts`);
              }
              // One node per kind, however the updates were correlated.
              for (const kind of ["plan", "todo_list"] as const) {
                const nodes = w.run().items.filter((i) => i.kind === kind);
                must(nodes.length <= 1, `${nodes.length} ${kind} nodes`);
              }
            },
          },
        },
      },
    },
  ),
  drive: { SEND: sendThenRun("artifacts"), FINISH: finish },
};

const questionAsked = (w: World) => w.rt.views.pendingRequests(w.threadId).find((r) => r.kind === "user_input");

/** A turn that proposes a plan, then asks whether to go on: as artifacts and a request, or as text. */
export const planningModel: PolicyModel = {
  name: "planning",
  reads: { "main.planning.emitsProposedPlan": B, "main.planning.supportsStructuredQuestions": B },
  machine: modelMachine(
    "planning",
    {
      asksStructured: (f) => seed.asksStructured(record(f)),
      proposes: (f) => seed.proposesPlans(record(f)),
    },
    {
      idle: { on: { SEND: [{ guard: "asksStructured", target: "asked" }, { target: "askedInText" }] } },
      asked: {
        meta: {
          expect: {
            until: (w: World) => !!questionAsked(w),
            policies: (w: World) => (seed.proposesPlans(record(w.flags)) ? [] : ["no_proposed_plans"]),
            check: (w: World) =>
              must(
                w.rt.affordances(w.threadId).requests[0]?.state === "respondable",
                "the question is not respondable",
              ),
          },
        },
        on: { ANSWER: "answered" },
      },
      askedInText: {
        meta: {
          expect: {
            until: (w: World) =>
              w.run().items.some((i) => i.kind === "assistant_message" && i.text?.startsWith("go on")),
            policies: (w: World) => [
              "questions_as_text" as const,
              ...(seed.proposesPlans(record(w.flags)) ? [] : ["no_proposed_plans" as const]),
            ],
            check: (w: World) => must(!questionAsked(w), "a question was asked as a request"),
          },
        },
        on: { FINISH: "completed" },
      },
      answered: { meta: { expect: { until: () => true } }, on: { FINISH: "completed" } },
      completed: {
        meta: {
          expect: {
            until: runIs("completed"),
            check: (w: World) => {
              const proposed = w.run().items.filter((i) => i.kind === "proposed_plan");
              const wanted = seed.proposesPlans(record(w.flags)) ? 1 : 0;
              must(proposed.length === wanted, `${proposed.length} proposed plans`);
              if (!wanted)
                must(
                  w.run().items.some((i) => i.kind === "assistant_message" && i.text?.startsWith("plan")),
                  "the plan is not in the assistant's text",
                );
              const { questions, plans } = w.rt.affordances(w.threadId);
              must(
                questions === (seed.asksStructured(record(w.flags)) ? "structured" : "as_text"),
                `questions ${questions}`,
              );
              must(plans.proposed === (wanted ? "artifacts" : "as_text"), `plans ${plans.proposed}`);
              must(plans.implement.length === wanted, "the proposed plan is not offered to implement");
            },
          },
        },
        on: { IMPLEMENT: [{ guard: "proposes", target: "implemented" }, { target: "nothingToImplement" }] },
      },
      implemented: {
        type: "final",
        meta: {
          expect: {
            until: (w: World) => w.run().status === "running",
            check: (w: World) =>
              must(w.run().text.startsWith("Implement this plan"), "the run does not carry the plan"),
          },
        },
      },
      nothingToImplement: { type: "final", meta: { expect: { refused: "not_found" } } },
    },
  ),
  drive: {
    IMPLEMENT: async (w) => {
      const plan = w.run().items.find((i) => i.kind === "proposed_plan");
      await w.attempt(async () => {
        const receipt = await w.rt.implementPlan({ threadId: w.threadId, nodeId: plan?.id ?? "nod_none" });
        w.runIds.push(receipt.runId);
        return receipt;
      });
    },
    SEND: (w) => w.send("plans"),
    ANSWER: (w) =>
      w.attempt(() =>
        w.rt.respond({
          requestId: questionAsked(w)!.requestId,
          response: { kind: "answers", answers: { go: ["yes"] } },
        }),
      ),
    FINISH: finish,
  },
};

const subagentNodes = (w: World) => w.run().items.filter((i) => i.kind === "subagent");
const childSaid = (w: World) => w.run().items.some((i) => i.kind === "assistant_message" && i.text === `child ${w.n}`);

/**
 * A provider that reports a subagent (whatever its record says) which says something and waits;
 * the app closes it, or lets it finish and waits for it. The record decides how it is shown and
 * whether the operations reach the provider.
 */
export const subagentModel: PolicyModel = {
  name: "subagents",
  reads: {
    "main.subagents.exposesSubagentThreadIds": B,
    "main.subagents.emitsSubagentLifecycle": B,
    "main.subagents.canWaitForSubagents": B,
    "main.subagents.canCloseSubagents": B,
  },
  machine: modelMachine(
    "subagents",
    {
      inline: (f) => !seed.subagentVisible(record(f)),
      closes: (f) => seed.subagentOperation(record(f), "close"),
      waits: (f) => seed.subagentOperation(record(f), "wait"),
    },
    {
      idle: { on: { SEND: [{ guard: "inline", target: "inline" }, { target: "delegated" }] } },
      inline: {
        meta: {
          expect: {
            until: childSaid,
            policies: (w: World) => seed.subagentDegradations(record(w.flags)) as PolicyName[],
            check: (w: World) => must(subagentNodes(w).length === 0, "a subagent node for a subagent not shown"),
          },
        },
        on: { RELEASE: "finishing" },
      },
      delegated: {
        meta: {
          expect: {
            until: (w: World) => childSaid(w) && subagentNodes(w).length === 1,
            policies: (w: World) => seed.subagentDegradations(record(w.flags)) as PolicyName[],
            check: (w: World) => {
              const shown = w.rt.affordances(w.threadId).subagents.shown;
              must(shown === seed.subagentShown(record(w.flags)), `affordances say subagents are ${shown}`);
            },
          },
        },
        on: {
          CLOSE: [{ guard: "closes", target: "closed" }, { target: "closeRefused" }],
          RELEASE: "released",
        },
      },
      closed: {
        meta: {
          expect: {
            until: (w: World) => subagentNodes(w)[0]?.status === "complete",
            check: (w: World) => {
              const status = (subagentNodes(w)[0]?.detail as { status?: string } | undefined)?.status;
              must(status === "interrupted", `the closed subagent ended ${status}`);
            },
          },
        },
        on: { FINISH: "completed" },
      },
      closeRefused: {
        meta: {
          expect: {
            refused: "capability_unsupported",
            policies: ["subagent_close_unsupported"],
            check: (w: World) =>
              must(subagentNodes(w)[0]?.status === "streaming", "a refused close ended the subagent"),
          },
        },
        on: { RELEASE: "released" },
      },
      released: {
        // The subagent's work is over once its parent speaks again.
        meta: { expect: { until: (w: World) => w.run().items.some((i) => i.text === `parent ${w.n}`) } },
        on: { WAIT: [{ guard: "waits", target: "waited" }, { target: "waitRefused" }] },
      },
      waited: {
        meta: {
          expect: {
            check: (w: World) => must((w.lastReceipt as { status?: string })?.status === "completed", "no wait"),
          },
        },
        on: { FINISH: "completed" },
      },
      waitRefused: {
        meta: { expect: { refused: "capability_unsupported", policies: ["subagent_wait_unsupported"] } },
        on: { FINISH: "completed" },
      },
      finishing: {
        meta: { expect: { until: (w: World) => w.run().items.some((i) => i.text === `parent ${w.n}`) } },
        on: { FINISH: "completed" },
      },
      completed: finished(),
    },
  ),
  drive: {
    SEND: (w) => w.send("delegate"),
    CLOSE: (w) => w.attempt(() => w.rt.closeSubagent({ threadId: w.threadId, nodeId: subagentNodes(w)[0]!.id })),
    RELEASE: async (w) => w.backends.get("main")!.openGate(`sub-${w.n}`),
    WAIT: (w) => w.attempt(() => w.rt.waitForSubagent({ threadId: w.threadId, nodeId: subagentNodes(w)[0]!.id })),
    FINISH: finish,
  },
};

const sessionsStarted = (w: World) => w.records.filter((r) => r.event.type === "session.started").length;

export const modelSwitchModel: PolicyModel = {
  name: "model switch",
  reads: { "main.sessions.supportsModelSwitchInSession": B },
  machine: modelMachine(
    "modelSwitch",
    { canSwitchModelInSession: (f) => seed.modelSwitch(record(f)) === "in_session" },
    {
      idle: { on: { SEND: "running" } },
      running: { meta: { expect: { until: runIs("running") } }, on: { FINISH: "first" } },
      first: {
        meta: { expect: { until: runIs("completed") } },
        on: { SWITCH_MODEL: [{ guard: "canSwitchModelInSession", target: "sameSession" }, { target: "newSession" }] },
      },
      sameSession: {
        meta: {
          expect: {
            until: runIs("running"),
            check: (w: World) => void (sessionsStarted(w) === 1 || fail("a new session was started")),
          },
        },
        on: { FINISH: "completed" },
      },
      newSession: {
        meta: {
          expect: {
            until: runIs("running"),
            policies: ["model_switch_new_session"],
            check: (w: World) => void (sessionsStarted(w) === 2 || fail("no new session for the new model")),
          },
        },
        on: { FINISH: "completed" },
      },
      completed: finished(),
    },
  ),
  drive: {
    SEND: sendThenRun("plain"),
    SWITCH_MODEL: async (w) => {
      await w.send("plain", { model: "model-2" });
      await w.until("switched run starts", () => w.run().status === "running");
    },
    FINISH: finish,
  },
};

/** The turn the main backend ran last, and whether the file its prompt writes is there. */
const lastTurn = (w: World) => [...w.backends.get("main")!.threads.values()].flatMap((t) => t.turns).at(-1);
const wroteFile = (w: World) => existsSync(join(w.cwd, `file-${w.n}.txt`));

export const modeSwitchModel: PolicyModel = {
  name: "mode switch",
  reads: { "main.sessions.supportsRuntimeModeSwitchInSession": B },
  machine: modelMachine(
    "modeSwitch",
    { canSwitchModeInSession: (f) => seed.modeSwitch(record(f)) === "in_session" },
    {
      idle: { on: { SEND: "running" } },
      running: { meta: { expect: { until: runIs("running") } }, on: { FINISH: "first" } },
      first: {
        meta: { expect: { until: runIs("completed"), check: (w: World) => must(wroteFile(w), "run 1 wrote no file") } },
        on: { PLAN: [{ guard: "canSwitchModeInSession", target: "sameSession" }, { target: "newSession" }] },
      },
      sameSession: {
        meta: {
          expect: {
            until: runIs("running"),
            check: (w: World) => {
              must(sessionsStarted(w) === 1, "a new session was started");
              must(lastTurn(w)?.runtimeMode?.interaction === "plan", "the turn did not work in plan mode");
            },
          },
        },
        on: { FINISH: "planned" },
      },
      newSession: {
        meta: {
          expect: {
            until: runIs("running"),
            policies: ["mode_switch_new_session"],
            check: (w: World) => {
              must(sessionsStarted(w) === 2, "no new session for the new mode");
              must(lastTurn(w)?.runtimeMode?.interaction === "plan", "the turn did not work in plan mode");
            },
          },
        },
        on: { FINISH: "planned" },
      },
      planned: {
        type: "final",
        meta: {
          expect: { until: runIs("completed"), check: (w: World) => must(!wroteFile(w), "plan mode wrote a file") },
        },
      },
    },
  ),
  drive: {
    SEND: sendThenRun("plain"),
    PLAN: async (w) => {
      await w.send("plain", { runtimeMode: { interaction: "plan" } });
      await w.until("the plan-mode run starts", () => w.run().status === "running");
    },
    FINISH: finish,
  },
};

function must(ok: boolean, message: string): void {
  if (!ok) throw new Error(message);
}

/** A provider whose record says it has no subagents reports one anyway: its work is shown in its turn. */
export const subagentInlineModel: PolicyModel = {
  name: "subagents reported",
  reads: { "main.subagents.supportsSubagents": B },
  open: (flags) => World.open(flags, ["main"], {}, undefined, { declaredOnly: true }),
  machine: modelMachine(
    "subagentsReported",
    { supports: (f) => seed.subagentShown(record(f)) !== "inline" },
    {
      idle: { on: { SEND: [{ guard: "supports", target: "nested" }, { target: "inline" }] } },
      nested: {
        meta: { expect: { until: (w: World) => childSaid(w) && subagentNodes(w).length === 1 } },
        on: { RELEASE: "finishing" },
      },
      inline: {
        meta: {
          expect: {
            until: childSaid,
            policies: ["subagent_shown_inline"],
            check: (w: World) =>
              must(subagentNodes(w).length === 0, "a subagent node for a provider without subagents"),
          },
        },
        on: { RELEASE: "finishing" },
      },
      finishing: {
        meta: { expect: { until: (w: World) => w.run().items.some((i) => i.text === `parent ${w.n}`) } },
        on: { FINISH: "completed" },
      },
      completed: finished(),
    },
  ),
  drive: {
    SEND: (w) => w.send("delegate"),
    RELEASE: async (w) => w.backends.get("main")!.openGate(`sub-${w.n}`),
    FINISH: finish,
  },
};

export const runPolicyModels = [
  toolCallbackModel,
  mcpToolModel,
  itemIdentityModel,
  subagentInlineModel,
  subagentModel,
  planningModel,
  turnIdentityModel,
  requestArrivalModel,
  toolLifecycleModel,
  interruptModel,
  turnStartModel,
  sharedSessionModel,
  steerModel,
  queueModel,
  terminalModel,
  messageModel,
  approvalModel,
  artifactModel,
  modelSwitchModel,
  modeSwitchModel,
];
