import { setup, type AnyStateMachine, type MachineSnapshot } from "xstate";
import { getSimplePaths } from "xstate/graph";
import { DEGRADATIONS, POLICY_NAMES, type PolicyName, type RuntimeOptions } from "../../src/index.js";
import { logViolations, settledViolations } from "./invariants.js";
import { SEED_FIELDS } from "./seed.js";
import { World, type Flags } from "./world.js";

/**
 * Model-based testing of the degradation policies. Each policy has a model: a state machine
 * whose events are what a user or the provider does (send, steer, finish a turn, fork,
 * roll back...) and whose guards read the capability record through the same predicates
 * the runtime's machines use. For every combination of the flags the policy reads,
 * `xstate/graph` generates the model's paths; each path is replayed against the real runtime
 * with scripted providers configured with that combination. After every step the runtime
 * must be in the state the model says, have recorded exactly the degradations the model
 * expects (by name), and satisfy the domain invariants.
 */

export interface StepExpectation {
  /** Wait until this holds after the step's action. */
  until?: (w: World) => boolean;
  /** The degradations this step records, exactly (none when omitted). */
  policies?: PolicyName[] | ((w: World) => PolicyName[]);
  /** The step's command was refused with this error code. */
  refused?: string;
  check?: (w: World) => void | Promise<void>;
}

export interface ModelContext {
  flags: Flags;
}

export interface PolicyModel {
  name: string;
  /** The flags the policy reads (`<target>.<group>.<field>` or `runtime.<option>`), with the values to combine. */
  reads: Record<string, readonly (boolean | string | number | null)[]>;
  targets?: string[];
  machine: AnyStateMachine;
  drive: Record<string, (w: World) => Promise<void>>;
  options?: (flags: Flags) => Partial<RuntimeOptions>;
  /** Opens the world for a path (default: a fresh runtime and one thread on the first target). */
  open?: (flags: Flags) => Promise<World>;
}

/** A model machine: `idle` first; every state may carry `meta.expect`. Guards get the combination's flags. */
export function modelMachine(
  id: string,
  guards: Record<string, (flags: Flags) => boolean>,
  states: Record<string, unknown>,
): AnyStateMachine {
  const wrapped = Object.fromEntries(
    Object.entries(guards).map(([name, fn]) => [name, ({ context }: { context: ModelContext }) => fn(context.flags)]),
  );
  return setup({ types: { context: {} as ModelContext, input: {} as ModelContext }, guards: wrapped }).createMachine({
    id,
    context: ({ input }) => input,
    initial: "idle",
    states: states as Record<string, object>,
  }) as unknown as AnyStateMachine;
}

export function combinations(reads: PolicyModel["reads"]): Flags[] {
  return Object.entries(reads).reduce<Flags[]>(
    (acc, [key, values]) => acc.flatMap((flags) => values.map((v) => ({ ...flags, [key]: v }))),
    [{}],
  );
}

export interface PathResult {
  model: string;
  flags: Flags;
  events: string[];
  observed: PolicyName[];
  error: string | null;
}

/** The model's complete paths (to a final state) for one combination. */
export function pathsOf(model: PolicyModel, flags: Flags) {
  const events = Object.keys(model.drive).map((type) => ({ type }));
  return getSimplePaths(model.machine, { input: { flags }, events, toState: (s) => s.status === "done" });
}

function expectationOf(state: MachineSnapshot<any, any, any, any, any, any, any, any>): StepExpectation {
  const meta = state.getMeta() as Record<string, { expect?: StepExpectation } | undefined>;
  return Object.values(meta).reduce<StepExpectation>((acc, m) => ({ ...acc, ...m?.expect }), {});
}

const sorted = (names: readonly string[]) => [...names].sort().join(",") || "(none)";

/** Replays one path against a real runtime; returns the degradations it observed, or the first failure. */
export async function runPath(
  model: PolicyModel,
  flags: Flags,
  steps: Array<{ state: any; event: { type: string } }>,
): Promise<PathResult> {
  const events = steps.map((s) => s.event.type).filter((t) => !t.startsWith("xstate."));
  const result: PathResult = { model: model.name, flags, events, observed: [], error: null };
  let world: World | null = null;
  try {
    world = model.open
      ? await model.open(flags)
      : await World.open(flags, model.targets ?? ["main"], model.options?.(flags) ?? {});
    if (!world.threadId) await world.createThread(model.targets?.[0] ?? "main");
    let first = true;
    for (const step of steps) {
      if (step.event.type.startsWith("xstate.")) continue;
      const where = `${step.event.type} -> ${JSON.stringify(step.state.value)}`;
      // The first step also answers for what opening the world recorded (a recovery, say).
      const before = first ? 0 : world.head;
      first = false;
      world.lastError = null;
      await model.drive[step.event.type]!(world);
      const expect = expectationOf(step.state);
      if (expect.until) await world.until(where, () => expect.until!(world!));
      await world.settle();
      const wanted = typeof expect.policies === "function" ? expect.policies(world) : (expect.policies ?? []);
      const got = world.policiesSince(before);
      if (sorted(got) !== sorted(wanted))
        throw new Error(`${where}: recorded degradations ${sorted(got)}, the model expects ${sorted(wanted)}`);
      const refused = (world.lastError as { code: string } | null)?.code ?? null;
      if (refused !== (expect.refused ?? null))
        throw new Error(`${where}: refusal ${refused ?? "none"}, the model expects ${expect.refused ?? "none"}`);
      await expect.check?.(world);
      const broken = logViolations(world.records);
      if (broken.length > 0) throw new Error(`${where}: invariant violated: ${broken.join("; ")}`);
    }
    await world.close();
    const broken = [...logViolations(world.records), ...settledViolations(world.rt)];
    if (broken.length > 0) throw new Error(`after close: invariant violated: ${broken.join("; ")}`);
  } catch (error) {
    result.error = error instanceof Error ? error.message : String(error);
    await world?.close().catch(() => undefined);
  }
  result.observed = [...new Set(world?.policiesSince(0) ?? [])] as PolicyName[];
  return result;
}

