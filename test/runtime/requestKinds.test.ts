import { describe, expect, it } from "vitest";
import {
  createScriptedAdapter,
  defineCapabilities,
  ScriptedBackend,
  type DomainEvent,
  type LogRecord,
  type ProviderAdapter,
  type ScriptStep,
} from "../../src/index.js";
import {
  firstEvent,
  injectOnThread,
  nextEvent,
  ofType,
  openTestRuntime,
  recordCalls,
  withInjectedFrames,
} from "../support/runtime.js";
import { declaring, rewriteEvents } from "./hostileProvider.js";

/**
 * The approval fields of the capability record decide which requests may arrive (a kind the record denies is a
 * protocol warning, declined back to the provider, never shown), how a request is addressed (its native id, or its
 * turn and ordinal), and where a request from inside a subagent hangs.
 */

const accept = { kind: "decision", decision: "accept" } as const;

const policiesOf = (events: LogRecord<DomainEvent>[], name: string) =>
  ofType(events, "policy.applied").filter((p) => p.policy === name);

const protocolWarnings = (events: LogRecord<DomainEvent>[]) =>
  ofType(events, "warning").filter((w) => w.message.startsWith("protocol_error:"));

describe("a request of a kind the capability record denies", () => {
  const steps: ScriptStep[] = [
    { type: "command", command: "rm -rf build", output: "removed", approval: true },
    { type: "text", text: "done" },
  ];

  for (const declared of [false, true]) {
    it(`is a protocol warning, declined, never shown (command approval ${declared})`, async () => {
      // The provider asks before every command, whatever its record says.
      const record = defineCapabilities({ approvals: { supportsCommandApproval: declared } });
      const provider = recordCalls(declaring(createScriptedAdapter({ script: () => steps }), record));
      const { rt, events, cleanup } = await openTestRuntime({ p: provider.adapter });
      try {
        const { threadId } = await rt.createThread({ providerTarget: "p" });
        expect(rt.affordances(threadId).approvalKinds).toEqual(
          declared ? ["command", "file_change", "apply_patch"] : ["file_change", "apply_patch"],
        );
        const { runId } = await rt.sendMessage({ threadId, text: "clean" });
        const shown = (e: DomainEvent) =>
          (e.type === "request.opened" || e.type === "run.terminal") && e.runId === runId;
        const first = await firstEvent(rt, shown);
        if (declared) {
          expect(first.type).toBe("request.opened");
          const { requestId } = first as Extract<DomainEvent, { type: "request.opened" }>;
          expect(rt.affordances(threadId).requests).toEqual([{ requestId, kind: "command", state: "respondable" }]);
          await rt.respond({ requestId, response: accept });
        } else {
          // Nothing to answer: the runtime declined it and the turn went on.
          expect(first.type).toBe("run.terminal");
        }
        const run = await rt.waitForRun(runId);
        expect(run.status).toBe("completed");
        const command = run.items.find((i) => i.kind === "command")!;
        expect(command.detail?.status).toBe(declared ? "completed" : "declined");
        expect(ofType(events, "request.opened")).toHaveLength(declared ? 1 : 0);
        expect(run.items.filter((i) => i.kind === "approval")).toHaveLength(declared ? 1 : 0);
        const answers = provider.calls.filter((c) => c.method === "respondToRequest").map((c) => c.input.response);
        expect(answers).toEqual([declared ? accept : { kind: "decision", decision: "decline" }]);
        expect(protocolWarnings(events).map((w) => w.message)).toEqual(
          declared
            ? []
            : [
                "protocol_error: p asked for a command approval its capability record denies " +
                  "(approvals.supportsCommandApproval is false)",
              ],
        );
        expect(policiesOf(events, "undeclared_request_declined").map((p) => [p.capability, p.outcome])).toEqual(
          declared ? [] : [["approvals.supportsCommandApproval", "refused"]],
        );
        expect(rt.affordances(threadId).requests).toEqual([]);
      } finally {
        await cleanup();
      }
    });
  }
});

