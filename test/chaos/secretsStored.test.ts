import { mkdtemp, readdir, readFile, rm } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import fc from "fast-check";
import { describe, expect, it } from "vitest";
import { z } from "zod";
import { maskCredentials } from "../../src/domain/credentials.js";
import { DomainEventSchema, type DomainEvent, type DomainEventType } from "../../src/domain/events.js";
import { MaskedStreams } from "../../src/domain/maskedStreams.js";
import { masked, PROVIDER_TEXT } from "../../src/domain/providerText.js";
import { createRuntime, createScriptedAdapter, sequentialIds, type ScriptStep } from "../../src/index.js";
import { withInjectedFrames } from "../support/runtime.js";
import { CREDENTIAL_CORPUS, NOT_SECRETS, type CredentialShape } from "./secretCorpus.js";
import { scaled, seed } from "./seed.js";
import { tallyChaos } from "./tally.js";

/**
 * The secret corpus through what the log stores (issue 27 item 3): every shape, sent by the scripted provider through
 * the real runtime in every kind of provider text (streamed text and reasoning cut at random places, tool and command
 * output, tool inputs, commands, diffs, plans, todos, questions, approvals, the embedder's tool result, MCP names a
 * warning quotes, a failure), leaves no shape, whole or any 8 characters of it, in the data directory's files
 * (events.jsonl, projections.snapshot, its text file); streamed text reads back as its masked whole. Every event type
 * with a text field is accounted for: sent through the runtime, masked by the table (`masked`, what the dispatcher
 * calls) when no provider can reach it, or named as the user's or an opaque handle; a new one fails the test.
 *
 * Replay a failure with TILLER_CHAOS_SEED=<seed>; TILLER_CHAOS_RUNS scales the cuts per shape.
 */

/** Random cuts of each shape per run through the runtime (TILLER_CHAOS_RUNS scales them). */
const CUTS_PER_SHAPE = scaled(2);

/** Event types the corpus reaches through the scripted provider and the real runtime. */
const THROUGH_RUNTIME: readonly DomainEventType[] = [
  "run.terminal",
  "node.started",
  "node.delta",
  "node.completed",
  "plan.updated",
  "plan.proposed",
  "todo.updated",
  "request.opened",
  "request.resolved",
  "policy.applied",
  "warning",
];

/**
 * Provider text no scripted turn can put there (a host's loss report, a provider-written summary, an interrupt's
 * refusal) or the runtime's own texts that may quote an error: the corpus goes through the table directly.
 */
const THROUGH_TABLE: readonly DomainEventType[] = [
  "session.state",
  "handoff.created",
  "interrupt.failed",
  "request.closed",
  "fork.resolved",
  "checkpoint.failed",
  "checkpoint.skipped",
  "checkpoint.restore_settled",
];

/** Text fields that hold no provider text: what the user typed, ids and handles, the runtime's own names. */
const NOT_PROVIDER_TEXT: Partial<Record<DomainEventType, string>> = {
  "thread.created": "title, cwd and model: the user's",
  "run.created": "the user's prompt",
  "attempt.started": "the user's prompt or steer",
  "steer.applied": "the user's steer",
  "attempt.turn_bound": "the provider's turn handle",
  "event.fenced": "a provider event's type name",
  "session.started": "the adapter's name",
  "provider_thread.bound": "the provider's thread handle and resume cursor",
  "thread.model_changed": "the user's model",
  "checkpoint.captured": "a commit id and the paths git reports",
  "checkpoint.restore_started": "paths git reports",
  "rollback.applied": "paths git reports",
  "command.receipt": "a command's name and receipt (ids)",
};

/** Whether a schema has free text somewhere: a string with no checks (ids have a minimum length) or unknown JSON. */
function hasText(schema: z.ZodType): boolean {
  const def = (schema as unknown as { _zod: { def: Record<string, unknown> & { type: string } } })._zod.def;
  switch (def.type) {
    case "string":
      return !(def.checks as unknown[] | undefined)?.length;
    case "unknown":
      return true;
    case "object":
      return Object.values(def.shape as Record<string, z.ZodType>).some(hasText);
    case "array":
      return hasText(def.element as z.ZodType);
    case "record":
      return hasText(def.valueType as z.ZodType);
    case "union":
      return (def.options as z.ZodType[]).some(hasText);
    case "nullable":
    case "optional":
    case "default":
    case "pipe":
      return hasText((def.innerType ?? def.in) as z.ZodType);
    case "lazy":
      return hasText((def.getter as () => z.ZodType)());
    default:
      return false;
  }
}

