import type { ProviderCapabilities } from "../index.js";
import { declared, VERDICT_RESTS_ON, type Finding } from "./findings.js";
import { Harness } from "./harness.js";
import { generatePaths } from "./model.js";
import { buildReport, fieldNames, type ConformanceReport } from "./report.js";
import { inPool, runPath } from "./runner.js";
import type { ConformanceWorld } from "./world.js";

/**
 * `tiller/conformance`: proves an adapter against the capability record it declares. The seed for provider
 * integration says: do not advertise a capability until it is verified; this makes that mechanical, for any adapter.
 *
 * `runConformance({ world })` opens a real runtime on the world's adapter and reads the record the adapter declares at
 * session start (what its `startSession` returns, announced as `session.started`); a field its `getCapabilities()`
 * gives otherwise is refuted. From it, the conformance model (`model.ts`, written from the capability
 * seed) generates with `xstate/graph` the shortest path to every outcome the record promises: native steering or the
 * `steer_by_interrupt_restart` degradation or a refusal, native interrupt or its refusal, queued messages, approvals
 * of each kind, structured artifacts or their text degradations, native or synthetic forks (whole thread, from a
 * turn, from a subagent) or their refusal, provider rollback or the divergent degradation or its refusal, resume in a
 * new session, turn terminals or idle inference, tool items and streaming, subagents waited for or closed, model and
 * mode switches in session or by a new one, threads sharing a session, provider switches and the return by delta or
 * fresh thread, snapshots read and returned by a rollback, a restart with a request pending, MCP tools and tool
 * call-backs. Where the declared record never lets the runtime take a way the record also claims (a second delivery
 * of context, steering by interrupt-restart beside native steering), a narrowed path shows the runtime less than the
 * record and proves that field alone. Each path runs in a fresh runtime against the real adapter; each state's check
 * (`checks.ts` and the part files it gathers) reads what the seed says must be observable and gives the fields it
 * exercises a finding, on what a user sees and on the provider's own evidence (`WorldRun.lastTurn`, `turns`).
 *
 * Over every path, whatever it was for, the runtime's own evidence and the provider's ids are read (`evidence.ts`): a
 * request of a kind the record denies (declined, `undeclared_request_declined`), events streamed that the record says
 * never are, events after a turn's terminal, and strong ids that name two things or change between start and
 * completion, or across a resume or a snapshot read. Each refutes the field the record broke.
 *
 * Blame stays on the field the evidence names (`runner.ts`): a step that fails is checked on what it observed, and
 * only where nothing names a field is the step's own blamed; the steps after it are reported skipped, not refuted.
 * Every wait is bounded by `timeoutMs` and every call by twice that, so a hanging adapter costs one step. `fields`
 * runs only the paths that exercise the fields named; `parallel` runs paths side by side.
 *
 * The report counts the fields the record claims (N: booleans declared true, identities and terminal quality
 * declared `strong` or `weak`, numbers): how many were verified, refuted, or not exercisable (with the reason). Fields
 * declared false (or `none`) are checked for the degradation their absence implies and reported beside. A refuted
 * field, claimed or not, fails the report (`ok: false`; `assertConformance` throws).
 *
 * Each path's runtime is opened with defaults a user would have (no destructive session-stop interrupts, no turn
 * watchdog; app checkpoints where the path rolls back), with two targets on the world's provider (for provider
 * switches), on a temporary data directory and working directory, with no inspector.
 *
 * ```ts
 * import { assertConformance, runConformance, scriptedWorld } from "tiller-runtime/conformance";
 *
 * const world = scriptedWorld({ capabilities: { turns: { supportsInterrupt: false } } });
 * const report = await runConformance({ world });
 * console.log(report.summary); // conformance: scripted declared N, verified V, refuted 0, not exercisable X; ...
 * console.log(report.table); // one line per field: declared value, verdict, what was seen or why not
 * assertConformance(report);
 * ```
 *
 * A provider of your own brings a `ConformanceWorld` (`world.ts`): `scriptedWorld.ts` is the worked example.
 */

export type * from "./world.js";
export type { ConformanceReport, FieldVerdict, Verdict } from "./report.js";
export type { Finding } from "./findings.js";
export { scriptedWorld, type ScriptedWorldOptions } from "./scriptedWorld.js";
export * from "./simulatorWorld.js";

