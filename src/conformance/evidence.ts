import type { ProviderCapabilities, ProviderEvent } from "../index.js";
import { claims, declared, finding, type Finding } from "./findings.js";
import type { Harness } from "./harness.js";

/**
 * What a whole path shows of the record, whatever its steps were for: the runtime's own evidence against the provider
 * (it declined a request the record denies, placed a subagent's request at the root, stripped an MCP tag, fenced an
 * event that came after its turn had ended), what the provider streamed although its record says it never does
 * (declared false, done anyway), and whether its native ids are what their strength promises: a `strong` id names
 * one thing in its scope (unique) and the same thing every time it is given (stable from start to completion, and
 * across a resume).
 *
 * Only contradictions are findings here: a path's steps verify what the record claims; this refutes what it showed
 * otherwise, on the field the record broke.
 */

type Item = Extract<ProviderEvent, { type: "item.started" | "item.delta" | "item.completed" }>;
const isItem = (e: ProviderEvent): e is Item =>
  e.type === "item.started" || e.type === "item.delta" || e.type === "item.completed";
const TOOL_KINDS = new Set(["command_execution", "tool_call", "file_change"]);
const strong = (caps: ProviderCapabilities, field: string) => declared(caps, field) === "strong";
const isDelta = (e: ProviderEvent, kind: string) => e.type === "item.delta" && e.kind === kind;
const isTrue = (caps: ProviderCapabilities, field: string) => declared(caps, field) === true;

/** Policies the runtime records when the provider did what its record says it cannot, by the field they name. */
const CONTRADICTIONS: Record<string, string | null> = {
  /** `capability` names the field. */
  undeclared_request_declined: null,
  subagent_request_at_root: "approvals.approvalsCanOriginateFromSubagents",
  mcp_tools_unavailable: "tools.supportsMcpTools",
};

function runtimeEvidence(h: Harness): Finding[] {
  const out: Finding[] = [];
  for (const e of h.events("policy.applied")) {
    if (!(e.policy in CONTRADICTIONS)) continue;
    const field = CONTRADICTIONS[e.policy] ?? e.capability;
    if (field) out.push(finding(field, false, "", `the runtime recorded ${e.policy}: ${e.detail}`));
  }
  for (const e of h.events("warning")) {
    if (!e.message.startsWith("protocol_error:")) continue;
    if (/reported subagent .* although its record says it has none/.test(e.message))
      out.push(finding("subagents.supportsSubagents", false, "", e.message));
  }
  return out;
}

/** Streamed though the record says it never is: each provider event kind with the field that denies it. */
function doneAnyway(caps: ProviderCapabilities, events: ProviderEvent[]): Finding[] {
  const denials: Array<[string, (e: ProviderEvent) => boolean, string]> = [
    ["turns.emitsTurnStarted", (e) => e.type === "turn.started", "turn.started"],
    ["planning.emitsPlanUpdated", (e) => e.type === "plan.updated", "plan.updated"],
    ["planning.emitsTodoList", (e) => e.type === "todo.updated", "todo.updated"],
    ["planning.emitsProposedPlan", (e) => e.type === "plan.proposed", "plan.proposed"],
    ["subagents.supportsSubagents", (e) => e.type === "subagent.started", "subagent.started"],
    ["subagents.emitsSubagentLifecycle", (e) => e.type === "subagent.started", "subagent.started"],
    ["streaming.streamsAssistantText", (e) => isDelta(e, "assistant_message"), "an assistant text delta"],
    ["streaming.streamsReasoning", (e) => isDelta(e, "reasoning"), "a reasoning delta"],
    [
      "tools.emitsToolStarted",
      (e) => e.type === "item.started" && TOOL_KINDS.has(e.kind) && e.kind !== "file_change",
      "a tool's item.started",
    ],
  ];
  const out: Finding[] = [];
  for (const [field, denied, what] of denials) {
    if (isTrue(caps, field) || declared(caps, field) === undefined) continue;
    const seen = events.filter(denied).length;
    if (seen > 0) out.push(finding(field, false, "", `declared false, yet the provider streamed ${what} (${seen}x)`));
  }
  return out;
}

