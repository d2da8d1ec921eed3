import { describe, expect, it } from "vitest";
import { createActor } from "xstate";
import type { ResponseCapability } from "../../src/domain/entities.js";
import type { DomainEvent } from "../../src/domain/events.js";
import type { RequestKind, RequestResponse } from "../../src/domain/items.js";
import type { Effect, MachineEmitted, Outcome } from "../../src/machines/emitted.js";
import { requestMachine } from "../../src/machines/request.js";

/**
 * The request machine alone: an approval or a question, pending until answered, resolved by
 * the provider, expired or cancelled. Expectations come from the domain model's approvals
 * flow and the RuntimeRequest entity (pending → resolved / expired / cancelled; responding
 * to a request whose host generation died fails with `not_resumable`) and from the typed
 * refusals of the API (a wrong answer shape or a second answer in flight is a conflict).
 */

const live: ResponseCapability = { kind: "live", sessionId: "ses_1", hostGeneration: 3 };
const accept: RequestResponse = { kind: "decision", decision: "accept" };
const answers: RequestResponse = { kind: "answers", answers: { q1: "yes" } };

function open(kind: RequestKind = "command", responseCapability: ResponseCapability = live) {
  const emitted: MachineEmitted[] = [];
  const actor = createActor(requestMachine, {
    input: { threadId: "thr_1", runId: "run_1", requestId: "req_1", kind, responseCapability },
  });
  actor.on("*", (e) => emitted.push(e));
  actor.start();
  const respond = (response: RequestResponse = accept, hostGeneration: number | null = 3) =>
    actor.send({ type: "RESPOND", response, hostGeneration });
  const records = (): DomainEvent[] => emitted.flatMap((e) => (e.type === "record" ? [e.event] : []));
  const effects = (): Effect[] => emitted.flatMap((e) => (e.type === "effect" ? [e.effect] : []));
  const outcomes = (): Outcome[] => emitted.flatMap((e) => (e.type === "outcome" ? [e.outcome] : []));
  const state = () => actor.getSnapshot().value;
  return { actor, respond, records, effects, outcomes, state };
}

const where = { threadId: "thr_1", runId: "run_1", requestId: "req_1" };

