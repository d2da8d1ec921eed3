import type { ProviderCapabilities } from "../index.js";
import { claims, completed, declared, finding, refusal, type Check, type Finding } from "./findings.js";
import type { Harness } from "./harness.js";

/**
 * The subagent part of the conformance model (written from the seed's subagent capabilities): a turn that delegates
 * to a subagent, which the user may wait for or close, and a subagent that asks for approval. Where the provider has
 * no subagents, their steps run in the parent turn and nothing of a subagent shows.
 */

const SUPPORTS = "subagents.supportsSubagents";
const LIFECYCLE = "subagents.emitsSubagentLifecycle";
const IDS = "subagents.exposesSubagentThreadIds";
const WAIT = "subagents.canWaitForSubagents";
const CLOSE = "subagents.canCloseSubagents";
const ASKS = "approvals.approvalsCanOriginateFromSubagents";
const FORK_SUB = ["threads.canForkFromSubagentThread", "subagents.canForkSubagentThread"];
/** What the harness asks each subagent: a native fork of its conversation must remember it. */
export const SUBAGENT_PROMPT = "conformance: look into it";

/** A subagent the user can see (a node of its own) and address (its thread): what waiting and closing need. */
const shown = (c: ProviderCapabilities) => c.subagents.supportsSubagents && c.subagents.emitsSubagentLifecycle;
const addressable = (c: ProviderCapabilities) => shown(c) && c.subagents.exposesSubagentThreadIds;

export const subagentGuards = {
  delegates: shown,
  waitsForSubagents: (c: ProviderCapabilities) => addressable(c) && c.subagents.canWaitForSubagents,
  closesSubagents: (c: ProviderCapabilities) => addressable(c) && c.subagents.canCloseSubagents,
  /**
   * A fork of a finished subagent's conversation is native where its thread is addressable, outlives it, and the
   * provider forks from it.
   */
  forksSubagentNatively: (c: ProviderCapabilities) =>
    addressable(c) &&
    c.threads.canForkThread &&
    c.subagents.canForkSubagentThread &&
    c.threads.canForkFromSubagentThread,
  asksFromSubagents: (c: ProviderCapabilities) =>
    shown(c) && c.approvals.approvalsCanOriginateFromSubagents && c.approvals.supportsCommandApproval,
};

const scripts = { type: "scripts", params: { kind: "subagent" } } as const;
const scriptsApproval = { type: "scripts", params: { kind: "approval:command" } } as const;

/** Events from idle, guarded by what the world scripts and the record declares. */
export const subagentIdleEvents = (and: (guards: unknown[]) => unknown) => ({
  SUBAGENT: [
    { guard: and([scripts, "delegates"]), target: "delegated" },
    { guard: scripts, target: "delegatedInline" },
  ],
  ASK_SUBAGENT: [
    { guard: and([scripts, scriptsApproval, "asksFromSubagents"]), target: "subagentAsked" },
    { guard: and([scripts, scriptsApproval]), target: "subagentUnasked" },
  ],
});

export const subagentStates = {
  delegated: {
    meta: { fields: [SUPPORTS, LIFECYCLE, IDS] },
    on: {
      WAIT_SUBAGENT: [{ guard: "waitsForSubagents", target: "subagentWaited" }, { target: "waitRefused" }],
      CLOSE_SUBAGENT: [{ guard: "closesSubagents", target: "subagentClosed" }, { target: "closeRefused" }],
      RELEASE: "delegatedDone",
    },
  },
  delegatedDone: {
    meta: { fields: [SUPPORTS, LIFECYCLE] },
    on: {
      FORK_SUBAGENT: [
        { guard: "forksSubagentNatively", target: "subagentForkedNative" },
        { guard: "tellsConversation", target: "subagentForkedSynthetic" },
        { target: "subagentForkedUntold" },
      ],
    },
  },
  subagentForkedNative: { meta: { fields: FORK_SUB }, on: { FORK_TEXT: "subagentForkNativeAnswered" } },
  subagentForkNativeAnswered: { type: "final", meta: { fields: FORK_SUB } },
  subagentForkedSynthetic: { meta: { fields: FORK_SUB }, on: { FORK_TEXT: "subagentForkSyntheticAnswered" } },
  subagentForkSyntheticAnswered: { type: "final", meta: { fields: FORK_SUB } },
  subagentForkedUntold: { meta: { fields: FORK_SUB }, on: { FORK_TEXT: "subagentForkRefused" } },
  subagentForkRefused: { type: "final", meta: { fields: FORK_SUB, refusal: true } },
  delegatedInline: { type: "final", meta: { fields: [SUPPORTS, LIFECYCLE] } },
  subagentWaited: { type: "final", meta: { fields: [WAIT] } },
  waitRefused: { type: "final", meta: { fields: [WAIT], refusal: true } },
  subagentClosed: { type: "final", meta: { fields: [CLOSE] } },
  closeRefused: { type: "final", meta: { fields: [CLOSE], refusal: true } },
  subagentAsked: { meta: { fields: [ASKS] }, on: { ACCEPT: "subagentApproved" } },
  subagentApproved: { type: "final", meta: { fields: [ASKS] } },
  subagentUnasked: { type: "final", meta: { fields: [ASKS] } },
} as const;