/** The secret whole, or any 8 characters of it in a row, found in `text`. */
function leaks(secret: string, text: string): string[] {
  const pieces = new Set<string>([secret]);
  for (let i = 0; i + 8 <= secret.length; i++) pieces.add(secret.slice(i, i + 8));
  return [...pieces].filter((piece) => text.includes(piece));
}

/** One turn's steps: the shape's text everywhere a provider puts text, streams cut by `chunk` after `pad`. */
function turnSteps(text: string, chunk: number, pad: string): ScriptStep[] {
  return [
    { type: "text", text: `${pad}${text} then more`, chunkSize: chunk },
    { type: "reasoning", text: `${pad}${text}` },
    { type: "tool", name: "read", input: { path: text }, output: `${pad}${text}` },
    { type: "command", command: text, output: `${pad}${text}`, approval: true },
    { type: "file_change", path: "notes.txt", diff: text },
    { type: "question", questions: [{ id: "q1", question: text, options: [{ label: "a", description: text }] }] },
    { type: "todo", items: [{ text, status: "pending" }] },
    { type: "plan", steps: [{ step: text, status: "pending" }], explanation: text },
    { type: "proposed_plan", text },
    { type: "tool_call", tool: "echo", input: { value: text } },
    // The text's end streamed last, with no whitespace after it: given out at the item's completion.
    { type: "text", text: `${pad}${text}`, chunkSize: chunk },
    { type: "fail", message: `Incorrect credentials: ${text}`, failureClass: text },
  ];
}

/** A run's cases: each shape with random chunk sizes and paddings; the non-secrets once, unchanged. */
const casesOf = (shape: CredentialShape) =>
  fc.sample(fc.record({ chunk: fc.integer({ min: 1, max: 13 }), pad: fc.nat({ max: 11 }) }), {
    seed: seed + shape.name.length,
    numRuns: CUTS_PER_SHAPE,
  });

