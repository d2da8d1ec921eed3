import type { ProviderCapabilities } from "../index.js";
import { claims, declared, type Finding } from "./findings.js";
import { APPROVAL_FIELD, APPROVAL_KINDS, ARTIFACTS, type ArtifactKind } from "./model.js";
import type { BehaviourKind } from "./world.js";

/**
 * From findings to verdicts. A field is `refuted` when any finding contradicts the record, `verified` when some
 * finding confirms it and none contradicts it, and `not exercisable` when no path gave it a finding, with the reason
 * (the world cannot script what it needs, or no behaviour the suite can observe tells it apart).
 */

export type Verdict = "verified" | "refuted" | "not exercisable";

export interface FieldVerdict {
  /** Dotted field (`turns.supportsInterrupt`), or `primitive.resume` for the required resume primitive. */
  field: string;
  declared: unknown;
  /**
   * The record claims it (true, `strong`/`weak`, a number); a field declared false or `none` is checked for the
   * degradation its absence implies.
   */
  claimed: boolean;
  verdict: Verdict;
  /** What was observed (verified, refuted) or why it could not be (not exercisable). */
  detail: string;
}

export interface ConformanceReport {
  adapter: string;
  capabilities: ProviderCapabilities;
  /** Fields the record claims (see `FieldVerdict.claimed`): N of the summary. */
  declared: number;
  verified: number;
  refuted: number;
  notExercisable: number;
  fields: FieldVerdict[];
  paths: Array<{ events: string[]; error: string | null }>;
  /** No field (claimed or not) refuted and the resume primitive not refuted. */
  ok: boolean;
  /**
   * `conformance: <adapter> declared N, verified V, refuted R, not exercisable X; absent M: degradation verified D,
   * refuted F, not exercisable Y; resume <verdict>`: N and its split count the claimed fields, M the others.
   */
  summary: string;
  /** One line per field: verdict, declared value, detail. */
  table: string;
}

/** Why a field no path exercises cannot be: what observing it would take. */
const UNOBSERVED: Record<string, string> = {
  "sessions.supportsMultipleProviderThreadsPerSession":
    "shown only where threads can share a session (thread ids, turn terminals, empty threads)",
  "sessions.supportsModelSwitchInSession": "the world does not report the model a turn ran with",
  "sessions.supportsProviderSwitchingViaHandoff": "shown only where a provider can be told the conversation",
  "sessions.supportsRuntimeModeSwitchInSession": "the world does not report the mode a turn worked in",
  "sessions.pendingRequestsSurviveRestart": "shown only by a request the provider asks (an approval the world scripts)",
  "threads.canReadThreadSnapshot": "shown only after two turns of one thread (read from the adapter)",
  "threads.canForkFromSubagentThread": "shown only for an addressable subagent whose thread outlives it",
  "turns.supportsSteeringByInterruptRestart": "shown only where active steering is absent and interrupt present",
  "streaming.streamsPlanText": "shown only by a plan turn (a world that scripts plan)",
  "tools.supportsMcpTools": "shown only by an MCP tool call (a world that scripts mcp)",
  "tools.supportsDynamicToolCallbacks": "shown only by a call back (a world that scripts dynamic_tool)",
  "approvals.approvalsHaveNativeRequestIds": "shown only by an approval the provider asks",
  "approvals.approvalCallbacksAreLiveOnly": "shown only by a request the provider asks (an approval the world scripts)",
  "approvals.approvalsCanOriginateFromSubagents": "shown only where subagents show and command approvals are asked",
  "planning.planDeltasHaveItemIds": "shown only by a plan or todo turn (a world that scripts plan or todo)",
  "context.acceptsSystemContext": "shown only where the provider can be told a whole conversation",
  "context.acceptsDeveloperContext": "shown only where the provider can be told a whole conversation",
  "context.acceptsSyntheticUserContext": "shown only where the provider can be told a whole conversation",
  "context.canGenerateSummaries": "shown only by a handoff (synthetic fork, provider switch, rebuilt thread)",
  "context.canConsumeHandoffSummaries": "shown only by a handoff (synthetic fork, provider switch, rebuilt thread)",
  "context.supportsDeltaHandoff": "shown only where the conversation can switch providers and back",
  "context.supportsFullThreadHandoff": "shown only by a handoff (synthetic fork, provider switch, rebuilt thread)",
  "context.maxRecommendedHandoffChars": "shown only by a handoff (synthetic fork, provider switch, rebuilt thread)",
  "checkpointing.appCanCheckpointFilesystem": "shown only by a rollback",
  "checkpointing.supportsNestedCheckpointScopes":
    "needs a world whose subagents edit files, undone by undoSubagent (test/runtime/undoSubagent.test.ts has one)",
  "checkpointing.providerRollbackReturnsSnapshot": "shown only by a provider rollback",
  "checkpointing.providerCanReadConversationSnapshot":
    "shown only after two turns of one thread (read from the adapter)",
  "identity.nativeItemIds": "shown only by an item of a completed text turn",
};
const SUBAGENTS: Record<string, string> = {
  "subagents.supportsSubagents": "shown only by a subagent's node, which needs its lifecycle events",
  "subagents.exposesSubagentThreadIds": "shown only by a subagent the provider announces",
  "subagents.emitsSubagentLifecycle": "shown only where the provider has subagents",
  "subagents.canWaitForSubagents": "shown only for an addressable subagent (lifecycle and thread ids)",
  "subagents.canCloseSubagents": "shown only for an addressable subagent (lifecycle and thread ids)",
  "subagents.canForkSubagentThread": "shown only for an addressable subagent, where the provider forks",
};

