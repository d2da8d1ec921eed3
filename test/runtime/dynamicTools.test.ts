import { mkdtemp, rm } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { describe, expect, it } from "vitest";
import {
  createRuntime,
  createScriptedAdapter,
  defineCapabilities,
  type DomainEvent,
  type LogRecord,
  type ProviderAdapter,
  type RuntimeOptions,
  type ScriptStep,
} from "../../src/index.js";
import { deferred, nextEvent, ofType, openTestRuntime, override, recordCalls, rejection } from "../support/runtime.js";
import { declaring } from "./hostileProvider.js";

/**
 * `tools.supportsDynamicToolCallbacks`: the embedder registers tools (`RuntimeOptions.tools`); a session whose record
 * says the provider calls tools back is offered them, and a call comes back as a `dynamic_tool` request the runtime
 * answers itself with the tool's result. Where the record says it calls none back, the tools are not offered
 * (`dynamic_tools_unsupported`), and a call it makes anyway is a protocol warning, declined.
 */

type Tools = NonNullable<RuntimeOptions["tools"]>;

const lookupSchema = { type: "object", properties: { id: { type: "number" } }, required: ["id"] };
const policiesOf = (events: LogRecord<DomainEvent>[], name: string) =>
  ofType(events, "policy.applied").filter((p) => p.policy === name);
const protocolWarnings = (events: LogRecord<DomainEvent>[]) =>
  ofType(events, "warning").filter((w) => w.message.startsWith("protocol_error:"));
const callsBack = { tools: { supportsDynamicToolCallbacks: true } };
const replies = (items: Array<{ kind: string; text?: string }>) =>
  items.filter((i) => i.kind === "assistant_message").map((i) => i.text);

/** A lookup tool that records what it was called with. */
function lookupTool(): { tools: Tools; calls: Array<{ input: unknown; context: unknown }> } {
  const calls: Array<{ input: unknown; context: unknown }> = [];
  const tools: Tools = [
    {
      name: "lookup",
      description: "Looks a record up by id",
      inputSchema: lookupSchema,
      handler: async (input, context) => {
        calls.push({ input, context });
        return { found: (input as { id: number }).id, name: "seven" };
      },
    },
  ];
  return { tools, calls };
}

/** The provider believes it was offered `extra` tools too (what a misbehaving or stale provider would call). */
function offeredToo(adapter: ProviderAdapter, ...extra: string[]): ProviderAdapter {
  const definitions = extra.map((name) => ({ name, description: name, inputSchema: { type: "object" } }));
  return override(adapter, {
    startSession: (input) => adapter.startSession({ ...input, tools: [...(input.tools ?? []), ...definitions] }),
  });
}