function subagentNode(h: Harness) {
  return h.events("node.started", (e) => e.runId === h.runId && e.kind === "subagent")[0];
}

async function delegate(h: Harness, ask: boolean): Promise<void> {
  const gate = ask ? undefined : h.nextText("gate").replace(" ", "-");
  if (gate) h.gates.push(gate);
  const behaviour = { kind: "subagent", text: h.nextText("reply"), prompt: SUBAGENT_PROMPT, ask } as const;
  const runId = await h.send({ ...behaviour, ...(gate ? { gate } : {}) });
  if (!runId) throw new Error(`sending a subagent turn was refused: ${h.lastError?.code}`);
  // The subagent has said something (it runs, and waits at its gate), or asked.
  await h.until(
    `run ${runId} to ask, end, or hear from its subagent`,
    () =>
      (!ask && h.events("node.delta", (e) => e.runId === runId).length > 0) ||
      h.events("request.opened", (e) => e.runId === runId).length > 0 ||
      h.terminal(runId) !== undefined,
  );
}

export const subagentDrives: Record<string, (h: Harness) => Promise<void>> = {
  SUBAGENT: (h) => delegate(h, false),
  ASK_SUBAGENT: (h) => delegate(h, true),
  WAIT_SUBAGENT: async (h) => {
    const node = subagentNode(h);
    if (!node) throw new Error("no subagent to wait for");
    const waiting = h.attempt(() =>
      h.rt.waitForSubagent({ threadId: h.threadId, nodeId: node.nodeId, timeoutMs: h.timeoutMs }),
    );
    // The subagent waits at its gate: no honest wait can end before it is released. Once the adapter has the wait
    // and everything it streamed so far is in, a wait already settled did not wait.
    const asked = () => h.callsOf("waitForSubagent").at(-1);
    await h.until("the adapter to be asked to wait", () => asked() !== undefined || h.lastError !== null);
    await h.settle();
    await new Promise((resolve) => setImmediate(resolve));
    h.waitSettledEarly = asked()?.settled === "resolved";
    for (const gate of h.gates) h.world.release(gate);
    await waiting;
    await h.untilTerminal(h.runId);
  },
  FORK_SUBAGENT: async (h) => {
    const node = subagentNode(h);
    if (!node) throw new Error("no subagent to fork");
    const receipt = await h.attempt(() => h.rt.forkThread({ threadId: h.threadId, fromSubagentNodeId: node.nodeId }));
    if (!receipt) throw new Error(`the fork was refused: ${h.lastError?.code}: ${h.lastError?.message}`);
    h.forkThreadId = receipt.threadId;
  },
  CLOSE_SUBAGENT: async (h) => {
    const node = subagentNode(h);
    if (!node) throw new Error("no subagent to close");
    const receipt = await h.attempt(() => h.rt.closeSubagent({ threadId: h.threadId, nodeId: node.nodeId }));
    if (receipt) await h.untilTerminal(h.runId);
  },
};

/** The nodes a node sits under, nearest first. */
function ancestors(h: Harness, nodeId: string): string[] {
  const parents = new Map(h.events("node.started").map((e) => [e.nodeId, e.parentNodeId]));
  const out: string[] = [];
  for (let at = parents.get(nodeId); at; at = parents.get(at)) out.push(at);
  return out;
}

/** The field a degraded subagent fork answers for: the first one it needs that the record does not claim. */
function absentOf(caps: ProviderCapabilities): string[] {
  const needed = [
    "subagents.exposesSubagentThreadIds",
    "threads.canForkThread",
    "subagents.canForkSubagentThread",
    "threads.canForkFromSubagentThread",
  ];
  const missing = needed.find((f) => !claims(declared(caps, f)));
  return missing ? [missing] : [];
}