describe("request ids", () => {
  const steps: ScriptStep[] = [
    { type: "command", command: "make", output: "made", approval: true },
    { type: "command", command: "make install", output: "installed", approval: true },
  ];
  // Ids the provider sends without declaring them: the same one for every request, and not what it answers by.
  const unkeyedIds = (adapter: ProviderAdapter) =>
    rewriteEvents(adapter, (frame) => {
      const { event } = frame;
      if (event.type !== "request.opened" && event.type !== "request.resolved") return [frame];
      return [{ ...frame, event: { ...event, requestRef: "native-1" } }];
    });

  for (const approvalsHaveNativeRequestIds of [false, true]) {
    it(`are each its native id, or its turn and ordinal (${approvalsHaveNativeRequestIds})`, async () => {
      const scripted = createScriptedAdapter({
        capabilities: { approvals: { approvalsHaveNativeRequestIds } },
        script: () => steps,
      });
      const provider = recordCalls(approvalsHaveNativeRequestIds ? scripted : unkeyedIds(scripted));
      const { rt, events, cleanup } = await openTestRuntime({ p: provider.adapter });
      try {
        const { threadId } = await rt.createThread({ providerTarget: "p" });
        const { runId } = await rt.sendMessage({ threadId, text: "build" });
        const requestIds: string[] = [];
        for (let n = 0; n < 2; n += 1) {
          const opened = await nextEvent(
            rt,
            "request.opened",
            (e) => e.runId === runId && !requestIds.includes(e.requestId),
          );
          requestIds.push(opened.event.requestId);
          await rt.respond({ requestId: opened.event.requestId, response: accept });
          // Answered: the provider took it (an address it cannot match would leave a warning and the request pending).
          const taken = await firstEvent(
            rt,
            (e) =>
              (e.type === "request.resolved" && e.requestId === opened.event.requestId) ||
              (e.type === "warning" && e.message.includes(opened.event.requestId)),
          );
          expect(taken.type).toBe("request.resolved");
        }
        const run = await rt.waitForRun(runId);
        expect(run.status).toBe("completed");
        expect(new Set(requestIds).size).toBe(2);
        const addresses = provider.calls
          .filter((c) => c.method === "respondToRequest")
          .map((c) => [typeof c.input.request.requestRef, c.input.request.ordinal]);
        expect(addresses).toEqual(
          approvalsHaveNativeRequestIds
            ? [
                ["string", 1],
                ["string", 2],
              ]
            : [
                ["object", 1], // null: by ordinal
                ["object", 2],
              ],
        );
        // The provider's ids stay in the log as evidence.
        const refs = ofType(events, "request.opened").map((e) => e.nativeRef);
        if (!approvalsHaveNativeRequestIds) expect(refs).toEqual(["native-1", "native-1"]);
        expect(policiesOf(events, "requests_by_turn_ordinal")).toHaveLength(approvalsHaveNativeRequestIds ? 0 : 1);
      } finally {
        await cleanup();
      }
    });
  }
});

describe("a request from inside a subagent", () => {
  it("hangs under the subagent when the record says subagents can ask", async () => {
    const adapter = createScriptedAdapter({
      script: () => [
        {
          type: "subagent",
          agent: "helper",
          prompt: "build it",
          steps: [{ type: "command", command: "make", output: "made", approval: true }],
        },
      ],
    });
    const { rt, events, cleanup } = await openTestRuntime({ p: adapter });
    try {
      const { threadId } = await rt.createThread({ providerTarget: "p" });
      const { runId } = await rt.sendMessage({ threadId, text: "go" });
      const opened = await nextEvent(rt, "request.opened", (e) => e.runId === runId);
      const subagent = ofType(events, "node.started").find((e) => e.kind === "subagent")!;
      const node = ofType(events, "node.started").find((e) => e.nodeId === opened.event.nodeId)!;
      expect(node.parentNodeId).toBe(subagent.nodeId);
      await rt.respond({ requestId: opened.event.requestId, response: accept });
      expect((await rt.waitForRun(runId)).status).toBe("completed");
      expect(protocolWarnings(events)).toEqual([]);
    } finally {
      await cleanup();
    }
  });

  for (const approvalsCanOriginateFromSubagents of [false, true]) {
    it(`the record denies is a protocol warning, at the root (${approvalsCanOriginateFromSubagents})`, async () => {
      const backend = new ScriptedBackend();
      const provider = withInjectedFrames(
        createScriptedAdapter({
          backend,
          capabilities: { approvals: { approvalsCanOriginateFromSubagents } },
          script: () => [
            { type: "subagent", agent: "helper", prompt: "look", steps: [{ type: "gate", name: "asked" }] },
            { type: "text", text: "done" },
          ],
        }),
      );
      const { rt, events, cleanup } = await openTestRuntime({ p: provider.adapter });
      try {
        const { threadId } = await rt.createThread({ providerTarget: "p" });
        const { runId } = await rt.sendMessage({ threadId, text: "go" });
        const subagent = await nextEvent(rt, "node.started", (e) => e.runId === runId && e.kind === "subagent");
        // The provider asks on the parent thread, naming the subagent's item as where it comes from.
        injectOnThread(provider.inject, events, {
          type: "request.opened",
          itemRef: subagent.event.nativeRef,
          request: { kind: "command", command: "make" },
        });
        const opened = await nextEvent(rt, "request.opened", (e) => e.runId === runId);
        const node = ofType(events, "node.started").find((e) => e.nodeId === opened.event.nodeId)!;
        const [attempt] = ofType(events, "attempt.started");
        expect(node.parentNodeId).toBe(
          approvalsCanOriginateFromSubagents ? subagent.event.nodeId : attempt!.rootNodeId,
        );
        expect(protocolWarnings(events)).toHaveLength(approvalsCanOriginateFromSubagents ? 0 : 1);
        expect(policiesOf(events, "subagent_request_at_root")).toHaveLength(approvalsCanOriginateFromSubagents ? 0 : 1);
        backend.openGate("asked");
        expect((await rt.waitForRun(runId)).status).toBe("completed");
      } finally {
        await cleanup();
      }
    });
  }
});