export interface ConformanceOptions {
  world: ConformanceWorld;
  /** How long any one wait (a run to end, a request to open) may take before the step fails. Default 15 s. */
  timeoutMs?: number;
  /** Told each path as it ends (progress). */
  onPath?: (path: { events: string[]; error: string | null }) => void;
  /**
   * Run only the paths that exercise these dotted fields (`turns.supportsInterrupt`, `primitive.resume`); the report
   * still lists every field, those no selected path reached as not exercisable. Default: every path.
   */
  fields?: string[];
  /**
   * Run only the paths this accepts, given the model events each path takes (`["HOLD", "INTERRUPT"]`); with `fields`,
   * a path must pass both. Default: every path.
   */
  paths?: (events: string[]) => boolean;
  /** How many paths run at once (each in its own runtime). Default: the world's `parallel`, else 1. */
  parallel?: number;
}

/**
 * Reads the record the adapter declares at session start (what `startSession` returns, announced as `session.started`):
 * a text turn on a fresh runtime. The record `getCapabilities()` gives before any session must be the same: each field
 * where the two differ is refuted (the runtime decides some things before a session starts).
 */
async function declaredRecord(
  world: ConformanceWorld,
  timeoutMs: number,
): Promise<{ caps: ProviderCapabilities; findings: Finding[] }> {
  const h = await Harness.open(await world.open(), timeoutMs);
  try {
    const runId = await h.send({ kind: "text", text: "hello" });
    if (!runId) throw new Error(`the first message was refused: ${h.lastError?.code}: ${h.lastError?.message}`);
    await h.until("the session to start", () => h.events("session.started").length > 0);
    await h.untilTerminal(runId);
    const caps = h.events("session.started")[0]!.capabilities;
    const before = h.callsOf("getCapabilities").map((c) => c.result as ProviderCapabilities);
    const findings = fieldNames(caps).flatMap((field) => {
      const other = before.map((record) => declared(record, field)).find((v) => v !== declared(caps, field));
      if (other === undefined) return [];
      const now = JSON.stringify(declared(caps, field));
      const said = `getCapabilities() says ${JSON.stringify(other)}, the session announced ${now}`;
      return [{ field, ok: false, observed: said }];
    });
    return { caps, findings };
  } finally {
    await h.close();
  }
}

/** Runs the conformance suite for the world's adapter. */
export async function runConformance(options: ConformanceOptions): Promise<ConformanceReport> {
  const { world } = options;
  const timeoutMs = options.timeoutMs ?? 15_000;
  const { caps, findings: announced } = await declaredRecord(world, timeoutMs);
  // A field's verdict may rest on another's (a refutation that stands unless that one is verified): both run.
  const wanted = options.fields ? new Set(options.fields.flatMap((f) => [f, ...(VERDICT_RESTS_ON[f] ?? [])])) : null;
  const selected = generatePaths({ caps, scripts: world.scripts }).filter(
    (path) =>
      (!wanted || path.fields.some((f) => wanted.has(f))) &&
      (!options.paths || options.paths(path.steps.map((s) => s.event))),
  );
  const results = await inPool(selected, options.parallel ?? world.parallel ?? 1, async (path) => {
    const result = await runPath(world, caps, path, timeoutMs);
    const entry = { events: path.steps.map((s) => s.event), error: result.error };
    options.onPath?.(entry);
    return { entry, findings: result.findings };
  });
  const findings: Finding[] = [...announced, ...results.flatMap((r) => r.findings)];
  const paths: ConformanceReport["paths"] = results.map((r) => r.entry);
  return buildReport(world.name, caps, world.scripts, findings, paths);
}

/** Throws when the report refutes a field (claimed or not) or the resume primitive, naming each with what was seen. */
export function assertConformance(report: ConformanceReport): void {
  if (report.ok) return;
  const refuted = report.fields.filter((f) => f.verdict === "refuted");
  throw new Error(
    `${report.summary}\n` +
      refuted.map((f) => `  ${f.field} (declared ${JSON.stringify(f.declared)}): ${f.detail}`).join("\n"),
  );
}