/** The scope an item's ref is unique in: its thread and turn, as the provider names them. */
const scopeOf = (e: { threadRef?: string | undefined; turnRef?: string | undefined }) =>
  `${e.threadRef ?? ""}/${e.turnRef ?? ""}`;

/** The native turn refs the adapter gave its turns as it accepted them, one per turn sent. */
const sentTurnRefs = (h: Harness) =>
  h.callsOf("sendRun").flatMap((c) => {
    const ref = (c.result as { turnRef?: string | null } | undefined)?.turnRef;
    return ref ? [ref] : [];
  });

/** Events after the terminal of the turn they name: the terminal was not the turn's end. */
function afterTerminal(caps: ProviderCapabilities, events: ProviderEvent[], reused: Set<string>): Finding[] {
  const ended = new Set<string>();
  let late = 0;
  for (const e of events) {
    // A ref that names a later turn too is an identity at fault (below), not a late event.
    const ref = "turnRef" in e ? e.turnRef : undefined;
    if (ref && reused.has(ref)) continue;
    if (e.type === "turn.terminal" && e.turnRef) ended.add(e.turnRef);
    else if ((isItem(e) || e.type === "plan.updated" || e.type === "todo.updated") && e.turnRef && ended.has(e.turnRef))
      late += 1;
  }
  if (late === 0) return [];
  const seen = `the provider streamed ${late} item event(s) for a turn after that turn's terminal`;
  const fields = ["turns.emitsTurnCompleted"];
  if (claims(caps.turns.terminalStatusQuality)) fields.push("turns.terminalStatusQuality");
  return fields.map((f) => finding(f, false, "", seen));
}

/** The runtime fenced item events of a run that had completed in one attempt: they came after its end. */
function fencedAfterEnd(h: Harness, caps: ProviderCapabilities): Finding[] {
  const attempts = new Map<string, number>();
  for (const e of h.events("attempt.started")) attempts.set(e.runId, (attempts.get(e.runId) ?? 0) + 1);
  const late = h.events(
    "event.fenced",
    (e) =>
      /^item\.|^plan\.|^todo\./.test(e.providerEventType) &&
      attempts.get(e.runId) === 1 &&
      h.terminal(e.runId)?.status === "completed",
  );
  if (late.length === 0) return [];
  const seen = `the runtime fenced ${late.length} ${late[0]!.providerEventType} event(s) of a run after it completed`;
  const fields = ["turns.emitsTurnCompleted"];
  if (claims(caps.turns.terminalStatusQuality)) fields.push("turns.terminalStatusQuality");
  return fields.map((f) => finding(f, false, "", seen));
}

/** Refs that name two things: `owners` maps each ref to what it named (two owners: not unique). */
function duplicates(pairs: Array<[string | null | undefined, string]>): string[] {
  const owners = new Map<string, Set<string>>();
  for (const [ref, owner] of pairs) if (ref) owners.set(ref, (owners.get(ref) ?? new Set()).add(owner));
  return [...owners].filter(([, of]) => of.size > 1).map(([ref]) => ref);
}

function identity(h: Harness, caps: ProviderCapabilities, reusedTurnRefs: Set<string>): Finding[] {
  const out: Finding[] = [];
  const shared = (field: string, refs: string[], what: string) => {
    if (refs.length > 0 && strong(caps, field))
      out.push(finding(field, false, "", `declared strong, yet ${what} ${refs.slice(0, 3).join(", ")} named several`));
  };
  // Turns: one native ref per attempt of a run, one per turn the adapter accepted.
  const bound = h.events("attempt.turn_bound");
  const sent = sentTurnRefs(h).map((ref, i): [string, string] => [ref, `turn ${i}`]);
  const turns = [
    ...duplicates(bound.map((e) => [e.nativeTurnRef, e.attemptId])),
    ...duplicates(sent),
    ...reusedTurnRefs,
  ];
  shared("identity.nativeTurnIds", [...new Set(turns)], "turn refs");
  // Threads: one native ref per provider thread (a subagent's child thread included). Two provider threads bound to
  // one native thread (the same cursor) are one thread shared, a fork's fault, not the ref's; one ref for two cursors
  // names two threads.
  const threads = h
    .events("provider_thread.bound")
    .map((e): [string | null, string] => [e.nativeThreadRef, e.resumeCursor]);
  const children = h
    .events("subagent.thread_bound")
    // A child thread is addressed by its ref, which is also its cursor.
    .map((e): [string | null, string] => [e.nativeThreadRef, e.nativeThreadRef ?? `child ${e.nodeId}`]);
  shared("identity.nativeThreadIds", duplicates([...threads, ...children]), "thread refs");
  // A provider thread resumed keeps its native ref.
  const refs = new Map<string, Set<string>>();
  for (const [ref, owner] of threads) if (ref) refs.set(owner, (refs.get(owner) ?? new Set()).add(ref));
  const moved = [...refs].filter(([, of]) => of.size > 1).map(([owner]) => owner);
  if (moved.length > 0 && strong(caps, "identity.nativeThreadIds"))
    out.push(finding("identity.nativeThreadIds", false, "", `a provider thread's native ref changed (${moved[0]})`));
  // Requests: one native ref per request.
  const requests = h.events("request.opened").map((e): [string | null, string] => [e.nativeRef, e.requestId]);
  shared("identity.nativeRequestIds", duplicates(requests), "request refs");
  out.push(...itemIdentity(h.provider, caps));
  return out;
}