export const subagentChecks: Record<string, Check> = {
  delegated: (h, caps) => {
    const node = subagentNode(h);
    const started = h.provider.some((e) => e.type === "subagent.started");
    // Without its lifecycle events there is no subagent to show: the missing events are blamed, not the subagent.
    if (!started) return [finding(LIFECYCLE, false, "", "no subagent.started streamed")];
    const out: Finding[] = [finding(SUPPORTS, !!node, "a subagent node", "no subagent node")];
    out.push(finding(LIFECYCLE, started, "subagent.started streamed", "no subagent.started streamed"));
    if (claims(caps.subagents.exposesSubagentThreadIds)) {
      const bound = h.events("subagent.thread_bound", (e) => e.runId === h.runId)[0];
      out.push(finding(IDS, !!bound, `child thread ${bound?.nativeThreadRef}`, "no child thread bound"));
    }
    return out;
  },
  delegatedDone: (h, caps) => {
    const node = subagentNode(h);
    const ended = node && h.events("node.completed", (e) => e.nodeId === node.nodeId)[0]?.status;
    const out = [
      finding(SUPPORTS, ended === "completed", "the subagent completed", `the subagent ${ended ?? "never ended"}`),
    ];
    if (caps.subagents.emitsSubagentLifecycle) {
      const done = h.provider.some((e) => e.type === "subagent.completed");
      out.push(finding(LIFECYCLE, done, "subagent.completed streamed", "no subagent.completed streamed"));
    }
    return [...out, completed(h, h.runId, SUPPORTS)];
  },
  subagentForkedNative: () => [],
  subagentForkedSynthetic: () => [],
  subagentForkedUntold: () => [],
  subagentForkNativeAnswered: (h) => {
    const resolution = h.events("fork.resolved", (e) => e.threadId === h.forkThreadId)[0]?.resolution ?? "(none)";
    const prior = h.latestTurnOn(h.forkThreadId!)?.priorUserTexts ?? [];
    const ok = resolution === "native" && prior.includes(SUBAGENT_PROMPT);
    const seen = `fork ${resolution}; the provider had ${JSON.stringify(prior)}`;
    return FORK_SUB.map((f) => finding(f, ok, seen, seen));
  },
  subagentForkSyntheticAnswered: (h, caps) => {
    const resolution = h.events("fork.resolved", (e) => e.threadId === h.forkThreadId)[0]?.resolution ?? "(none)";
    const policy = h.policies((e) => e.threadId === h.forkThreadId).includes("subagent_fork_synthetic");
    const told = (h.latestTurnOn(h.forkThreadId!)?.context ?? null) !== null;
    const ok = resolution === "portable" && policy && told && h.terminal(h.forkRunId ?? "")?.status === "completed";
    const seen = `fork ${resolution}, subagent_fork_synthetic ${policy}, context carried ${told}`;
    return absentOf(caps).map((f) => finding(f, ok, seen, seen));
  },
  subagentForkRefused: (h, caps) => {
    const ok = h.lastError?.code === "capability_unsupported";
    const seen = `refusal ${h.lastError?.code ?? "none"} (${h.lastError?.policy ?? "no policy"})`;
    return absentOf(caps).map((f) => finding(f, ok, seen, seen));
  },
  delegatedInline: (h, caps) => {
    const none = !subagentNode(h);
    const field = caps.subagents.supportsSubagents ? LIFECYCLE : SUPPORTS;
    return [finding(field, none, "ran in the parent turn: no subagent node", "a subagent node anyway")];
  },
  subagentWaited: (h) => {
    const outcome = h.lastReceipt as { status?: string } | null;
    if (h.waitSettledEarly)
      return [finding(WAIT, false, "", "the adapter's wait ended while the subagent still waited at its gate")];
    const ok = outcome?.status === "completed";
    const seen = `the wait ${h.lastError ? `was refused (${h.lastError.code})` : `ended ${outcome?.status}`}`;
    return [finding(WAIT, ok, seen, seen), completed(h, h.runId, WAIT)];
  },
  waitRefused: (h) => refusal(h, "subagent_wait_unsupported", [WAIT]),
  subagentClosed: (h) => {
    const node = subagentNode(h)!;
    const ended = h.events("node.completed", (e) => e.nodeId === node.nodeId)[0]?.status ?? "(running)";
    const ok = ended === "interrupted" && h.terminal(h.runId)?.status === "completed";
    const seen = `the subagent ended ${ended}, the run ${h.terminal(h.runId)?.status}`;
    return [finding(CLOSE, ok, seen, seen)];
  },
  closeRefused: (h) => refusal(h, "subagent_close_unsupported", [CLOSE]),
  subagentAsked: (h) => {
    const request = h.events("request.opened", (e) => e.runId === h.runId && e.payload.kind === "command")[0];
    const node = subagentNode(h);
    const under = !!request && !!node && ancestors(h, request.nodeId).includes(node.nodeId);
    // Never asked at all may be a provider that asks no command approval: that field's fault, where it is refuted.
    if (!request)
      return [{ field: ASKS, ok: false, observed: "never asked", unlessRefuted: "approvals.supportsCommandApproval" }];
    return [finding(ASKS, under, "asked from inside the subagent", "asked outside it")];
  },
  subagentApproved: (h) => [completed(h, h.runId, ASKS)],
  subagentUnasked: (h, caps) => {
    // Only where this field alone keeps the subagent from asking is its absence shown.
    if (claims(caps.approvals.approvalsCanOriginateFromSubagents) || !subagentGuards.delegates(caps)) return [];
    if (!caps.approvals.supportsCommandApproval) return [];
    const asked = h.events("request.opened", (e) => e.runId === h.runId).length > 0;
    const ok = !asked && h.terminal(h.runId)?.status === "completed";
    return [finding(ASKS, ok, "the subagent ran under the sandbox without asking", "asked, or did not complete")];
  },
};