export interface SuiteReport {
  lines: string[];
  failures: PathResult[];
  covered: number;
  total: number;
}

/** Runs every path of every model over every combination, and reports per policy and per degradation. */
export async function runSuite(models: PolicyModel[], onPath?: (r: PathResult) => void): Promise<SuiteReport> {
  const results: PathResult[] = [];
  const lines: string[] = [];
  for (const model of models) {
    const combos = combinations(model.reads);
    let paths = 0;
    for (const flags of combos) {
      for (const path of pathsOf(model, flags)) {
        const r = await runPath(model, flags, path.steps as never);
        paths += 1;
        results.push(r);
        onPath?.(r);
      }
    }
    const failed = results.filter((r) => r.model === model.name && r.error).length;
    lines.push(
      `${model.name.padEnd(16)} reads ${Object.keys(model.reads).join(", ")}: ` +
        `${combos.length} combinations, ${paths} paths${failed ? `, ${failed} FAILED` : ""}`,
    );
  }
  lines.push("", `${"degradation transition".padEnd(28)} ${"capability".padEnd(44)} paths`);
  let covered = 0;
  for (const name of POLICY_NAMES) {
    const count = results.filter((r) => !r.error && r.observed.includes(name)).length;
    if (count > 0) covered += 1;
    lines.push(`${name.padEnd(28)} ${DEGRADATIONS[name].capability.padEnd(44)} ${count}`);
  }
  return { lines, failures: results.filter((r) => r.error), covered, total: POLICY_NAMES.length };
}

/** What a step's state expects, as far as it can be read without a world (policies that read only the flags). */
function staticExpectation(state: MachineSnapshot<any, any, any, any, any, any, any, any>, flags: Flags) {
  const expect = expectationOf(state);
  let policies: readonly string[] = [];
  try {
    policies = typeof expect.policies === "function" ? expect.policies({ flags } as World) : (expect.policies ?? []);
  } catch {
    policies = ["(read from the world)"];
  }
  return { policies: [...policies].sort(), refused: expect.refused ?? null };
}

/** A path as the model expects it: each step's event, the state it reaches, the degradations and refusal there. */
function describePath(steps: Array<{ state: any; event: { type: string } }>, flags: Flags): string {
  return steps
    .filter((s) => !s.event.type.startsWith("xstate."))
    .map((s) => {
      const { policies, refused } = staticExpectation(s.state, flags);
      const notes = [...policies, ...(refused ? [`refused ${refused}`] : [])];
      return `${s.event.type} → ${JSON.stringify(s.state.value)}${notes.length ? ` [${notes.join(", ")}]` : ""}`;
    })
    .join("; ");
}

/** The degradations some generated path of some model expects (the paths are replayed, so they are also observed). */
export function expectedDegradations(models: PolicyModel[]): Set<string> {
  const names = new Set<string>();
  for (const model of models)
    for (const flags of combinations(model.reads))
      for (const path of pathsOf(model, flags))
        for (const step of path.steps) for (const p of staticExpectation(step.state, flags).policies) names.add(p);
  return names;
}

export interface FieldGovernance {
  field: string;
  /** How flipping the field changes a model's expected path, or null when no model shows a change. */
  shownBy: { model: string; flag: string; from: string; to: string; path: string; instead: string } | null;
}

/**
 * For every field of the seed's record: a model that reads it and a generated path that
 * changes when only that field flips (a different state, degradation or refusal). Every path
 * is replayed against the real runtime, so the change is the runtime's behaviour, not the model's.
 */
export function fieldGovernance(models: PolicyModel[]): FieldGovernance[] {
  return SEED_FIELDS.map((field) => ({ field, shownBy: firstChange(models, field) }));
}

function firstChange(models: PolicyModel[], field: string): FieldGovernance["shownBy"] {
  for (const model of models) {
    for (const flag of Object.keys(model.reads).filter((k) => k.split(".").slice(1).join(".") === field)) {
      for (const flags of combinations(model.reads)) {
        const mine = pathsOf(model, flags).map((p) => describePath(p.steps as never, flags));
        for (const other of model.reads[flag]!.filter((v) => v !== flags[flag])) {
          const flipped = { ...flags, [flag]: other };
          const theirs = pathsOf(model, flipped).map((p) => describePath(p.steps as never, flipped));
          const changed = mine.find((p) => !theirs.includes(p));
          if (changed === undefined) continue;
          const instead = closest(theirs, changed);
          return { model: model.name, flag, from: String(flags[flag]), to: String(other), path: changed, instead };
        }
      }
    }
  }
  return null;
}

/** The path that shares the longest run of events with `path` (where the flipped field sends it elsewhere). */
function closest(paths: string[], path: string): string {
  const events = (p: string) => p.split("; ").map((step) => step.split(" → ")[0]);
  const shared = (p: string) => {
    const [a, b] = [events(p), events(path)];
    let n = 0;
    while (n < a.length && a[n] === b[n]) n += 1;
    return n;
  };
  return paths.reduce((best, p) => (shared(p) > shared(best) ? p : best), paths[0] ?? "(no path)");
}