/** A strong item ref names one item in its turn, the same from its start through its deltas to its completion. */
function itemIdentity(events: ProviderEvent[], caps: ProviderCapabilities): Finding[] {
  if (!strong(caps, "identity.nativeItemIds")) return [];
  const started = new Map<string, Map<string, number>>();
  /** Every item started, by its ref: two items of a path never share one. */
  const owners = new Set<string>();
  const problems: string[] = [];
  for (const e of events) {
    if (e.type === "subagent.started" && e.itemRef) {
      if (owners.has(e.itemRef)) problems.push(`a subagent started as ${e.itemRef}, an item's ref`);
      owners.add(e.itemRef);
    }
    if (!isItem(e) || !e.itemRef) continue;
    const key = `${scopeOf(e)}#${e.kind}`;
    const refs = started.get(key) ?? new Map<string, number>();
    started.set(key, refs);
    if (e.type === "item.started") {
      if (owners.has(e.itemRef)) problems.push(`two items started as ${e.itemRef}`);
      owners.add(e.itemRef);
      refs.set(e.itemRef, 1);
    } else if (refs.size > 0 && !refs.has(e.itemRef)) {
      problems.push(
        `a ${e.kind} ${e.type === "item.delta" ? "delta" : "completion"} named ${e.itemRef}, no item started so`,
      );
    }
  }
  if (problems.length === 0) return [];
  return [finding("identity.nativeItemIds", false, "", `declared strong, yet ${problems[0]}`)];
}

/** Two provider threads of the runtime's bound to one thread of the provider's (one cursor, or a subagent's ref). */
function sharesThread(h: Harness): boolean {
  const bound = new Map<string, string>();
  for (const e of h.events("provider_thread.bound")) {
    const other = bound.get(e.resumeCursor);
    if (other && other !== e.providerThreadId) return true;
    bound.set(e.resumeCursor, e.providerThreadId);
  }
  const children = new Set(h.events("subagent.thread_bound").map((e) => e.nativeThreadRef));
  return h.events("provider_thread.bound").some((e) => children.has(e.resumeCursor));
}

export function pathEvidence(h: Harness, caps: ProviderCapabilities): Finding[] {
  // A turn ref given to two turns: by the adapter's replies, or by two turns' starts or ends on the stream.
  const sent = sentTurnRefs(h);
  const twice = (refs: string[]) => refs.filter((ref, i) => refs.indexOf(ref) !== i);
  const on = (type: "turn.started" | "turn.terminal") =>
    h.provider.flatMap((e) => (e.type === type && e.turnRef ? [e.turnRef] : []));
  const reused = new Set([...twice(sent), ...twice(on("turn.started")), ...twice(on("turn.terminal"))]);
  return [
    ...runtimeEvidence(h),
    ...doneAnyway(caps, h.provider),
    ...afterTerminal(caps, h.provider, reused),
    // The runtime fences a reused ref's events as late, and a thread's shared with another (a fork's own fault): the
    // reuse or the sharing is the fault, reported where it shows.
    ...(reused.size > 0 || sharesThread(h) ? [] : fencedAfterEnd(h, caps)),
    ...identity(h, caps, reused),
  ];
}
