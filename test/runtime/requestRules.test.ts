import { describe, expect, it } from "vitest";
import {
  createScriptedAdapter,
  ScriptedBackend,
  type CapabilityOverrides,
  type DomainEvent,
  type DomainEventOf,
  type LogRecord,
} from "../../src/index.js";
import type { ProviderAdapter } from "../../src/adapters/contract.js";
import {
  injectOnThread,
  nextEvent,
  ofType,
  openTestRuntime,
  override,
  withInjectedFrames,
} from "../support/runtime.js";
import { policies } from "../support/policies.js";

/**
 * The request rules of the capability record, driven through the runtime by hand-made provider frames: when a native
 * request id is trusted (the approvals and the identity must both say so), what a repeated or resolved id means, how
 * an answer is addressed back (its trusted id, else its ordinal in the turn, every request of the turn counted), which
 * kinds the record denies (a protocol warning naming the record field, declined back), and where a request hangs.
 */

type Answer = { request: { requestRef: string | null; turnRef: string | null; ordinal: number }; response: unknown };

const trustedIds: CapabilityOverrides = {
  approvals: { approvalsHaveNativeRequestIds: true },
  identity: { nativeRequestIds: "strong" },
};

/**
 * A turn held open at a gate on a provider with this record; the test speaks for the provider with injected frames.
 * Answers (user responses and the runtime's declines) are recorded at the provider's boundary and go no further.
 */
async function heldTurn(capabilities: CapabilityOverrides) {
  const backend = new ScriptedBackend();
  const answers: Answer[] = [];
  const scripted = createScriptedAdapter({
    backend,
    capabilities,
    script: () => [
      { type: "gate", name: "held" },
      { type: "text", text: "done" },
    ],
  });
  const recording: ProviderAdapter = override(scripted, {
    respondToRequest: async ({ request, response }) => {
      answers.push({ request: { ...request }, response });
    },
  });
  const provider = withInjectedFrames(recording);
  const opened = await openTestRuntime({ p: provider.adapter });
  const { rt, events } = opened;
  const { threadId } = await rt.createThread({ providerTarget: "p" });
  const { runId } = await rt.sendMessage({ threadId, text: "go" });
  const bound = await nextEvent(rt, "attempt.turn_bound", (e) => e.runId === runId);
  const say = (event: Record<string, unknown>) => injectOnThread(provider.inject, events, event);
  /** A tool approval (always allowed) as the last frame: once it shows, every frame before it was applied. */
  let sentinels = 0;
  const settle = async () => {
    sentinels += 1;
    const toolName = `sentinel-${sentinels}`;
    say({ type: "request.opened", request: { kind: "tool_approval", toolName, input: null } });
    await nextEvent(rt, "request.opened", (e) => e.payload.kind === "tool_approval" && e.payload.toolName === toolName);
  };
  /** The requests opened so far, sentinels left out. */
  const requests = () =>
    ofType(events, "request.opened").filter(
      (e) => !(e.payload.kind === "tool_approval" && e.payload.toolName.startsWith("sentinel-")),
    );
  const finish = async () => {
    backend.openGate("held");
    expect((await rt.waitForRun(runId)).status).toBe("completed");
  };
  return { ...opened, threadId, runId, bound: bound.event, say, settle, requests, answers, finish };
}

const command = (ref?: string) => ({
  type: "request.opened",
  ...(ref ? { requestRef: ref } : {}),
  request: { kind: "command", command: "make" },
});
const resolved = (ref?: string) => ({ type: "request.resolved", ...(ref ? { requestRef: ref } : {}) });

const resolutions = (events: LogRecord<DomainEvent>[]) => ofType(events, "request.resolved");

const protocolWarnings = (events: LogRecord<DomainEvent>[]) =>
  ofType(events, "warning")
    .filter((w) => w.message.startsWith("protocol_error:"))
    .map((w) => w.message);

