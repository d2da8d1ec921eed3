import type { ProviderCapabilities } from "../index.js";
import { checks } from "./checks.js";
import { drives } from "./drive.js";
import { pathEvidence } from "./evidence.js";
import type { Finding } from "./findings.js";
import { Harness } from "./harness.js";
import type { ModelPath } from "./model.js";
import type { ConformanceWorld } from "./world.js";

/**
 * Runs one generated path in a fresh runtime against the world's adapter, and turns what it saw into findings.
 *
 * Blame stays where the evidence is. A step that fails (a refusal the record does not imply, a wait that timed out)
 * is checked anyway, on what it did observe: the fields its check refutes are the ones blamed. Only where neither
 * that check nor the runtime's own evidence (`evidence.ts`) names a field are the step's own fields (its `blame`)
 * refuted. The steps after it are not run: their fields are reported skipped, saying where the path stopped, and are
 * left to the other paths that reach them.
 *
 * Every step is bounded: a wait times out after `timeoutMs`, and a call that never settles (an adapter that hangs)
 * fails the step after twice that; closing a path's runtime is bounded alike, so a hang costs one step, not the run.
 */

export interface PathResult {
  findings: Finding[];
  error: string | null;
}

class StepTimeout extends Error {}

/** `promise`, or a StepTimeout after `ms` (the promise is left to settle on its own). */
function bounded<T>(promise: Promise<T>, ms: number, what: string): Promise<T> {
  let timer: NodeJS.Timeout | undefined;
  const timeout = new Promise<never>((_, reject) => {
    timer = setTimeout(() => reject(new StepTimeout(`${what} did not settle within ${ms} ms`)), ms);
  });
  return Promise.race([promise, timeout]).finally(() => clearTimeout(timer));
}

const messageOf = (error: unknown) => (error instanceof Error ? error.message : String(error));

/** The refuted fields of a check run on what a failed step observed (a check that throws names none). */
function observedRefutations(h: Harness, caps: ProviderCapabilities, state: string): Finding[] {
  try {
    return (checks[state]?.(h, caps) ?? []).filter((f) => !f.ok && !f.skipped);
  } catch {
    return [];
  }
}

export async function runPath(
  world: ConformanceWorld,
  caps: ProviderCapabilities,
  path: ModelPath,
  timeoutMs: number,
): Promise<PathResult> {
  const findings: Finding[] = [];
  // A narrowed path speaks only for the fields it was narrowed for (the others were not shown as declared).
  const mine = (found: Finding[]) => (path.narrowed ? found.filter((f) => path.fields.includes(f.field)) : found);
  let h: Harness | null = null;
  let index = 0;
  let error: string | null = null;
  const skipRest = (why: string) => {
    for (const field of new Set(path.steps.slice(index + 1).flatMap((s) => s.fields)))
      findings.push({ field, ok: true, skipped: true, observed: why });
  };
  try {
    const opening = world.open().then((run) =>
      Harness.open(run, timeoutMs, {
        narrowed: path.narrowed,
        checkpoints: path.steps.some((s) => s.event === "ROLLBACK"),
      }),
    );
    // A path that opens after its bound is closed once it has.
    opening.catch(() => undefined);
    h = await bounded(opening, timeoutMs * 2, "opening the path").catch((failure: unknown) => {
      if (failure instanceof StepTimeout) void opening.then((late) => late.close()).catch(() => undefined);
      throw failure;
    });
    for (; index < path.steps.length; index++) {
      const step = path.steps[index]!;
      await bounded(drives[step.event]!(h), timeoutMs * 2, step.event);
      await h.settle();
      if (h.lastError && !step.refusal) throw new Error(`refused: ${h.lastError.code}: ${h.lastError.message}`);
      const found = mine(checks[step.state]?.(h, caps) ?? []);
      findings.push(...found);
      // What follows a refuted step would be judged on its consequences: the path stops there (a refutation that
      // waits on another field's verdict lets it go on, to where that verdict may be found).
      if (found.some((f) => !f.ok && !f.unlessVerified && !f.unlessRefuted)) {
        skipRest(`the path stopped at ${step.event} -> ${step.state}, refuted`);
        break;
      }
    }
  } catch (failure) {
    const step = path.steps[index];
    const where = step ? `${step.event} -> ${step.state}` : "opening";
    error = `${where}: ${messageOf(failure)}`;
    const seen = h && step ? mine(observedRefutations(h, caps, step.state)) : [];
    const evidence = h ? pathEvidence(h, caps) : [];
    // The runtime's evidence names the cause where it has any; else what the step observed; else the step's fields.
    if (!evidence.some((f) => !f.ok)) {
      // A step that fails after a refutation waiting on another field's verdict waits on it too: it is its sequel.
      const waiting = findings.find((f) => !f.ok && (f.unlessRefuted || f.unlessVerified));
      const sequel: Partial<Finding> = {};
      if (waiting?.unlessRefuted) sequel.unlessRefuted = waiting.unlessRefuted;
      if (waiting?.unlessVerified) sequel.unlessVerified = waiting.unlessVerified;
      const observed = (f: Finding) => `${where} failed (${messageOf(failure)}); ${f.observed}`;
      findings.push(...seen.map((f) => ({ ...f, ...sequel, observed: observed(f) })));
      if (seen.length === 0)
        for (const field of step?.blame ?? []) findings.push({ field, ok: false, observed: error, ...sequel });
    }
    skipRest(`not run: the path stopped at ${where}`);
  }
  if (h) {
    // What the runtime itself recorded of the provider, and what the provider's ids say, over the whole path.
    try {
      await bounded(h.settle(), timeoutMs * 2, "the log to be delivered");
    } catch {
      // A runtime that cannot deliver its log has failed the path already; the evidence is what reached us.
    }
    const evidence = pathEvidence(h, caps);
    // A broken identity explains what the steps saw go wrong (events fenced, items not closed): it alone is blamed.
    const broken = evidence.some((f) => !f.ok && f.field.startsWith("identity."));
    const kept = broken ? findings.filter((f) => f.ok || f.skipped) : findings;
    findings.splice(0, findings.length, ...kept, ...evidence);
    await bounded(h.close(), timeoutMs * 2, "closing the path").catch(() => undefined);
  }
  return { findings, error };
}

/** Runs `work` over `items`, at most `limit` at once, results in the items' order. */
export async function inPool<T, R>(items: T[], limit: number, work: (item: T) => Promise<R>): Promise<R[]> {
  const results: R[] = new Array(items.length);
  let next = 0;
  const worker = async () => {
    while (next < items.length) {
      const at = next++;
      results[at] = await work(items[at]!);
    }
  };
  await Promise.all(Array.from({ length: Math.max(1, Math.min(limit, items.length)) }, worker));
  return results;
}
