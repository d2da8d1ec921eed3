import { isTerminalRunStatus, Projections, type RunView, type TurnItem } from "./projections.js";

/**
 * Which runs a thread's conversation holds, read from the log's projection: its own settled runs up to a point, after
 * what it inherited from the thread it was forked from (or the subagent it was forked from, told as one run).
 */

/**
 * Everything the app thread's conversation consists of, oldest first: for a fork, its
 * parent's history up to the fork point, then its own settled runs that reached a provider.
 */
export function historyRuns(
  views: Projections,
  threadId: string,
  upToRunId?: string | null,
  asOfSeq?: number,
): RunView[] {
  const thread = views.threads.get(threadId)!;
  // A run whose turn never reached a provider (its send failed) is not part of any conversation.
  // Rolled-back runs are no longer part of it either, except for a fork made before the rollback.
  const standing = (r: RunView) =>
    r.status !== "rolled_back" || (asOfSeq !== undefined && (views.rolledBackAt.get(r.runId) ?? 0) > asOfSeq);
  const settled = thread.runs.filter(
    (r) => isTerminalRunStatus(r.status) && standing(r) && r.attempts.some((a) => a.providerTurnId !== null),
  );
  // Up to the fork point by its place in the thread: the point's own run may have never reached a provider.
  const upTo = upToRunId === undefined ? Infinity : upToRunId === null ? 0 : (views.runs.get(upToRunId)?.ordinal ?? 0);
  const cut = settled.filter((r) => r.ordinal <= upTo).length;
  const lineage = thread.lineage?.relation === "fork" ? thread.lineage : null;
  const transfer = views.transfers.get(threadId);
  // A subagent's fork inherits the subagent's conversation, not its parent's runs.
  const inherited = transfer?.fromSubagentNodeId
    ? [subagentRun(views, transfer.forkedFromRunId, transfer.fromSubagentNodeId)].filter((r) => r !== undefined)
    : lineage
      ? historyRuns(views, lineage.parentThreadId, lineage.forkedFromRunId, transfer?.seq)
      : [];
  return [...inherited, ...settled.slice(0, cut)];
}

/**
 * A subagent's conversation told as a run (its id the subagent's node): its prompt as the user's text, its children's
 * items, its result last. What a portable fork of the subagent carries.
 */
export function subagentRun(views: Projections, runId: string | null, nodeId: string): RunView | undefined {
  const run = runId ? views.runs.get(runId) : undefined;
  const node = views.item(nodeId);
  if (!run || !node || !run.items.includes(node)) return undefined;
  // Its children at any depth: a parent's item always comes before its own children's.
  const within = new Set([nodeId]);
  const items: TurnItem[] = [];
  for (const item of run.items) {
    if (item.parentId === null || !within.has(item.parentId)) continue;
    within.add(item.id);
    items.push(item);
  }
  const prompt = (node.detail as { input?: unknown } | undefined)?.input;
  const result = node.result
    ? [{ ...node, id: `${nodeId}:result`, kind: "assistant_message" as const, text: `\n${node.result}` }]
    : [];
  const status = node.detail?.status;
  return {
    ...run,
    runId: nodeId,
    status: status === "failed" || status === "interrupted" ? status : "completed",
    text: typeof prompt === "string" ? prompt : "(the subagent's prompt is unknown)",
    items: [...items, ...result],
    fallbacks: [],
  };
}
