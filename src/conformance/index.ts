import type { ProviderCapabilities } from "../index.js";
import { checks } from "./checks.js";
import type { Finding } from "./findings.js";
import { drives } from "./drive.js";
import { Harness } from "./harness.js";
import { generatePaths, type ModelPath } from "./model.js";
import { buildReport, type ConformanceReport } from "./report.js";
import type { ConformanceWorld } from "./world.js";

/**
 * `tiller/conformance`: proves an adapter against the capability record it declares. The seed for provider
 * integration says: do not advertise a capability until it is verified; this makes that mechanical, for any adapter.
 *
 * `runConformance({ world })` opens a real runtime on the world's adapter and reads the record the adapter declares at
 * session start (the `session.started` event). From it, the conformance model (`model.ts`, written from the capability
 * seed) generates with `xstate/graph` the shortest path to every outcome the record promises: native steering or the
 * `steer_by_interrupt_restart` degradation or a refusal, native interrupt or its refusal, queued messages, approvals
 * of each kind, structured artifacts or their text degradations, native or synthetic forks (whole thread, from a
 * turn, from a subagent) or their refusal, provider rollback or the divergent degradation or its refusal, resume in a
 * new session, turn terminals or idle inference, tool items and streaming, subagents waited for or closed, model and
 * mode switches in session or by a new one, threads sharing a session, provider switches and the return by delta or
 * fresh thread. Each path runs in a fresh runtime against the real adapter; each state's check (`checks.ts` and the
 * part files it gathers) reads what the seed says must be observable and gives the fields it exercises a finding.
 *
 * The report counts the fields the record claims (N: booleans declared true, identities and terminal quality
 * declared `strong` or `weak`, numbers): how many were verified, refuted, or not exercisable (with the reason). Fields
 * declared false (or `none`) are checked for the degradation their absence implies and reported beside. A refuted
 * field, claimed or not, fails the report (`ok: false`; `assertConformance` throws).
 *
 * Each path's runtime is opened with defaults a user would have (no destructive session-stop interrupts, app
 * checkpoints on, no turn watchdog), with two targets on the world's provider (for provider switches), on a temporary
 * data directory and working directory, with no inspector.
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
}

/** Reads the record the adapter declares at session start: a text turn on a fresh runtime, its `session.started`. */
async function declaredRecord(world: ConformanceWorld, timeoutMs: number): Promise<ProviderCapabilities> {
  const h = await Harness.open(await world.open(), timeoutMs);
  try {
    const runId = await h.send({ kind: "text", text: "hello" });
    if (!runId) throw new Error(`the first message was refused: ${h.lastError?.code}: ${h.lastError?.message}`);
    await h.until("the session to start", () => h.events("session.started").length > 0);
    await h.untilTerminal(runId);
    return h.events("session.started")[0]!.capabilities;
  } finally {
    await h.close();
  }
}

async function runPath(
  world: ConformanceWorld,
  caps: ProviderCapabilities,
  path: ModelPath,
  timeoutMs: number,
): Promise<{ findings: Finding[]; error: string | null }> {
  const findings: Finding[] = [];
  let h: Harness | null = null;
  let index = 0;
  try {
    h = await Harness.open(await world.open(), timeoutMs);
    for (; index < path.steps.length; index++) {
      const step = path.steps[index]!;
      await drives[step.event]!(h);
      await h.settle();
      if (h.lastError && !step.refusal) throw new Error(`refused: ${h.lastError.code}: ${h.lastError.message}`);
      findings.push(...(checks[step.state]?.(h, caps) ?? []));
    }
    return { findings, error: null };
  } catch (error) {
    const message = error instanceof Error ? error.message : String(error);
    const where = path.steps[index] ? `${path.steps[index]!.event} -> ${path.steps[index]!.state}` : "opening";
    // What the failing step and the steps after it would have shown is refuted by the failure.
    const failed = new Set(path.steps.slice(index).flatMap((s) => s.fields));
    for (const field of failed) findings.push({ field, ok: false, observed: `${where}: ${message}` });
    return { findings, error: `${where}: ${message}` };
  } finally {
    await h?.close().catch(() => undefined);
  }
}

/** Runs the conformance suite for the world's adapter. */
export async function runConformance(options: ConformanceOptions): Promise<ConformanceReport> {
  const { world } = options;
  const timeoutMs = options.timeoutMs ?? 15_000;
  const caps = await declaredRecord(world, timeoutMs);
  const findings: Finding[] = [];
  const paths: ConformanceReport["paths"] = [];
  for (const path of generatePaths({ caps, scripts: world.scripts })) {
    const result = await runPath(world, caps, path, timeoutMs);
    findings.push(...result.findings);
    const entry = { events: path.steps.map((s) => s.event), error: result.error };
    paths.push(entry);
    options.onPath?.(entry);
  }
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
