import type { ProviderEvent } from "../../src/adapters/contract.js";
import type { DomainEvent, LogRecord } from "../../src/index.js";
import { Normalizer, type Routed } from "../../src/runtime/ingest/normalizer.js";
import { Projections } from "../../src/runtime/projections.js";
import { capabilitiesOf, exposureOf, stepsOf, type TurnScenario } from "./generators.js";

/**
 * The normalizer and the projections on their own (no runtime, no files): a generated turn's
 * frames go through a fresh Normalizer; what it routes becomes a log folded by a fresh
 * Projections. Fast enough for many more interleavings than the runtime properties.
 */

const IDS = {
  threadId: "thr_a",
  runId: "run_a",
  attemptId: "att_a",
  rootNodeId: "nod_root",
  providerThreadId: "pth_a",
  sessionId: "ses_a",
};

/**
 * Feeds a scenario's steps through a fresh normalizer; returns everything it routed, then what its completion barrier
 * would close.
 */
export function normalize(s: TurnScenario): { routed: Routed[]; open: string[] } {
  const caps = capabilitiesOf(s.caps);
  const x = exposureOf(s.caps);
  const normalizer = new Normalizer("chaos", () => ({ capabilities: caps, hostGeneration: 1 }));
  const { rootStarted } = normalizer.beginTurn({ ...IDS, threadRef: x.threadRef });
  const routed: Routed[] = [{ to: "log", event: rootStarted }];
  const turnRef = x.turnRefs ? "turn-1" : null;
  for (const step of stepsOf(s, turnRef)) {
    if (step.kind === "accept") normalizer.acceptTurn(IDS.attemptId, turnRef);
    else if (step.kind === "event")
      routed.push(
        ...normalizer.ingest(step.session === "live" ? IDS.sessionId : "ses_other", step.event as ProviderEvent),
      );
    // garbage never reaches the normalizer: the pump's schema check stops it (the runtime properties cover that)
  }
  return { routed, open: normalizer.takeOpenNodes(IDS.attemptId).map((n) => n.nodeId) };
}

/**
 * The domain events the run's actor would apply (its own attempt's provider events), as a log after the run's creation.
 */
export function logOf(routed: Routed[]): LogRecord<DomainEvent>[] {
  const { threadId, runId, attemptId, rootNodeId } = IDS;
  const events: DomainEvent[] = [
    {
      type: "run.created",
      threadId,
      runId,
      ordinal: 1,
      providerTarget: "chaos",
      userMessageId: "msg_a",
      text: "go",
      mode: "auto",
    },
    { type: "attempt.started", threadId, runId, attemptId, ordinal: 1, reason: "initial", rootNodeId, text: "go" },
  ];
  for (const r of routed) {
    if (r.to === "log") events.push(r.event);
    else if (r.to === "run" && (r.event.type === "PROVIDER" || r.event.type === "REQUEST_OPENED"))
      events.push(r.event.event);
  }
  return events.map((event, i) => ({ seq: i + 1, at: "", event }));
}

export function fold(records: LogRecord<DomainEvent>[]): Projections {
  const views = new Projections();
  for (const record of records) views.apply(record);
  return views;
}

/**
 * The completion barrier's input is exactly what is open: every node the normalizer started
 * (the root included) that no completion closed, and whose request (for a request's node) the
 * provider did not resolve.
 */
export function barrierViolations(routed: Routed[], open: string[]): string[] {
  const started = new Set<string>();
  const closed = new Set<string>();
  const nodeOfRequest = new Map<string, string>();
  for (const r of routed) {
    const event =
      r.to === "log"
        ? r.event
        : r.to === "run" && (r.event.type === "PROVIDER" || r.event.type === "REQUEST_OPENED")
          ? r.event.event
          : null;
    if (event?.type === "node.started") started.add(event.nodeId);
    if (event?.type === "node.completed") closed.add(event.nodeId);
    if (event?.type === "request.opened") nodeOfRequest.set(event.requestId, event.nodeId);
    if (r.to === "request") closed.add(nodeOfRequest.get(r.requestId) ?? "");
  }
  const expected = [...started].filter((id) => !closed.has(id)).sort();
  const actual = [...open].sort();
  return JSON.stringify(expected) === JSON.stringify(actual)
    ? []
    : [`the barrier would close ${JSON.stringify(actual)}, but open are ${JSON.stringify(expected)}`];
}

/**
 * The same log with some node.started records repeated later (each node's latest announcement, as a log written before
 * the fix repeated them).
 */
export function withRepeatedStarts(
  records: LogRecord<DomainEvent>[],
  picks: Array<{ which: number; after: number }>,
): LogRecord<DomainEvent>[] {
  const out = records.map((r) => r.event);
  for (const { which, after } of picks) {
    const latest = out.flatMap((e, i) =>
      e.type === "node.started" && !out.slice(i + 1).some((l) => l.type === "node.started" && l.nodeId === e.nodeId)
        ? [i]
        : [],
    );
    if (latest.length === 0) break;
    const at = latest[which % latest.length]!;
    out.splice(at + 1 + (after % (out.length - at)), 0, out[at]!);
  }
  return out.map((event, i) => ({ seq: i + 1, at: "", event }));
}
