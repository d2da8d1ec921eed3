import fc from "fast-check";
import { describe, expect, it } from "vitest";
import { InspectorHub, type PageClient } from "../../inspector/server/hub.js";
import type { LogEntry, PageMessage } from "../../inspector/server/protocol.js";
import { maskCredentials } from "../../src/domain/credentials.js";
import { redact } from "../../src/domain/redact.js";
import { scaled, seed } from "./seed.js";
import { FrameRing } from "../../src/adapters/kit/ring.js";
import { CREDENTIAL_CORPUS, NOT_SECRETS, type CredentialShape } from "./secretCorpus.js";
import { tallyChaos } from "./tally.js";

/**
 * The secret corpus through every consumer of the one credential table: `redact` (what the
 * log keeps of errors and warnings), a host's frame ring (whose tail a lost host's record
 * carries into the log) and the inspector's hub (what a page is sent, with text shown: the
 * worst case). No consumer lets a credential through, whole or in pieces, however a stream
 * cuts it; none touches the text that is not a credential.
 *
 * What the log stores of every event type with a text field, the corpus sent by a provider through
 * the real runtime, is checked beside this, in secretsStored.test.ts.
 *
 * Replay a failure with TILLER_CHAOS_SEED=<seed> from its report; TILLER_CHAOS_RUNS scales the
 * number of random cuts.
 */

/** Random cuts of each shape into deltas, per shape (TILLER_CHAOS_RUNS scales them). */
const CUTS_PER_SHAPE = scaled(25);

/** The secret whole, or any 8 characters of it in a row, found in `outputs`. */
function leaks(secret: string, outputs: readonly string[]): string[] {
  const pieces = new Set<string>([secret]);
  for (let i = 0; i + 8 <= secret.length; i++) pieces.add(secret.slice(i, i + 8));
  return [...pieces].filter((piece) => outputs.some((out) => out.includes(piece)));
}

// ---- the frame ring ----------------------------------------------------------------------

/**
 * What a lost host's record would carry: the ring's tail after the shape came as a JSON-RPC frame, as stdout noise and
 * as stderr lines.
 */
function ringDump(text: string): string[] {
  const ring = new FrameRing();
  ring.push(
    "in",
    JSON.stringify({
      jsonrpc: "2.0",
      method: "event",
      params: { sessionId: "ses_1", event: { type: "item.delta", text } },
    }),
  );
  ring.note("not_json", text);
  for (const line of text.split("\n")) ring.push("stderr", line);
  return ring.tail(200);
}

// ---- the inspector ---------------------------------------------------------------------------

const at = "2026-01-01T00:00:00.000Z";
const ids = { threadId: "thr_1", runId: "run_1" };

/**
 * The log of one run whose assistant message streamed `deltas`; the thread is titled, and a command asked for, with
 * `text`.
 */
function runLog(text: string, deltas: string[]): LogEntry[] {
  const events: LogEntry["event"][] = [
    {
      type: "thread.created",
      threadId: "thr_1",
      title: text,
      cwd: "/w",
      providerTarget: "s",
      model: null,
      lineage: null,
    },
    { type: "run.created", ...ids, ordinal: 1, providerTarget: "s", userMessageId: "msg_1", text: "go", mode: "start" },
    {
      type: "node.started",
      ...ids,
      attemptId: "att_1",
      nodeId: "nod_1",
      parentNodeId: null,
      kind: "assistant_message",
      nativeRef: null,
      providerTarget: "s",
      detail: null,
    },
    ...deltas.map((delta) => ({ type: "node.delta", ...ids, nodeId: "nod_1", stream: "text", delta })),
    {
      type: "request.opened",
      ...ids,
      requestId: "req_1",
      nodeId: "nod_2",
      payload: { kind: "command", command: text, cwd: "/w", reason: null },
      nativeRef: null,
      responseCapability: "decision",
    },
    {
      type: "node.completed",
      ...ids,
      nodeId: "nod_1",
      status: "complete",
      text: deltas.join(""),
      output: null,
      exitCode: null,
      settledBy: "provider",
    },
  ];
  return events.map((event, i) => ({ seq: i + 1, at, event }));
}

/** Everything pages were sent: one page watching live as the records come, one opened after them. */
function pageMessages(log: LogEntry[], showText: boolean): PageMessage[] {
  const sent: PageMessage[] = [];
  const page: PageClient = { send: (message) => void sent.push(message) };
  const hub = new InspectorHub({ showText });
  hub.addPage(page);
  hub.fromFeed(
    { send: () => undefined },
    { kind: "hello", producerId: "p1", dataDir: "/d", catalog: { machines: {}, degradations: {} } },
  );
  for (const record of log) hub.fromFeed({ send: () => undefined }, { kind: "log", records: [record] });
  hub.addPage(page);
  hub.close();
  return sent;
}

/** Every string in `value`, at any depth. */
function strings(value: unknown): string[] {
  if (typeof value === "string") return [value];
  if (Array.isArray(value)) return value.flatMap(strings);
  if (value && typeof value === "object") return Object.values(value).flatMap(strings);
  return [];
}

/** The deltas a page got, per page (its live feed, then the whole log it was sent on open). */
function pageDeltas(messages: PageMessage[]): string[] {
  return messages
    .flatMap((m) => (m.kind === "log" ? m.records : []))
    .filter((r) => r.event.type === "node.delta")
    .map((r) => String(r.event.delta));
}

/**
 * `text` in pieces at the cut points, and a last newline (the page gets what follows the last whitespace only when more
 * comes).
 */
