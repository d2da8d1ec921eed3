import { describe, expect, it } from "vitest";
import { maskCredentials as tableMask } from "../../src/domain/credentials.js";
import { redact } from "../../src/domain/redact.js";
import { AttemptReasonSchema } from "../../src/domain/entities.js";
import { DomainEventSchema } from "../../src/domain/events.js";
import { InspectorHub } from "../../inspector/server/hub.js";
import type { LogEntry, PageMessage } from "../../inspector/server/protocol.js";
import {
  answersByQuestionId,
  maskCredentials,
  questionKey,
  redactEvent,
  redactValue,
  RUNTIME_REASONS,
} from "../../inspector/server/redact.js";

const SAMPLES = [
  "Authorization: Bearer abcdefghijklmnop.qrstu",
  "curl -u user:hunter2@example.com https://user:pa55word@host/x",
  "OPENAI key sk-proj0123456789abcdefgh and pk-0123456789abcd",
  'config {"api_key": "abcd1234efgh", "token"="zzzzzzzz"} password: s3cr3t!',
  "nothing secret here, just text",
];

describe("inspector redaction", () => {
  it("masks credentials with the runtime's own table (one table for the log, the frame rings and the page)", () => {
    expect(maskCredentials).toBe(tableMask);
    for (const sample of SAMPLES) expect(maskCredentials(sample)).toBe(redact(sample));
    expect(maskCredentials(SAMPLES.join("\n"))).not.toMatch(
      /abcdefghijklmnop|hunter2|pa55word|0123456789abcdefgh|abcd1234efgh|zzzzzzzz|s3cr3t/,
    );
  });

  /** Pages fed a live log one record at a time: what each was sent. */
  function feed(records: LogEntry["event"][], showText: boolean): PageMessage[] {
    const sent: PageMessage[] = [];
    const hub = new InspectorHub({ showText });
    const producer = { send: () => undefined };
    hub.addPage({ send: (m) => void sent.push(m) });
    hub.fromFeed(producer, {
      kind: "hello",
      producerId: "p",
      dataDir: "/d",
      catalog: { machines: {}, degradations: {} },
    });
    records.forEach((event, i) =>
      hub.fromFeed(producer, { kind: "log", records: [{ seq: i + 1, at: "2026-01-01T00:00:00.000Z", event }] }),
    );
    hub.addPage({ send: (m) => void sent.push(m) });
    hub.close();
    return sent;
  }
  const delta = (text: string) => ({
    type: "node.delta",
    threadId: "thr_1",
    runId: "run_1",
    nodeId: "nod_1",
    stream: "text",
    delta: text,
  });

  it("masks a credential split across deltas: the page gets the assembled text's mask, never a piece", () => {
    const key = "sk-proj-SplitAcrossDeltas0123456789";
    const sent = feed([delta("my key is sk-pr"), delta("oj-SplitAcr"), delta("ossDeltas0123456789 and more\n")], true);
    const text = JSON.stringify(sent);
    for (const piece of ["sk-pr", "oj-SplitAcr", "ossDeltas0123456789", "SplitAcrossDeltas"])
      expect(text).not.toContain(piece);
    const deltas = (messages: PageMessage[]) =>
      messages
        .flatMap((m) => (m.kind === "log" ? m.records : []))
        .map((r) => r.event.delta)
        .join("");
    // Live, and on a page opened afterwards: the deltas put together are the masked whole.
    expect(deltas(sent.slice(0, -3))).toBe(`my key is sk-[redacted] and more\n`);
    expect(deltas(sent.slice(-3))).toBe(`my key is sk-[redacted] and more\n`);
    expect(redact(`my key is ${key} and more\n`)).toBe(`my key is sk-[redacted] and more\n`);
  });

  it("masks thread titles in the actor tree, text shown or hidden", () => {
    for (const showText of [true, false]) {
      const sent = feed(
        [
          {
            type: "thread.created",
            threadId: "thr_1",
            title: "deploy with GITHUB_TOKEN=ghp_TitleTokenFake0123456789abcdefghij",
            cwd: "/",
            providerTarget: "s",
            model: null,
            lineage: null,
          },
        ],
        showText,
      );
      const tree = sent.flatMap((m) => (m.kind === "view" ? m.tree : []));
      expect(tree.find((n) => n.kind === "thread")?.label).toBe("deploy with GITHUB_TOKEN=[redacted]");
      expect(JSON.stringify(sent)).not.toContain("TitleTokenFake");
    }
  });

  it("hides text fields at any depth unless shown, and masks credentials either way", () => {
    const event = {
      type: "request.opened",
      payload: { kind: "user_input", questions: [{ id: "q1", question: "Which token? sk-abcdefghijklmnop1234" }] },
      text: "prompt",
      count: 3,
      flag: true,
      none: null,
    };
    expect(redactValue(event, false)).toEqual({
      type: "request.opened",
      payload: { kind: "user_input", questions: [{ id: "q1", question: "‹hidden: 36 chars›" }] },
      text: "‹hidden: 6 chars›",
      count: 3,
      flag: true,
      none: null,
    });
    expect(redactValue(event, true)).toMatchObject({
      payload: { questions: [{ question: "Which token? sk-[redacted]" }] },
      text: "prompt",
    });
  });

  it("knows exactly the reasons the domain names from a fixed vocabulary (the inspector keeps its own copy)", () => {
    const enumOf = (type: string) => {
      const variant = DomainEventSchema.options.find((o) => o.shape.type.value === type)!;
      return (variant.shape as unknown as { reason: { options: string[] } }).reason.options;
    };
    const domain = [...AttemptReasonSchema.options, ...enumOf("handoff.created"), ...enumOf("provider_thread.closed")];
    expect([...RUNTIME_REASONS].sort()).toEqual([...new Set(domain)].sort());
  });

  it(
    "keeps the reasons the runtime names itself " +
      "(how the log shows a steer restarted an attempt) while hiding text",
    () => {
      const restarted = { type: "attempt.started", attemptId: "att_2", reason: "steering_restart" };
      const handoff = { type: "handoff.created", reason: "rollback_divergent", text: "the history" };
      expect(redactEvent(restarted, false)).toEqual(restarted);
      expect(redactEvent(handoff, false)).toEqual({
        type: "handoff.created",
        reason: "rollback_divergent",
        text: "‹hidden: 11 chars›",
      });
      expect(redactEvent({ type: "request.closed", reason: "steering_restart, said the model" }, false).reason).toBe(
        "‹hidden: 32 chars›",
      );
    },
  );

  it(
    "hides what a model wrote into a Claude-shaped question (its id is its text) " +
      "and a command's reason, and maps answers back to the real ids",
    () => {
      const question = "Should I delete prod?";
      const opened = {
        type: "request.opened",
        threadId: "thr_1",
        runId: "run_1",
        requestId: "req_1",
        payload: {
          kind: "user_input",
          questions: [
            {
              id: question,
              question,
              header: "Danger",
              options: [{ label: "Yes, drop it", description: "Deletes every table in production" }, { label: "No" }],
              multiSelect: false,
            },
            { id: "Which region?", question: "Which region?" },
          ],
        },
      };
      const command = {
        type: "request.opened",
        requestId: "req_2",
        payload: { kind: "command", command: "rm -rf build", reason: "Clean the build output before the release" },
      };
      const closed = {
        type: "request.closed",
        requestId: "req_2",
        status: "expired",
        reason: "the model gave up on the release",
      };
      const words = [
        question,
        "Danger",
        "Yes, drop it",
        "Deletes every table",
        "Which region?",
        "Clean the build output",
        "gave up on the release",
      ];

      const hidden = JSON.stringify([opened, command, closed].map((e) => redactEvent(e, false)));
      for (const w of words) expect(hidden, w).not.toContain(w);
      expect(redactEvent(opened, false).payload.questions.map((q) => q.id)).toEqual([questionKey(0), questionKey(1)]);
      expect(redactEvent(opened, false).payload.questions[0]).toMatchObject({
        question: `‹hidden: ${question.length} chars›`,
        header: "‹hidden: 6 chars›",
        options: [{ label: "‹hidden: 12 chars›" }, { label: "‹hidden: 2 chars›" }],
        multiSelect: false,
      });
      expect(redactEvent(command, false).payload).toEqual({
        kind: "command",
        command: "rm -rf build",
        reason: "‹hidden: 41 chars›",
      });
      // The original is untouched; with showText everything is there (credentials masked).
      expect(opened.payload.questions[0]!.id).toBe(question);
      const shown = JSON.stringify([opened, command, closed].map((e) => redactEvent(e, true)));
      for (const w of words) expect(shown, w).toContain(w);

      // The page answers by placeholder; the runtime gets the real ids. A key of no question is refused.
      expect(answersByQuestionId(opened, { [questionKey(0)]: "No", [questionKey(1)]: "eu-west-1" })).toEqual({
        [question]: "No",
        "Which region?": "eu-west-1",
      });
      expect(() => answersByQuestionId(opened, { [question]: "No" })).toThrow(/no question/);
      expect(() => answersByQuestionId(opened, { [questionKey(2)]: "x" })).toThrow(/no question/);
    },
  );
});