const TOOL_FIELDS = [
  "streaming.streamsReasoning",
  "streaming.streamsToolOutput",
  "tools.exposesToolItemIds",
  "tools.emitsToolStarted",
  "tools.emitsToolCompleted",
  "tools.emitsToolOutput",
];

/** The behaviour a field's check needs from the world. */
function needs(field: string): BehaviourKind | null {
  for (const kind of APPROVAL_KINDS) if (APPROVAL_FIELD[kind] === field) return `approval:${kind}`;
  for (const kind of Object.keys(ARTIFACTS) as ArtifactKind[]) if (ARTIFACTS[kind] === field) return kind;
  if (TOOL_FIELDS.includes(field)) return "tool";
  const bySubagents = ["approvals.approvalsCanOriginateFromSubagents", "threads.canForkFromSubagentThread"];
  if (field.startsWith("subagents.") || bySubagents.includes(field)) return "subagent";
  return null;
}

/** The record's dotted fields, group by group. */
export function fieldNames(caps: ProviderCapabilities): string[] {
  return Object.entries(caps).flatMap(([group, value]) =>
    typeof value === "object" && value !== null ? Object.keys(value).map((name) => `${group}.${name}`) : [],
  );
}

export function buildReport(
  adapter: string,
  caps: ProviderCapabilities,
  scripts: ReadonlySet<BehaviourKind>,
  findings: Finding[],
  paths: ConformanceReport["paths"],
): ConformanceReport {
  // Refutations that hold unless another field's verdict places the fault elsewhere, resolved in turn.
  const plain = findings.filter((f) => !f.unlessVerified && !f.unlessRefuted);
  const isRefuted = (list: Finding[], field: string) => list.some((f) => f.field === field && !f.ok && !f.skipped);
  const isVerified = (list: Finding[], field: string) =>
    !isRefuted(list, field) && list.some((f) => f.field === field && f.ok && !f.skipped);
  const narrowed = [...plain, ...findings.filter((f) => f.unlessVerified && !isVerified(plain, f.unlessVerified))];
  const resolved = [...narrowed, ...findings.filter((f) => f.unlessRefuted && !isRefuted(narrowed, f.unlessRefuted))];
  const verdictOf = (field: string, value: unknown): FieldVerdict => {
    const all = resolved.filter((f) => f.field === field);
    const mine = all.filter((f) => !f.skipped);
    const claimed = field.startsWith("primitive.") || claims(value);
    const refuted = mine.find((f) => !f.ok);
    if (refuted) return { field, declared: value, claimed, verdict: "refuted", detail: refuted.observed };
    const seen = [...new Set(mine.map((f) => f.observed))];
    const detail = seen.slice(0, 2).join("; ") + (seen.length > 2 ? ` (+${seen.length - 2} more)` : "");
    if (mine.length > 0) return { field, declared: value, claimed, verdict: "verified", detail };
    const behaviour = needs(field);
    const skipped = all[0]?.observed;
    const unscripted =
      behaviour && !scripts.has(behaviour) ? `the world cannot script the ${behaviour} behaviour` : null;
    const reason =
      skipped ??
      unscripted ??
      UNOBSERVED[field] ??
      SUBAGENTS[field] ??
      (claimed ? "no path of the model exercises it" : "declared absent, with no degradation of its own to observe");
    return { field, declared: value, claimed, verdict: "not exercisable", detail: reason };
  };
  const fields = [
    ...fieldNames(caps).map((f) => verdictOf(f, declared(caps, f))),
    verdictOf("primitive.resume", "required"),
  ];
  const claimed = fields.filter((f) => f.claimed && !f.field.startsWith("primitive."));
  const count = (list: FieldVerdict[], v: Verdict) => list.filter((f) => f.verdict === v).length;
  const verified = count(claimed, "verified");
  const refuted = count(claimed, "refuted");
  const notExercisable = count(claimed, "not exercisable");
  const absent = fields.filter((f) => !f.claimed);
  const resume = fields.find((f) => f.field === "primitive.resume")!;
  const summary =
    `conformance: ${adapter} declared ${claimed.length}, verified ${verified}, ` +
    `refuted ${refuted}, not exercisable ${notExercisable}; ` +
    `absent ${absent.length}: degradation verified ${count(absent, "verified")}, ` +
    `refuted ${count(absent, "refuted")}, not exercisable ${count(absent, "not exercisable")}; ` +
    `resume ${resume.verdict}`;
  const width = Math.max(...fields.map((f) => f.field.length));
  const table = fields
    .map((f) => `${f.field.padEnd(width)}  ${JSON.stringify(f.declared).padEnd(9)} ${f.verdict.padEnd(15)} ${f.detail}`)
    .join("\n");
  return {
    adapter,
    capabilities: caps,
    declared: claimed.length,
    verified,
    refuted,
    notExercisable,
    fields,
    paths,
    ok: fields.every((f) => f.verdict !== "refuted"),
    summary,
    table,
  };
}