describe("a native request id said again", () => {
  for (const nativeRequestIds of ["weak", "strong"] as const) {
    it(`while its request is open is the same request, never a second one (${nativeRequestIds})`, async () => {
      const turn = await heldTurn({ ...trustedIds, identity: { nativeRequestIds } });
      try {
        turn.say(command("r1"));
        turn.say(command("r1"));
        await turn.settle();
        expect(turn.requests().map((e) => e.nativeRef)).toEqual(["r1"]);
        await turn.finish();
      } finally {
        await turn.cleanup();
      }
    });

    it(`after its request resolved is a new request only where ids are weak (${nativeRequestIds})`, async () => {
      const turn = await heldTurn({ ...trustedIds, identity: { nativeRequestIds } });
      try {
        turn.say(command("r1"));
        turn.say(resolved("r1"));
        turn.say(command("r1"));
        await turn.settle();
        const opened = turn.requests();
        // A strong id names one request for good; a weak one may be used again once its request is done.
        expect(opened.map((e) => e.nativeRef)).toEqual(nativeRequestIds === "strong" ? ["r1"] : ["r1", "r1"]);
        expect(new Set(opened.map((e) => e.requestId)).size).toBe(opened.length);
        expect(resolutions(turn.events).map((e) => [e.requestId, e.by])).toEqual([[opened[0]!.requestId, "provider"]]);
        await turn.finish();
      } finally {
        await turn.cleanup();
      }
    });
  }

  it("in a later turn is another request, even where ids are strong", async () => {
    const backend = new ScriptedBackend();
    const provider = withInjectedFrames(
      createScriptedAdapter({
        backend,
        capabilities: trustedIds,
        script: ({ text }) => [
          { type: "gate", name: text },
          { type: "text", text: "done" },
        ],
      }),
    );
    const { rt, events, cleanup } = await openTestRuntime({ p: provider.adapter });
    try {
      const { threadId } = await rt.createThread({ providerTarget: "p" });
      const ids: string[] = [];
      for (const text of ["first", "second"]) {
        const { runId } = await rt.sendMessage({ threadId, text });
        await nextEvent(rt, "attempt.turn_bound", (e) => e.runId === runId);
        injectOnThread(provider.inject, events, command("r1"));
        ids.push((await nextEvent(rt, "request.opened", (e) => e.runId === runId)).event.requestId);
        injectOnThread(provider.inject, events, resolved("r1"));
        backend.openGate(text);
        expect((await rt.waitForRun(runId)).status).toBe("completed");
      }
      expect(new Set(ids).size).toBe(2);
    } finally {
      await cleanup();
    }
  });
});

describe("a request resolved by the provider", () => {
  it("is the one its trusted id names", async () => {
    const turn = await heldTurn(trustedIds);
    try {
      turn.say(command("r1"));
      turn.say(command("r2"));
      turn.say(resolved("r1"));
      await turn.settle();
      const [first, second] = turn.requests();
      expect(resolutions(turn.events).map((e) => [e.requestId, e.by, e.response])).toEqual([
        [first!.requestId, "provider", null],
      ]);
      const pending = turn.rt.affordances(turn.threadId).requests.map((r) => r.requestId);
      expect(pending).toContain(second!.requestId);
      expect(pending).not.toContain(first!.requestId);
      await turn.finish();
      // Its resolution closed its node: the turn's end closes only what was still open.
      const closedAtEnd = ofType(turn.events, "node.completed").filter((e) => e.nodeId === first!.nodeId);
      expect(closedAtEnd).toEqual([]);
    } finally {
      await turn.cleanup();
    }
  });

  for (const [why, capabilities] of [
    ["the approvals say requests have no native ids", { approvals: { approvalsHaveNativeRequestIds: false } }],
    ["the identity says there are no native request ids", { ...trustedIds, identity: { nativeRequestIds: "none" } }],
  ] as const) {
    it(`is the oldest open one when ids are not trusted: ${why}`, async () => {
      const turn = await heldTurn(capabilities);
      try {
        turn.say(command("r1"));
        turn.say(command("r2"));
        turn.say(resolved("r2"));
        await turn.settle();
        const [first, second] = turn.requests();
        expect(second).toBeDefined();
        expect(resolutions(turn.events).map((e) => e.requestId)).toEqual([first!.requestId]);
        await turn.finish();
      } finally {
        await turn.cleanup();
      }
    });
  }

  it("changes nothing when it names no request of the turn, or one resolved already", async () => {
    const turn = await heldTurn(trustedIds);
    try {
      turn.say(command("r1"));
      turn.say(command("r2"));
      turn.say(resolved("r9"));
      await turn.settle();
      expect(resolutions(turn.events)).toEqual([]);
      turn.say(resolved("r1"));
      turn.say(resolved("r1"));
      await turn.settle();
      const [first] = turn.requests();
      expect(resolutions(turn.events).map((e) => e.requestId)).toEqual([first!.requestId]);
      expect(ofType(turn.events, "warning")).toEqual([]);
      await turn.finish();
    } finally {
      await turn.cleanup();
    }
  });

  it("without an id, when none is open, changes nothing", async () => {
    const turn = await heldTurn({ approvals: { approvalsHaveNativeRequestIds: false } });
    try {
      turn.say(resolved());
      turn.say(command());
      turn.say(resolved());
      turn.say(resolved());
      await turn.settle();
      expect(resolutions(turn.events).map((e) => e.requestId)).toEqual(turn.requests().map((e) => e.requestId));
      // Nothing failed to apply: a resolution of nothing is no error.
      expect(ofType(turn.events, "warning").filter((w) => !w.message.startsWith("protocol_error:"))).toEqual([]);
      await turn.finish();
    } finally {
      await turn.cleanup();
    }
  });
});