describe("the embedder's tools", () => {
  const steps: ScriptStep[] = [{ type: "tool_call", tool: "lookup", input: { id: 7 } }];

  for (const supportsDynamicToolCallbacks of [true, false]) {
    it(`are offered and answered by the runtime, or not offered (${supportsDynamicToolCallbacks})`, async () => {
      const { tools, calls } = lookupTool();
      const provider = recordCalls(
        createScriptedAdapter({ capabilities: { tools: { supportsDynamicToolCallbacks } }, script: () => steps }),
      );
      const { rt, events, cleanup } = await openTestRuntime({ p: provider.adapter }, { tools });
      try {
        const { threadId } = await rt.createThread({ providerTarget: "p" });
        expect(rt.affordances(threadId).tools.callbacks).toBe(supportsDynamicToolCallbacks ? "offered" : "unsupported");
        const run = await rt.waitForRun((await rt.sendMessage({ threadId, text: "find seven" })).runId);
        expect(run.status).toBe("completed");
        const started = provider.calls.find((c) => c.method === "startSession")!.input;
        const opened = ofType(events, "request.opened");
        const unsupported = policiesOf(events, "dynamic_tools_unsupported");
        if (supportsDynamicToolCallbacks) {
          // Offered without its handler; called back; answered with the handler's result, as JSON.
          expect(started.tools).toEqual([
            { name: "lookup", description: "Looks a record up by id", inputSchema: lookupSchema },
          ]);
          expect(opened.map((o) => o.payload)).toEqual([
            { kind: "dynamic_tool", toolName: "lookup", input: { id: 7 } },
          ]);
          const result = { kind: "tool_result", output: '{"found":7,"name":"seven"}', success: true };
          expect(ofType(events, "request.resolved").map((r) => r.response)).toEqual([result]);
          expect(calls).toEqual([
            { input: { id: 7 }, context: { threadId, runId: run.runId, requestId: opened[0]!.requestId } },
          ]);
          const answers = provider.calls.filter((c) => c.method === "respondToRequest").map((c) => c.input.response);
          expect(answers).toEqual([result]);
          const tool = run.items.find((i) => i.kind === "tool")!;
          expect([tool.detail?.toolName, tool.output]).toEqual(["lookup", '{"found":7,"name":"seven"}']);
          expect(replies(run.items)).toEqual(['lookup returned: {"found":7,"name":"seven"}']);
          expect(unsupported).toEqual([]);
        } else {
          // Not offered: the model has no such tool; the session says why, once.
          expect(started.tools).toBeUndefined();
          expect(opened).toEqual([]);
          expect(calls).toEqual([]);
          expect(replies(run.items)).toEqual(["I have no tool named lookup."]);
          expect(unsupported.map((p) => [p.capability, p.outcome, p.threadId])).toEqual([
            ["tools.supportsDynamicToolCallbacks", "refused", null],
          ]);
          expect(unsupported[0]!.detail).toContain("lookup");
        }
        expect(protocolWarnings(events)).toEqual([]);
      } finally {
        await cleanup();
      }
    });
  }

  it("registered nowhere, take nothing away: a session without callbacks records no degradation", async () => {
    const adapter = createScriptedAdapter({ capabilities: { tools: { supportsDynamicToolCallbacks: false } } });
    const { rt, events, cleanup } = await openTestRuntime({ p: adapter });
    try {
      const { threadId } = await rt.createThread({ providerTarget: "p" });
      expect(rt.affordances(threadId).tools.callbacks).toBe("none_registered");
      await rt.waitForRun((await rt.sendMessage({ threadId, text: "hi" })).runId);
      expect(policiesOf(events, "dynamic_tools_unsupported")).toEqual([]);
    } finally {
      await cleanup();
    }
  });

  it("answer a failure when the handler throws or the tool is unknown; the turn and the runtime go on", async () => {
    const failures: unknown[] = [];
    const tools: Tools = [
      {
        name: "explode",
        description: "Always fails",
        inputSchema: { type: "object" },
        handler: () => {
          throw new Error("boom");
        },
      },
    ];
    const script = (): ScriptStep[] => [
      { type: "tool_call", tool: "explode" },
      { type: "tool_call", tool: "missing", input: { q: 1 } },
      { type: "text", text: "carried on" },
    ];
    // The provider calls a tool nobody registered (it believes it was offered one).
    const adapter = offeredToo(createScriptedAdapter({ capabilities: callsBack, script }), "missing");
    const { rt, events, cleanup } = await openTestRuntime(
      { p: adapter },
      { tools, onFailure: (failure) => failures.push(failure) },
    );
    try {
      const { threadId } = await rt.createThread({ providerTarget: "p" });
      const run = await rt.waitForRun((await rt.sendMessage({ threadId, text: "go" })).runId);
      expect(run.status).toBe("completed");
      expect(ofType(events, "request.resolved").map((r) => r.response)).toEqual([
        { kind: "tool_result", output: "explode failed: boom", success: false },
        { kind: "tool_result", output: "no tool named missing is registered", success: false },
      ]);
      expect(run.items.filter((i) => i.kind === "tool").map((i) => i.detail?.status)).toEqual(["failed", "failed"]);
      expect(replies(run.items)).toEqual([
        "explode failed: explode failed: boom",
        "missing failed: no tool named missing is registered",
        "carried on",
      ]);
      expect(failures).toEqual([]);
      // The runtime still works.
      const next = await rt.waitForRun((await rt.sendMessage({ threadId, text: "again" })).runId);
      expect(next.status).toBe("completed");
    } finally {
      await cleanup();
    }
  });

  it("are never the user's to answer: shown as answered by the runtime, a response refused", async () => {
    const handlerHeld = deferred();
    const handlerCalled = deferred();
    const tools: Tools = [
      {
        name: "slow",
        description: "Waits for the test",
        inputSchema: { type: "object" },
        handler: async () => {
          handlerCalled.resolve();
          await handlerHeld.promise;
          return "done slowly";
        },
      },
    ];
    const adapter = createScriptedAdapter({
      capabilities: callsBack,
      script: () => [{ type: "tool_call", tool: "slow" }],
    });
    const { rt, events, cleanup } = await openTestRuntime({ p: adapter }, { tools });
    try {
      const { threadId } = await rt.createThread({ providerTarget: "p" });
      const { runId } = await rt.sendMessage({ threadId, text: "go" });
      const opened = await nextEvent(rt, "request.opened", (e) => e.runId === runId);
      await handlerCalled.promise;
      const { requestId } = opened.event;
      expect(rt.affordances(threadId).requests).toEqual([
        { requestId, kind: "dynamic_tool", state: "answered_by_runtime" },
      ]);
      const snapshot = await rt.readThread(threadId);
      expect(snapshot.pendingRequests.map((r) => [r.requestId, r.respondable])).toEqual([[requestId, false]]);
      const refused = await rejection(
        rt.respond({ requestId, response: { kind: "tool_result", output: "forged", success: true } }),
      );
      expect(refused).toMatchObject({ code: "conflict" });
      handlerHeld.resolve();
      const run = await rt.waitForRun(runId);
      expect(replies(run.items)).toEqual(["slow returned: done slowly"]);
      expect(ofType(events, "request.resolved").map((r) => r.response)).toEqual([
        { kind: "tool_result", output: "done slowly", success: true },
      ]);
    } finally {
      await cleanup();
    }
  });

  it("called by a provider whose record says it calls none back: a protocol warning, declined, never run", async () => {
    const { tools, calls } = lookupTool();
    // The provider calls back whatever its record says (it was told of the tool all the same).
    const record = defineCapabilities({ tools: { supportsDynamicToolCallbacks: false } });
    const steps: ScriptStep[] = [{ type: "tool_call", tool: "lookup", input: { id: 7 } }];
    const provider = recordCalls(
      declaring(offeredToo(createScriptedAdapter({ capabilities: callsBack, script: () => steps }), "lookup"), record),
    );
    const { rt, events, cleanup } = await openTestRuntime({ p: provider.adapter }, { tools });
    try {
      const { threadId } = await rt.createThread({ providerTarget: "p" });
      const run = await rt.waitForRun((await rt.sendMessage({ threadId, text: "find seven" })).runId);
      expect(run.status).toBe("completed");
      expect(ofType(events, "request.opened")).toEqual([]);
      expect(calls).toEqual([]);
      expect(protocolWarnings(events).map((w) => w.message)).toEqual([
        "protocol_error: p asked for a dynamic tool call its capability record denies " +
          "(tools.supportsDynamicToolCallbacks is false)",
      ]);
      expect(policiesOf(events, "undeclared_request_declined").map((p) => p.capability)).toEqual([
        "tools.supportsDynamicToolCallbacks",
      ]);
      const answers = provider.calls.filter((c) => c.method === "respondToRequest").map((c) => c.input.response);
      expect(answers).toEqual([{ kind: "decision", decision: "decline" }]);
      expect(replies(run.items)).toEqual(["lookup failed: lookup was not run"]);
    } finally {
      await cleanup();
    }
  });
});

