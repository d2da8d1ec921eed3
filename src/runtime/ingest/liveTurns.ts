import type { DomainEvent } from "../../domain/events.js";
import type { NodeEntry, TurnBinding } from "./correlation.js";

/**
 * What the log says of the turns still open at its end: each attempt's nodes in the order the
 * normalizer made them (their ids are derived from that order), which are still open, the
 * requests it asked and the subagent threads it bound. Enough for the normalizer to take a turn
 * up again where a host outlived the runtime (see `Normalizer.restoreTurn`). Folded with the
 * projections (so a projection snapshot holds it too); a finished attempt's trail is dropped as it ends.
 */
export interface TurnTrail {
  nodes: NodeEntry[];
  requests: TurnBinding["requests"];
  childThreads: Map<string, string>;
}

export interface LiveTurns {
  fold(event: DomainEvent): void;
  /** The trail of an attempt the log has not ended. */
  trail(attemptId: string): TurnTrail | undefined;
  /** What it holds: kept in projection snapshots, given back to `trackLiveTurns`. */
  readonly state: LiveTurnsState;
}

export interface LiveTurnsState {
  trails: Map<string, TurnTrail>;
  attemptOfNode: Map<string, string>;
  attemptOfRequest: Map<string, string>;
  attemptsOfRun: Map<string, Set<string>>;
}

export function emptyLiveTurns(): LiveTurnsState {
  return { trails: new Map(), attemptOfNode: new Map(), attemptOfRequest: new Map(), attemptsOfRun: new Map() };
}

export function trackLiveTurns(state: LiveTurnsState = emptyLiveTurns()): LiveTurns {
  const { trails, attemptOfNode, attemptOfRequest, attemptsOfRun } = state;
  // A turn's nodes by id, made on first use (a trail loaded from a snapshot has none yet): a turn of thousands of items
  // would otherwise be searched from its first node at every start and end.
  const nodeIndexes = new WeakMap<TurnTrail, Map<string, NodeEntry>>();
  const nodeIn = (trail: TurnTrail, nodeId: string): NodeEntry | undefined => {
    let index = nodeIndexes.get(trail);
    if (!index) nodeIndexes.set(trail, (index = new Map(trail.nodes.map((n) => [n.nodeId, n]))));
    return index.get(nodeId);
  };

  const forget = (attemptId: string) => {
    const trail = trails.get(attemptId);
    trails.delete(attemptId);
    trail?.nodes.forEach((n) => attemptOfNode.delete(n.nodeId));
    trail?.requests.forEach((r) => attemptOfRequest.delete(r.requestId));
  };
  const trailOfNode = (nodeId: string) => trails.get(attemptOfNode.get(nodeId) ?? "");

  return {
    fold(event) {
      switch (event.type) {
        case "node.started": {
          const { attemptId, nodeId } = event;
          let trail = trails.get(attemptId);
          if (!trail) {
            trail = { nodes: [], requests: [], childThreads: new Map() };
            trails.set(attemptId, trail);
            attemptsOfRun.set(event.runId, (attemptsOfRun.get(event.runId) ?? new Set()).add(attemptId));
          }
          const known = nodeIn(trail, nodeId);
          const parentId = event.parentNodeId ?? undefined;
          // Announced again (its start came after its first delta): one node, as the normalizer keeps it.
          if (known) return void (known.parentId = parentId);
          const node: NodeEntry = {
            nodeId,
            kind: event.kind,
            ref: event.nativeRef,
            open: true,
            announced: true,
            parentId,
          };
          trail.nodes.push(node);
          nodeIndexes.get(trail)?.set(nodeId, node);
          attemptOfNode.set(nodeId, attemptId);
          return;
        }
        case "node.completed": {
          const trail = trailOfNode(event.nodeId);
          const node = trail && nodeIn(trail, event.nodeId);
          if (node) node.open = false;
          return;
        }
        case "request.opened": {
          const attemptId = attemptOfNode.get(event.nodeId);
          if (!attemptId) return;
          trails.get(attemptId)!.requests.push({
            requestId: event.requestId,
            nodeId: event.nodeId,
            ref: event.nativeRef,
            open: true,
          });
          attemptOfRequest.set(event.requestId, attemptId);
          return;
        }
        case "request.resolved":
        case "request.closed": {
          const trail = trails.get(attemptOfRequest.get(event.requestId) ?? "");
          const request = trail?.requests.find((r) => r.requestId === event.requestId);
          if (request) request.open = false;
          return;
        }
        case "subagent.thread_bound":
          return void trailOfNode(event.nodeId)?.childThreads.set(event.nativeThreadRef, event.nodeId);
        case "attempt.terminal":
          return forget(event.attemptId);
        case "run.terminal":
          attemptsOfRun.get(event.runId)?.forEach(forget);
          attemptsOfRun.delete(event.runId);
          return;
        default:
          return;
      }
    },
    trail: (attemptId) => trails.get(attemptId),
    state,
  };
}