describe("request machine", () => {
  it(
    "an answer through the live host generation that asked is delivered; " +
      "it is the user's once the provider took it",
    () => {
      const r = open();
      expect(r.state()).toBe("pending");
      r.respond(accept, 3);
      expect(r.state()).toBe("responding");
      expect(r.effects()).toEqual([{ type: "respond", requestId: "req_1", response: accept }]);
      expect(r.outcomes()).toEqual([{ command: "respond", requestId: "req_1", accepted: true }]);
      expect(r.records()).toEqual([]);
      r.actor.send({ type: "RESPONDED" });
      expect([r.state(), r.actor.getSnapshot().status]).toEqual(["resolved", "done"]);
      expect(r.records()).toEqual([{ type: "request.resolved", ...where, by: "user", response: accept }]);
    },
  );

  it(
    "a question takes answers and an approval a decision: " +
      "another shape is a conflict, and the request stays answerable",
    () => {
      const q = open("user_input");
      q.respond(accept);
      expect(q.outcomes()).toEqual([
        { command: "respond", refused: "conflict", detail: expect.stringContaining("answers") },
      ]);
      expect([q.state(), q.effects(), q.records()]).toEqual(["pending", [], []]);
      q.respond(answers);
      expect(q.state()).toBe("responding");
      expect(q.effects()).toEqual([{ type: "respond", requestId: "req_1", response: answers }]);

      const a = open("file_change");
      a.respond(answers);
      expect(a.outcomes()).toEqual([
        { command: "respond", refused: "conflict", detail: expect.stringContaining("decision") },
      ]);
      expect(a.state()).toBe("pending");
    },
  );

  it("an answer after the host generation that asked is gone is refused not_resumable, and the request expires", () => {
    for (const generation of [4, null]) {
      const r = open();
      r.respond(accept, generation);
      expect(r.state()).toBe("expired");
      expect(r.effects()).toEqual([]);
      expect(r.records()).toEqual([
        { type: "request.closed", ...where, status: "expired", reason: "host_generation_gone" },
      ]);
      expect(r.outcomes()).toEqual([{ command: "respond", refused: "not_resumable", detail: expect.any(String) }]);
    }
  });

  it("a request recorded as not resumable is refused with the reason it was given", () => {
    const r = open("command", { kind: "not_resumable", reason: "runtime restarted" });
    r.respond(accept, 3);
    expect(r.outcomes()).toEqual([{ command: "respond", refused: "not_resumable", detail: "runtime restarted" }]);
    expect(r.state()).toBe("expired");
  });

  it("a delivery the provider did not take is said so in the log, and the request can be answered again", () => {
    const r = open();
    r.respond();
    r.actor.send({ type: "RESPOND_FAILED", message: "channel closed" });
    expect(r.state()).toBe("pending");
    expect(r.records()).toEqual([
      { type: "warning", threadId: "thr_1", runId: "run_1", message: expect.stringContaining("channel closed") },
    ]);
    r.respond({ kind: "decision", decision: "decline" });
    expect(r.state()).toBe("responding");
    expect(r.effects()).toHaveLength(2);
    r.actor.send({ type: "RESPONDED" });
    expect(r.records().at(-1)).toMatchObject({
      type: "request.resolved",
      by: "user",
      response: { kind: "decision", decision: "decline" },
    });
  });

  it("while an answer is being delivered, a second one is a conflict and is not sent", () => {
    const r = open();
    r.respond();
    r.respond({ kind: "decision", decision: "decline" });
    expect(r.outcomes()[1]).toEqual({ command: "respond", refused: "conflict", detail: expect.any(String) });
    expect(r.effects()).toHaveLength(1);
    expect(r.state()).toBe("responding");
  });

  it("the provider resolving it on its own resolves it with no user response", () => {
    const r = open();
    r.actor.send({ type: "PROVIDER_RESOLVED", outcome: "approved elsewhere" });
    expect(r.state()).toBe("resolved");
    expect(r.records()).toEqual([{ type: "request.resolved", ...where, by: "provider", response: null }]);
  });

  it("the provider resolving it while the user's answer is on its way counts as the user's answer", () => {
    const r = open();
    r.respond();
    r.actor.send({ type: "PROVIDER_RESOLVED", outcome: null });
    expect(r.records()).toEqual([{ type: "request.resolved", ...where, by: "user", response: accept }]);
  });

  it("the runtime expires or cancels it, pending or being answered, with its reason", () => {
    const cases = [
      { answered: false, type: "EXPIRE", status: "expired" },
      { answered: true, type: "EXPIRE", status: "expired" },
      { answered: false, type: "CANCEL", status: "cancelled" },
      { answered: true, type: "CANCEL", status: "cancelled" },
    ] as const;
    for (const { answered, type, status } of cases) {
      const r = open();
      if (answered) r.respond();
      r.actor.send({ type, reason: "run_interrupted" });
      expect(r.state()).toBe(status);
      expect(r.records()).toEqual([{ type: "request.closed", ...where, status, reason: "run_interrupted" }]);
    }
  });

  it("a settled request takes nothing more: it is done", () => {
    const r = open();
    expect(r.actor.getSnapshot().can({ type: "RESPOND", response: accept, hostGeneration: 3 })).toBe(true);
    r.actor.send({ type: "CANCEL", reason: "run_cancelled" });
    expect(r.actor.getSnapshot().status).toBe("done");
    expect(r.actor.getSnapshot().can({ type: "RESPOND", response: accept, hostGeneration: 3 })).toBe(false);
    expect(r.actor.getSnapshot().can({ type: "PROVIDER_RESOLVED", outcome: null })).toBe(false);
  });
});