describe("a structured question from a provider whose record says it asks in text", () => {
  it("is a protocol warning, declined, never shown", async () => {
    const record = defineCapabilities({ planning: { supportsStructuredQuestions: false } });
    const steps: ScriptStep[] = [
      { type: "question", questions: [{ id: "go", question: "go on?" }] },
      { type: "text", text: "going" },
    ];
    const provider = recordCalls(declaring(createScriptedAdapter({ script: () => steps }), record));
    const { rt, events, cleanup } = await openTestRuntime({ p: provider.adapter });
    try {
      const { threadId } = await rt.createThread({ providerTarget: "p" });
      const run = await rt.waitForRun((await rt.sendMessage({ threadId, text: "ask" })).runId);
      expect(run.status).toBe("completed");
      expect(ofType(events, "request.opened")).toEqual([]);
      expect(protocolWarnings(events).map((w) => w.message)).toEqual([
        "protocol_error: p asked for a structured question its capability record denies " +
          "(planning.supportsStructuredQuestions is false)",
      ]);
      expect(policiesOf(events, "undeclared_request_declined").map((p) => p.capability)).toEqual([
        "planning.supportsStructuredQuestions",
      ]);
      const answers = provider.calls.filter((c) => c.method === "respondToRequest").map((c) => c.input.response);
      expect(answers).toEqual([{ kind: "decision", decision: "decline" }]);
    } finally {
      await cleanup();
    }
  });
});

describe("a request to carry out a proposed plan", () => {
  for (const emitsProposedPlan of [true, false]) {
    it(`is shown where the record proposes plans, else declined as undeclared (${emitsProposedPlan})`, async () => {
      const backend = new ScriptedBackend();
      const record = defineCapabilities({ planning: { emitsProposedPlan } });
      const steps: ScriptStep[] = [
        { type: "gate", name: "asked" },
        { type: "text", text: "done" },
      ];
      const provider = withInjectedFrames(declaring(createScriptedAdapter({ backend, script: () => steps }), record));
      const { rt, events, cleanup } = await openTestRuntime({ p: provider.adapter });
      try {
        const { threadId } = await rt.createThread({ providerTarget: "p" });
        const { runId } = await rt.sendMessage({ threadId, text: "plan" });
        await nextEvent(rt, "attempt.turn_bound", (e) => e.runId === runId);
        injectOnThread(provider.inject, events, {
          type: "request.opened",
          request: { kind: "plan_approval", plan: "build it" },
        });
        const shown = (e: DomainEvent) => (e.type === "request.opened" || e.type === "warning") && e.runId === runId;
        const first = await firstEvent(rt, shown);
        expect(first.type).toBe(emitsProposedPlan ? "request.opened" : "warning");
        if (emitsProposedPlan) {
          expect(rt.affordances(threadId).requests.map((r) => [r.kind, r.state])).toEqual([
            ["plan_approval", "respondable"],
          ]);
          await rt.respond({ requestId: (first as { requestId: string }).requestId, response: accept });
        } else {
          const declined = await firstEvent(
            rt,
            (e) => e.type === "policy.applied" && e.policy === "undeclared_request_declined",
          );
          expect((declined as { capability: string }).capability).toBe("planning.emitsProposedPlan");
        }
        backend.openGate("asked");
        expect((await rt.waitForRun(runId)).status).toBe("completed");
      } finally {
        await cleanup();
      }
    });
  }
});