describe("two requests of one turn without native ids", () => {
  it("are two requests, told apart by their ordinals", async () => {
    const turn = await heldTurn({ approvals: { approvalsHaveNativeRequestIds: false } });
    try {
      turn.say(command());
      turn.say(command());
      await turn.settle();
      const opened = turn.requests();
      expect(opened).toHaveLength(2);
      expect(new Set(opened.map((e) => e.requestId)).size).toBe(2);
      expect(new Set(opened.map((e) => e.nodeId)).size).toBe(2);
      for (const { requestId } of opened) await turn.rt.respond({ requestId, response: accept });
      expect(turn.answers.map((a) => [a.request.requestRef, a.request.ordinal])).toEqual([
        [null, 1],
        [null, 2],
      ]);
      await turn.finish();
    } finally {
      await turn.cleanup();
    }
  });
});

const accept = { kind: "decision", decision: "accept" } as const;
const decline = { kind: "decision", decision: "decline" } as const;

describe("an answer's native address", () => {
  it("is the trusted id, the turn and the ordinal, a declined request counted among them", async () => {
    const turn = await heldTurn({ ...trustedIds, approvals: { supportsFileReadApproval: false } });
    try {
      turn.say({ type: "request.opened", requestRef: "r1", request: { kind: "file_read", path: "/etc/hosts" } });
      turn.say(command("r2"));
      await turn.settle();
      const [opened] = turn.requests();
      expect(opened!.nativeRef).toBe("r2");
      await turn.rt.respond({ requestId: opened!.requestId, response: accept });
      const turnRef = turn.bound.nativeTurnRef;
      expect(turn.answers).toEqual([
        { request: { requestRef: "r1", turnRef, ordinal: 1 }, response: decline },
        { request: { requestRef: "r2", turnRef, ordinal: 2 }, response: accept },
      ]);
      await turn.finish();
    } finally {
      await turn.cleanup();
    }
  });

  it("is the ordinal alone where the identity has no native request ids, the ids kept as evidence", async () => {
    const turn = await heldTurn({ ...trustedIds, identity: { nativeRequestIds: "none" } });
    try {
      turn.say(command("r1"));
      turn.say(command("r2"));
      await turn.settle();
      const opened = turn.requests();
      expect(opened.map((e) => e.nativeRef)).toEqual(["r1", "r2"]);
      await turn.rt.respond({ requestId: opened[1]!.requestId, response: accept });
      expect(turn.answers.map((a) => [a.request.requestRef, a.request.ordinal])).toEqual([[null, 2]]);
      // Correlating by ordinal is the identity's own rule here: not the approvals' fallback.
      expect(policies(turn.events, "requests_by_turn_ordinal")).toEqual([]);
      await turn.finish();
    } finally {
      await turn.cleanup();
    }
  });

  it("is live in the session the request came from", async () => {
    const turn = await heldTurn(trustedIds);
    try {
      turn.say(command("r1"));
      await turn.settle();
      const [session] = ofType(turn.events, "session.started");
      expect(turn.requests()[0]!.responseCapability).toEqual({
        kind: "live",
        sessionId: session!.sessionId,
        hostGeneration: session!.hostGeneration,
      });
      await turn.finish();
    } finally {
      await turn.cleanup();
    }
  });
});

describe("requests correlated by turn and ordinal (approvals without native request ids)", () => {
  for (const sendsIds of [false, true]) {
    it(`is said once per attempt, the ids evidence only when the provider sends some (${sendsIds})`, async () => {
      const turn = await heldTurn({ approvals: { approvalsHaveNativeRequestIds: false } });
      try {
        turn.say(command(sendsIds ? "r1" : undefined));
        turn.say(command(sendsIds ? "r2" : undefined));
        await turn.settle();
        const applied = policies(turn.events, "requests_by_turn_ordinal");
        expect(applied.map((p) => [p.runId, p.capability, p.outcome])).toEqual([
          [turn.runId, "approvals.approvalsHaveNativeRequestIds", "fallback"],
        ]);
        expect(applied[0]!.detail).toMatch(/turn and ordinal/);
        expect(applied[0]!.detail.includes("evidence")).toBe(sendsIds);
        await turn.finish();
      } finally {
        await turn.cleanup();
      }
    });
  }

  it("is not said where the provider has native request ids", async () => {
    const turn = await heldTurn(trustedIds);
    try {
      turn.say(command("r1"));
      await turn.settle();
      expect(policies(turn.events, "requests_by_turn_ordinal")).toEqual([]);
      await turn.finish();
    } finally {
      await turn.cleanup();
    }
  });
});

