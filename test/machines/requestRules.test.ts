import { describe, expect, it } from "vitest";
import { createActor } from "xstate";
import type { ResponseCapability } from "../../src/domain/entities.js";
import type { RequestKind, RequestResponse } from "../../src/domain/items.js";
import type { MachineEmitted, Outcome } from "../../src/machines/emitted.js";
import { requestMachine } from "../../src/machines/request.js";

/**
 * The request machine's rules that request.test.ts leaves open (issue 14: each decision pinned by a behaviour test):
 * which answer each kind of request takes (the RuntimeRequest entity: approvals take a decision, questions answers,
 * a dynamic tool call the tool's result), and what a refusal tells the caller: a typed refusal names why, so a client
 * can show it.
 */

const live: ResponseCapability = { kind: "live", sessionId: "ses_1", hostGeneration: 3 };
const decision: RequestResponse = { kind: "decision", decision: "accept" };
const answers: RequestResponse = { kind: "answers", answers: { q1: "yes" } };
const toolResult: RequestResponse = { kind: "tool_result", output: "42", success: true };

function open(kind: RequestKind = "command", responseCapability: ResponseCapability = live) {
  const emitted: MachineEmitted[] = [];
  const actor = createActor(requestMachine, {
    input: { threadId: "thr_1", runId: "run_1", requestId: "req_1", kind, responseCapability },
  });
  actor.on("*", (e) => emitted.push(e));
  actor.start();
  const respond = (response: RequestResponse, hostGeneration: number | null = 3) =>
    actor.send({ type: "RESPOND", response, hostGeneration });
  const outcomes = (): Outcome[] => emitted.flatMap((e) => (e.type === "outcome" ? [e.outcome] : []));
  const state = () => actor.getSnapshot().value;
  return { respond, outcomes, state };
}

/** The one answer each kind of request takes, and how a refusal of another shape names it. */
const takes: Array<[RequestKind, RequestResponse, string]> = [
  ["command", decision, "a decision"],
  ["file_read", decision, "a decision"],
  ["file_change", decision, "a decision"],
  ["apply_patch", decision, "a decision"],
  ["tool_approval", decision, "a decision"],
  ["plan_approval", decision, "a decision"],
  ["user_input", answers, "answers"],
  ["dynamic_tool", toolResult, "a tool result"],
];

describe("request machine: the answer a request takes", () => {
  it.each(takes)("a %s request takes %o; any other shape is a conflict naming what it takes", (kind, fits, named) => {
    for (const other of [decision, answers, toolResult].filter((r) => r.kind !== fits.kind)) {
      const r = open(kind);
      r.respond(other);
      expect(r.outcomes()).toEqual([
        { command: "respond", refused: "conflict", detail: `a ${kind} request takes ${named}` },
      ]);
      expect(r.state()).toBe("pending");
    }
    const r = open(kind);
    r.respond(fits);
    expect(r.outcomes()).toEqual([{ command: "respond", requestId: "req_1", accepted: true }]);
    expect(r.state()).toBe("responding");
  });
});

describe("request machine: what a refusal says", () => {
  it("an answer through a host generation that is gone is refused as not resumable, saying so", () => {
    const r = open();
    r.respond(decision, 2);
    expect(r.outcomes()).toEqual([
      {
        command: "respond",
        refused: "not_resumable",
        detail: "the host generation that asked this request is gone",
      },
    ]);
  });

  it("a wrong shape is refused before the generation is looked at: the request stays answerable", () => {
    const r = open("user_input");
    r.respond(decision, 2);
    expect(r.outcomes()).toEqual([
      { command: "respond", refused: "conflict", detail: "a user_input request takes answers" },
    ]);
    expect(r.state()).toBe("pending");
  });

  it("a second answer while the first is delivered is a conflict that says one is on its way", () => {
    const r = open();
    r.respond(decision);
    r.respond({ kind: "decision", decision: "decline" });
    expect(r.outcomes()[1]).toEqual({
      command: "respond",
      refused: "conflict",
      detail: "a response is already being delivered",
    });
  });
});