describe("secret corpus, as the log stores it", () => {
  it("accounts for every event type with a text field", () => {
    const types = DomainEventSchema.options.map((o) => [o.shape.type.value, hasText(o)] as const);
    const listed = new Set([...THROUGH_RUNTIME, ...THROUGH_TABLE, ...Object.keys(NOT_PROVIDER_TEXT)]);
    const unlisted = types.filter(([type, text]) => text && !listed.has(type)).map(([type]) => type);
    expect(unlisted).toEqual([]);
    // What the table masks is what the test sends the corpus through, and nothing named the user's is masked.
    const maskedByTable = (Object.keys(PROVIDER_TEXT) as DomainEventType[]).filter((t) => PROVIDER_TEXT[t] !== null);
    expect(new Set(maskedByTable)).toEqual(new Set([...THROUGH_RUNTIME, ...THROUGH_TABLE]));
  });

  it(`the runtime stores no shape in its data directory, however streams are cut (seed ${seed})`, async () => {
    const dataDir = await mkdtemp(join(tmpdir(), "tiller-secrets-"));
    const scripts = new Map<string, ScriptStep[]>();
    const toolInputs: unknown[] = [];
    const cases: Array<{ shape: CredentialShape; streamed: string[] }> = [];
    for (const shape of CREDENTIAL_CORPUS)
      for (const { chunk, pad } of casesOf(shape)) {
        // (A word before the shape is its own: `xxCookie:` is no header.)
        const padding = pad === 0 ? "" : `${"x".repeat(pad - 1)} `;
        scripts.set(`case ${scripts.size}`, turnSteps(shape.text, chunk, padding));
        cases.push({ shape, streamed: [`${padding}${shape.text} then more`, `${padding}${shape.text}`] });
      }
    const plain = NOT_SECRETS.join("\n");
    scripts.set("plain", [{ type: "text", text: plain, chunkSize: 5 }]);
    // What the scripted host cannot say: a provider warning, and an MCP tool call from a provider whose record says it
    // has none (a protocol warning and a policy quote its server's name). Injected while its command waits.
    const { adapter, inject } = withInjectedFrames(
      createScriptedAdapter({
        capabilities: { tools: { supportsDynamicToolCallbacks: true, supportsMcpTools: false } },
        script: ({ text }) => scripts.get(text)!,
      }),
    );
    const said = (sessionId: string, threadRef: string, text: string) => {
      inject({ sessionId, event: { type: "warning", threadRef, message: `the provider says ${text}` } });
      const detail = { toolName: "lookup", mcp: { server: text, tool: "t" } };
      inject({ sessionId, event: { type: "item.started", threadRef, kind: "tool_call", itemRef: "mcp-1", detail } });
    };
    const rt = await createRuntime({
      dataDir,
      ids: sequentialIds(),
      providers: { s: adapter },
      tools: [
        {
          name: "echo",
          description: "echo",
          inputSchema: { type: "object" },
          handler: (input) => (toolInputs.push(input), (input as { value: string }).value),
        },
      ],
    });
    const reads: Array<{ runId: string; items: Array<{ kind: string; text?: string }> }> = [];
    try {
      let where = { sessionId: "", threadRef: "" };
      rt.subscribe({ afterSeq: 0 }, ({ event }) => {
        if (event.type === "provider_thread.bound") where = { ...where, threadRef: event.nativeThreadRef ?? "" };
        if (event.type === "session.started") where = { ...where, sessionId: event.sessionId };
        if (event.type !== "request.opened") return;
        const { requestId, payload } = event;
        if (payload.kind === "command") said(where.sessionId, where.threadRef, payload.command);
        if (payload.kind === "user_input")
          void rt.respond({ requestId, response: { kind: "answers", answers: { q1: "a" } } });
        else if (payload.kind !== "dynamic_tool")
          void rt.respond({ requestId, response: { kind: "decision", decision: "accept" } });
      });
      const { threadId } = await rt.createThread({ providerTarget: "s" });
      for (const prompt of scripts.keys()) {
        const { runId } = await rt.sendMessage({ threadId, text: prompt });
        await rt.waitForRun(runId);
        reads.push({ runId, items: [] });
      }
      const thread = await rt.readThread(threadId);
      for (const read of reads) read.items = [...(thread.runs.find((r) => r.runId === read.runId)?.items ?? [])];
    } finally {
      await rt.close();
    }

    const names = (await readdir(dataDir)).filter((n) => n === "events.jsonl" || n.startsWith("projections."));
    const files = await Promise.all(names.map(async (n) => [n, await readFile(join(dataDir, n), "utf8")] as const));
    await rm(dataDir, { recursive: true, force: true });
    const violations: string[] = [];
    for (const shape of CREDENTIAL_CORPUS)
      for (const [name, text] of files) {
        // (A piece the non-secrets hold too, `1234567890` or ` secret `, is theirs.)
        const found = leaks(shape.secret, text).filter((piece) => !plain.includes(piece));
        if (found.length > 0) violations.push(`${name}: ${shape.name}: ${JSON.stringify(found)}`);
      }
    // Streamed text reads back as its masked whole; the embedder's tool got what the provider sent.
    cases.forEach(({ shape, streamed }, i) => {
      // (Between them, the scripted provider acknowledges the answers and the tool's result.)
      const messages = reads[i]!.items.filter((item) => item.kind === "assistant_message").map((item) => item.text);
      const said = [messages[0], messages.at(-1)];
      const expected = streamed.map(maskCredentials);
      if (JSON.stringify(said) !== JSON.stringify(expected))
        violations.push(`${shape.name}: read back ${JSON.stringify(said)}, not ${JSON.stringify(expected)}`);
    });
    expect(toolInputs).toEqual(cases.map(({ shape }) => ({ value: shape.text })));
    const plainSaid = reads.at(-1)!.items.find((item) => item.kind === "assistant_message")?.text;
    if (plainSaid !== plain) violations.push(`not a credential, changed: ${JSON.stringify(plainSaid)}`);
    // Every type the corpus is sent through was stored with a mask in it.
    const log = files
      .find(([n]) => n === "events.jsonl")![1]
      .trim()
      .split("\n");
    const events = log.map((line) => (JSON.parse(line) as { event: DomainEvent }).event);
    const reached = new Set(events.filter((e) => JSON.stringify(e).includes("[redacted]")).map((e) => e.type));
    expect(THROUGH_RUNTIME.filter((type) => !reached.has(type))).toEqual([]);
    expect(violations).toEqual([]);
    tallyChaos("secrets: stored", { properties: 1, runs: cases.length, violations: 0 });
  });

  it("the table masks the provider text of the types no scripted turn reaches", () => {
    const ids = { threadId: "thr_1", runId: "run_1" };
    const samples = (text: string): DomainEvent[] => [
      { type: "session.state", sessionId: "ses_1", providerTarget: "s", status: "error", message: text },
      {
        type: "handoff.created",
        ...ids,
        handoffId: "hof_1",
        providerThreadId: "pth_1",
        fromTarget: "a",
        toTarget: "b",
        reason: "provider_switch",
        strategy: "full_thread_summary",
        coveredRunIds: [],
        coveredRunOrdinals: [],
        omittedRunIds: [],
        summarizedBy: "provider",
        text,
        supersedesHandoffId: null,
      },
      { type: "interrupt.failed", ...ids, attemptId: "att_1", reason: text, attempts: 6 },
      { type: "request.closed", ...ids, requestId: "req_1", status: "cancelled", reason: text },
      { type: "fork.resolved", threadId: "thr_1", transferId: "trn_1", resolution: "portable", detail: text },
      {
        type: "checkpoint.failed",
        ...ids,
        checkpointId: "chk_1",
        scope: "root_run",
        phase: "final",
        nodeId: null,
        message: text,
      },
      { type: "checkpoint.skipped", ...ids, nodeId: "nod_1", reason: text },
      {
        type: "checkpoint.restore_settled",
        threadId: "thr_1",
        toRunId: "run_1",
        checkpointId: "chk_1",
        outcome: "unknown",
        files: [],
        message: text,
      },
    ];
    expect(new Set(samples("x").map((e) => e.type))).toEqual(new Set(THROUGH_TABLE));
    const violations: string[] = [];
    for (const shape of CREDENTIAL_CORPUS)
      for (const event of samples(shape.text)) {
        DomainEventSchema.parse(event);
        const found = leaks(shape.secret, JSON.stringify(masked(event)));
        if (found.length > 0) violations.push(`${event.type}: ${shape.name}: ${JSON.stringify(found)}`);
      }
    expect(violations).toEqual([]);
  });

  it(`a stream gives out a prefix of its masked whole, its end the rest, cut anywhere (seed ${seed})`, () => {
    const violations: string[] = [];
    const texts = [...CREDENTIAL_CORPUS.map((s) => [s.text, s.secret] as const), ...NOT_SECRETS.map((t) => [t, ""])];
    for (const [text, secret] of texts)
      fc.assert(
        fc.property(fc.array(fc.nat({ max: text.length + 12 }), { maxLength: 12 }), fc.boolean(), (points, each) => {
          const whole = `Here: ${text} and`;
          const at = each ? [...whole].map((_, i) => i) : [...new Set(points)].sort((a, b) => a - b);
          const deltas = [0, ...at].map((start, i) => whole.slice(start, at[i] ?? whole.length)).filter(Boolean);
          const streams = new MaskedStreams();
          const given = deltas.map((d) => streams.delta("k", "g", d)).join("");
          const end = streams.end("k")!;
          const ok = end.rest !== null && given + end.rest === maskCredentials(whole);
          const found = secret ? leaks(secret, given) : [];
          if (!ok || found.length > 0) violations.push(`${JSON.stringify(deltas)}: gave ${JSON.stringify(given)}`);
          return ok && found.length === 0;
        }),
        { seed, numRuns: scaled(20) },
      );
    expect(violations).toEqual([]);
  });
});