describe("a request of a kind the record denies", () => {
  const denials: Array<[string, CapabilityOverrides, Record<string, unknown>, string]> = [
    [
      "approvals.supportsFileReadApproval",
      { approvals: { supportsFileReadApproval: false } },
      { kind: "file_read", path: "/etc/hosts" },
      "a file_read approval",
    ],
    [
      "approvals.supportsFileChangeApproval",
      { approvals: { supportsFileChangeApproval: false } },
      { kind: "file_change", path: "a.txt" },
      "a file_change approval",
    ],
    [
      "approvals.supportsApplyPatchApproval",
      { approvals: { supportsApplyPatchApproval: false } },
      { kind: "apply_patch", patch: "--- a\n+++ b" },
      "an apply_patch approval",
    ],
    [
      "tools.supportsDynamicToolCallbacks",
      { tools: { supportsDynamicToolCallbacks: false } },
      { kind: "dynamic_tool", toolName: "lookup", input: {} },
      "a dynamic tool call",
    ],
    [
      "planning.supportsStructuredQuestions",
      { planning: { supportsStructuredQuestions: false } },
      { kind: "user_input", questions: [{ id: "go", question: "go on?" }] },
      "a structured question",
    ],
    [
      "planning.emitsProposedPlan",
      { planning: { emitsProposedPlan: false } },
      { kind: "plan_approval", plan: "build it" },
      "a request to carry out a proposed plan",
    ],
  ];

  for (const [field, capabilities, request, described] of denials) {
    it(`is declined, never shown, the warning naming ${field}`, async () => {
      const turn = await heldTurn({ ...trustedIds, ...capabilities, identity: { nativeRequestIds: "strong" } });
      try {
        turn.say({ type: "request.opened", requestRef: "r1", request });
        await turn.settle();
        expect(turn.requests()).toEqual([]);
        expect(protocolWarnings(turn.events)).toEqual([
          `protocol_error: p asked for ${described} its capability record denies (${field} is false)`,
        ]);
        const declined = policies(turn.events, "undeclared_request_declined");
        expect(declined.map((p) => [p.runId, p.capability, p.outcome])).toEqual([[turn.runId, field, "refused"]]);
        expect(declined[0]!.detail).toContain(`${field} is false`);
        expect(turn.answers).toEqual([
          { request: { requestRef: "r1", turnRef: turn.bound.nativeTurnRef, ordinal: 1 }, response: decline },
        ]);
        await turn.finish();
      } finally {
        await turn.cleanup();
      }
    });
  }

  it("is shown where the record allows it", async () => {
    const turn = await heldTurn({ ...trustedIds, approvals: { supportsFileReadApproval: true } });
    try {
      turn.say({ type: "request.opened", requestRef: "r1", request: { kind: "file_read", path: "/etc/hosts" } });
      turn.say({
        type: "request.opened",
        requestRef: "r2",
        request: { kind: "user_input", questions: [{ id: "go", question: "go on?" }] },
      });
      turn.say({ type: "request.opened", requestRef: "r3", request: { kind: "plan_approval", plan: "build it" } });
      turn.say({ type: "request.opened", requestRef: "r4", request: { kind: "apply_patch", patch: "--- a" } });
      await turn.settle();
      expect(turn.requests().map((e) => e.payload.kind)).toEqual([
        "file_read",
        "user_input",
        "plan_approval",
        "apply_patch",
      ]);
      expect(protocolWarnings(turn.events)).toEqual([]);
      expect(policies(turn.events, "undeclared_request_declined")).toEqual([]);
      await turn.finish();
    } finally {
      await turn.cleanup();
    }
  });

  it("never includes another tool's approval: no field of the record speaks against it", async () => {
    const denyAll: CapabilityOverrides = {
      approvals: {
        supportsCommandApproval: false,
        supportsFileReadApproval: false,
        supportsFileChangeApproval: false,
        supportsApplyPatchApproval: false,
      },
      planning: { supportsStructuredQuestions: false, emitsProposedPlan: false },
      tools: { supportsDynamicToolCallbacks: false },
    };
    const turn = await heldTurn(denyAll);
    try {
      turn.say({ type: "request.opened", request: { kind: "tool_approval", toolName: "browser", input: {} } });
      await turn.settle();
      expect(turn.requests().map((e) => e.payload)).toEqual([
        { kind: "tool_approval", toolName: "browser", input: {} },
      ]);
      expect(protocolWarnings(turn.events)).toEqual([]);
      await turn.finish();
    } finally {
      await turn.cleanup();
    }
  });
});