describe("the tools option", () => {
  const handler = async () => "ok";
  const cases: Array<[string, Tools, string]> = [
    [
      "a name a model API cannot take",
      [{ name: "look up", description: "d", inputSchema: {}, handler }],
      "tools.0.name",
    ],
    ["no description", [{ name: "a", description: "", inputSchema: {}, handler }], "tools.0.description"],
    [
      "a schema that is not an object",
      [{ name: "a", description: "d", inputSchema: [] as never, handler }],
      "tools.0.inputSchema",
    ],
    ["no handler", [{ name: "a", description: "d", inputSchema: {} } as never], "tools.0.handler"],
    [
      "two tools of one name",
      [
        { name: "a", description: "d", inputSchema: {}, handler },
        { name: "a", description: "e", inputSchema: {}, handler },
      ],
      "tools",
    ],
  ];
  for (const [what, tools, field] of cases) {
    it(`refuses ${what} (invalid_input, ${field})`, async () => {
      const dataDir = await mkdtemp(join(tmpdir(), "tiller-tools-"));
      try {
        const error = await rejection(createRuntime({ dataDir, providers: { p: createScriptedAdapter() }, tools }));
        expect(error).toMatchObject({ code: "invalid_input", details: { field } });
      } finally {
        await rm(dataDir, { recursive: true, force: true });
      }
    });
  }
});