function cut(text: string, points: number[]): string[] {
  const at = [...new Set(points.map((p) => p % (text.length + 1)))].sort((a, b) => a - b);
  const pieces = [0, ...at].map((start, i) => text.slice(start, at[i] ?? text.length));
  return [...pieces.filter((p) => p !== ""), "\n"];
}

const cutsOf = (shape: CredentialShape) =>
  fc.array(fc.nat({ max: shape.text.length }), { minLength: 1, maxLength: 12 });

describe("secret corpus", () => {
  it(`has at least 30 credential shapes, each secret distinct and found in its text`, () => {
    expect(CREDENTIAL_CORPUS.length).toBeGreaterThanOrEqual(30);
    expect(new Set(CREDENTIAL_CORPUS.map((s) => s.secret)).size).toBe(CREDENTIAL_CORPUS.length);
    for (const shape of CREDENTIAL_CORPUS) expect(shape.text, shape.name).toContain(shape.secret);
  });

  const violations = (): {
    list: string[];
    check: (consumer: string, shape: CredentialShape, outputs: string[]) => void;
  } => {
    const list: string[] = [];
    const check = (consumer: string, shape: CredentialShape, outputs: string[]) => {
      const found = leaks(shape.secret, outputs);
      if (found.length > 0)
        list.push(`${consumer}: ${shape.name}: ${JSON.stringify(found)} in ${JSON.stringify(outputs)}`);
    };
    return { list, check };
  };

  it("the log: redact masks every shape and leaves text that is not a credential alone", () => {
    const { list, check } = violations();
    for (const shape of CREDENTIAL_CORPUS) check("redact", shape, [redact(shape.text)]);
    for (const text of NOT_SECRETS)
      if (redact(text) !== text) list.push(`redact changed ${JSON.stringify(text)} to ${JSON.stringify(redact(text))}`);
    expect(list).toEqual([]);
    tallyChaos("secrets: log", { properties: 1, runs: CREDENTIAL_CORPUS.length, violations: 0 });
  });

  it(
    "the frame ring: its dump holds no shape, " +
      "whether it came in a JSON-RPC frame, as stdout noise or as stderr lines",
    () => {
      const { list, check } = violations();
      for (const shape of CREDENTIAL_CORPUS) {
        const dump = ringDump(shape.text);
        check("frame ring", shape, [...dump, dump.join("\n")]);
      }
      for (const text of NOT_SECRETS) {
        const dump = ringDump(text);
        const frame = JSON.parse(dump[0]!.slice("in ".length)) as { params: { event: { text: string } } };
        if (
          frame.params.event.text !== text ||
          dump.slice(2).join("\n") !== `stderr ${text.split("\n").join("\nstderr ")}`
        )
          list.push(`frame ring changed ${JSON.stringify(text)}: ${JSON.stringify(dump)}`);
      }
      expect(list).toEqual([]);
      tallyChaos("secrets: frame ring", { properties: 1, runs: CREDENTIAL_CORPUS.length, violations: 0 });
    },
  );

  it(
    `the inspector: no page gets a shape, however its stream is cut into deltas; ` +
      `titles and commands are masked (seed ${seed})`,
    () => {
      const { list, check } = violations();
      let cuts = 0;
      for (const shape of CREDENTIAL_CORPUS) {
        fc.assert(
          fc.property(cutsOf(shape), (points) => {
            cuts++;
            const deltas = cut(shape.text, points);
            const messages = pageMessages(runLog(shape.text, deltas), true);
            const before = list.length;
            check(`inspector (deltas ${JSON.stringify(deltas)})`, shape, [
              ...strings(messages),
              pageDeltas(messages).join(""),
            ]);
            // What the deltas carry, put together, is the masked whole (live, and on a page opened later): nothing
            // lost, nothing unmasked.
            const whole = maskCredentials(deltas.join(""));
            for (const page of [messages.slice(0, -3), messages.slice(-3)]) {
              const got = pageDeltas(page).join("");
              if (got !== whole)
                list.push(
                  `inspector: ${shape.name}: deltas ${JSON.stringify(deltas)} ` +
                    `reassemble to ${JSON.stringify(got)}, not ${JSON.stringify(whole)}`,
                );
            }
            return list.length === before;
          }),
          { seed, numRuns: CUTS_PER_SHAPE },
        );
        check("inspector (hidden text)", shape, strings(pageMessages(runLog(shape.text, [shape.text]), false)));
      }
      for (const text of NOT_SECRETS) {
        const deltas = cut(text, [7, 19, 30]);
        const messages = pageMessages(runLog(text, deltas), true);
        const completed = messages
          .flatMap((m) => (m.kind === "log" ? m.records : []))
          .find((r) => r.event.type === "node.completed");
        const titled = messages.flatMap((m) => (m.kind === "view" ? m.tree : [])).find((n) => n.kind === "thread");
        if (
          completed?.event.text !== `${text}\n` ||
          titled?.label !== text ||
          pageDeltas(messages.slice(0, -3)).join("") !== `${text}\n`
        ) {
          list.push(`inspector changed ${JSON.stringify(text)}`);
        }
      }
      expect(list).toEqual([]);
      console.info(
        `secrets: ${CREDENTIAL_CORPUS.length} credential shapes x 3 consumers, ` +
          `${NOT_SECRETS.length} non-secrets, ${cuts} random cuts into deltas`,
      );
      tallyChaos("secrets: inspector", { properties: 1, runs: CREDENTIAL_CORPUS.length, violations: 0 });
    },
  );
});