describe("a declined request", () => {
  it("said again with a strong id is the same request, declined once", async () => {
    const turn = await heldTurn(trustedIds);
    try {
      const fileRead = { type: "request.opened", requestRef: "r1", request: { kind: "file_read", path: "/etc/hosts" } };
      turn.say(fileRead);
      turn.say(fileRead);
      await turn.settle();
      expect(turn.answers.map((a) => [a.request.requestRef, a.response])).toEqual([["r1", decline]]);
      expect(protocolWarnings(turn.events)).toHaveLength(1);
      await turn.finish();
    } finally {
      await turn.cleanup();
    }
  });

  it("is not open: a resolution without a trusted id resolves the open request after it", async () => {
    const turn = await heldTurn({ approvals: { approvalsHaveNativeRequestIds: false } });
    try {
      turn.say({ type: "request.opened", request: { kind: "file_read", path: "/etc/hosts" } });
      turn.say(command());
      turn.say(resolved());
      await turn.settle();
      const [opened] = turn.requests();
      expect(opened!.payload.kind).toBe("command");
      expect(resolutions(turn.events).map((e) => e.requestId)).toEqual([opened!.requestId]);
      await turn.finish();
    } finally {
      await turn.cleanup();
    }
  });
});

describe("a request whose record says subagents never ask", () => {
  const rootOf = (events: LogRecord<DomainEvent>[]) => ofType(events, "attempt.started")[0]!.rootNodeId;
  const nodeOf = (events: LogRecord<DomainEvent>[], opened: DomainEventOf<"request.opened">) =>
    ofType(events, "node.started").find((e) => e.nodeId === opened.nodeId)!;

  it("naming no item, or an item outside any subagent, hangs at the root without a warning", async () => {
    const turn = await heldTurn({ approvals: { approvalsCanOriginateFromSubagents: false } });
    try {
      turn.say({ type: "item.started", itemRef: "cmd-1", kind: "command_execution", detail: { command: "ls" } });
      turn.say(command());
      turn.say({ ...command(), itemRef: "cmd-1" });
      await turn.settle();
      const opened = turn.requests();
      expect(opened).toHaveLength(2);
      for (const request of opened) expect(nodeOf(turn.events, request).parentNodeId).toBe(rootOf(turn.events));
      expect(protocolWarnings(turn.events)).toEqual([]);
      expect(policies(turn.events, "subagent_request_at_root")).toEqual([]);
      await turn.finish();
    } finally {
      await turn.cleanup();
    }
  });

  it("naming a subagent's item is a protocol warning naming its kind, hung at the root", async () => {
    const turn = await heldTurn({ approvals: { approvalsCanOriginateFromSubagents: false } });
    try {
      turn.say({ type: "subagent.started", itemRef: "sub-1", agent: "helper", prompt: "look" });
      turn.say({ type: "request.opened", itemRef: "sub-1", request: { kind: "file_change", path: "a" } });
      turn.say({ type: "request.opened", itemRef: "sub-1", request: { kind: "command", command: "ls" } });
      await turn.settle();
      const opened = turn.requests();
      expect(opened).toHaveLength(2);
      for (const request of opened) expect(nodeOf(turn.events, request).parentNodeId).toBe(rootOf(turn.events));
      const warnings = protocolWarnings(turn.events);
      expect(warnings).toHaveLength(2);
      expect(warnings[0]).toContain("a file_change request came from inside a subagent");
      expect(warnings[0]).toContain("approvals.approvalsCanOriginateFromSubagents is false");
      expect(warnings[1]).toContain("a command request came from inside a subagent");
      const applied = policies(turn.events, "subagent_request_at_root");
      expect(applied.map((p) => [p.runId, p.capability, p.outcome])).toEqual([
        [turn.runId, "approvals.approvalsCanOriginateFromSubagents", "fallback"],
      ]);
      expect(applied[0]!.detail).toContain("a file_change request came from inside a subagent");
      await turn.finish();
    } finally {
      await turn.cleanup();
    }
  });
});
