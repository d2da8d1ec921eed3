import type { Catalog, GraphState, GraphTransition, MachineGraph } from "./protocol.js";

/** The parts of an XState v5 state node the graph reads (structural: no xstate import needed). */
interface StateNodeLike {
  key: string;
  path: string[];
  type: string;
  initial?: { target?: ReadonlyArray<{ path: string[] }> } | undefined;
  states: Record<string, StateNodeLike>;
  transitions: Map<string, ReadonlyArray<TransitionLike>>;
  always?: ReadonlyArray<TransitionLike> | undefined;
}
interface TransitionLike {
  eventType: string;
  target?: ReadonlyArray<{ path: string[] }> | undefined;
  guard?: unknown;
}
export interface MachineLike {
  id: string;
  root: StateNodeLike;
}
type Predicate = (caps: any, ...rest: any[]) => unknown;

/**
 * The capability paths a predicate reads, found by calling it on a record that notes every
 * property read. Guards are named after the predicate they wrap (`canSteerNatively`), so the
 * page can say which capability each guarded transition depends on.
 */
export function capabilityReads(predicate: Predicate): string[] {
  const seen = new Set<string>();
  const probe = (path: string[]): unknown =>
    new Proxy(() => true, {
      get(_target, key) {
        if (typeof key === "symbol") return key === Symbol.toPrimitive ? () => path.join(".") : undefined;
        const next = [...path, key];
        seen.add(next.join("."));
        return probe(next);
      },
    });
  try {
    predicate(probe([]), true, true, true);
  } catch {
    // A predicate that does arithmetic on the probe still reported what it read before failing.
  }
  // Keep leaves only: "turns.supportsInterrupt", not "turns".
  return [...seen].filter((p) => ![...seen].some((q) => q.startsWith(`${p}.`))).sort();
}

function guardName(guard: unknown): string | null {
  if (guard === undefined || guard === null) return null;
  if (typeof guard === "string") return guard;
  if (typeof guard === "function") {
    const parts = (guard as { guards?: unknown[] }).guards;
    const op = guard.name === "not" ? "!" : guard.name === "or" ? " || " : " && ";
    if (Array.isArray(parts)) {
      const names = parts.map(guardName).filter((n): n is string => n !== null);
      return guard.name === "not" ? `!${names[0] ?? "?"}` : names.join(op);
    }
    return guard.name || "guard";
  }
  if (typeof guard === "object" && "type" in guard) {
    const { type, params } = guard as { type: string; params?: unknown };
    if (params === undefined) return type;
    const values =
      params && typeof params === "object"
        ? Object.values(params).map((v) => (typeof v === "string" ? v : JSON.stringify(v)))
        : [JSON.stringify(params)];
    return `${type}(${values.join(", ")})`;
  }
  return "guard";
}

/** Base names of the guards in a composite guard label, to look up what they read. */
const guardBases = (label: string): string[] =>
  label
    .split(/\s*(?:&&|\|\||!)\s*/)
    .map((s) => s.replace(/\(.*$/, "").trim())
    .filter(Boolean);

export function machineGraph(machine: MachineLike, predicates: Record<string, Predicate>): MachineGraph {
  const states: GraphState[] = [];
  const transitions: GraphTransition[] = [];
  const readsOf = (guard: string | null) =>
    guard
      ? [
          ...new Set(
            guardBases(guard).flatMap((g) =>
              typeof predicates[g] === "function" ? capabilityReads(predicates[g]) : [],
            ),
          ),
        ]
      : [];
  const walk = (node: StateNodeLike, parent: StateNodeLike | null) => {
    const path = node.path.join(".");
    const initialOfParent = parent?.initial?.target?.some((t) => t.path.join(".") === path) ?? false;
    states.push({
      path,
      key: node.key,
      parent: parent ? parent.path.join(".") : null,
      type: node.type,
      initial: initialOfParent,
    });
    const add = (event: string, t: TransitionLike) => {
      const guard = guardName(t.guard);
      const targets = t.target && t.target.length > 0 ? t.target.map((s) => s.path.join(".")) : [null];
      for (const target of targets) transitions.push({ source: path, target, event, guard, reads: readsOf(guard) });
    };
    for (const [event, list] of node.transitions) for (const t of list) add(event, t);
    for (const t of node.always ?? []) add("always", t);
    for (const child of Object.values(node.states)) walk(child, node);
  };
  walk(machine.root, null);
  return { id: machine.id, states, transitions };
}

export function buildCatalog(input: {
  machines: Record<string, MachineLike>;
  predicates: Record<string, unknown>;
  degradations: Catalog["degradations"];
}): Catalog {
  const predicates = Object.fromEntries(
    Object.entries(input.predicates).filter((e): e is [string, Predicate] => typeof e[1] === "function"),
  );
  const machines = Object.fromEntries(
    Object.entries(input.machines).map(([name, m]) => [name, machineGraph(m, predicates)]),
  );
  return { machines, degradations: structuredClone(input.degradations) };
}
