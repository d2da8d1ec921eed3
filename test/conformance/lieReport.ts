import { writeFile } from "node:fs/promises";
import { runConformance, scriptedWorld, type ConformanceReport } from "../../src/conformance/index.js";
import { HONEST, LIES, type Honest, type Lie } from "./lies/corpus.js";

/**
 * `npx tsx test/conformance/lieReport.ts [--only name-substring]`: runs the whole conformance suite on every honest
 * control and every lie of the corpus (`lies/corpus.ts`), one after the other, and prints, per entry, the field the
 * lie is about, its verdict, and every other field refuted; then how many lies were refuted on the right field, only
 * elsewhere, or not at all, and how many honest controls had anything refuted. Written as JSON to /tmp/lie-report.json.
 */

interface Row {
  kind: "honest" | "lie";
  name: string;
  class: string | null;
  /** The field the lie is about (null for an honest control). */
  field: string | null;
  /** Its verdict (null: honest, or the run threw). */
  verdict: string | null;
  detail: string | null;
  /** Every other field refuted, with what was seen. */
  others: Array<{ field: string; detail: string }>;
  /** Paths that failed. */
  failedPaths: number;
  error: string | null;
  seconds: number;
}

const only = (() => {
  const at = process.argv.indexOf("--only");
  return at >= 0 ? (process.argv[at + 1] ?? "") : null;
})();
const picked = <T extends { name: string }>(list: T[]) =>
  only === null ? list : list.filter((e) => e.name.includes(only));

async function run(entry: Honest | Lie, kind: Row["kind"]): Promise<Row> {
  const lie = kind === "lie" ? (entry as Lie) : null;
  const started = performance.now();
  const seconds = () => Math.round((performance.now() - started) / 100) / 10;
  const base = { kind, name: entry.name, class: lie?.class ?? null, field: lie?.field ?? null };
  try {
    const world = scriptedWorld({
      name: entry.name,
      ...(entry.adapter ? { adapter: entry.adapter } : {}),
      ...(entry.capabilities ? { capabilities: entry.capabilities } : {}),
    });
    const report: ConformanceReport = await runConformance({ world });
    const target = lie ? report.fields.find((f) => f.field === lie.field) : undefined;
    const others = report.fields
      .filter((f) => f.verdict === "refuted" && f.field !== lie?.field)
      .map((f) => ({ field: f.field, detail: f.detail }));
    return {
      ...base,
      verdict: target?.verdict ?? (lie ? "(no such field)" : null),
      detail: target?.detail ?? null,
      others,
      failedPaths: report.paths.filter((p) => p.error).length,
      error: null,
      seconds: seconds(),
    };
  } catch (error) {
    const message = error instanceof Error ? error.message : String(error);
    return { ...base, verdict: null, detail: null, others: [], failedPaths: 0, error: message, seconds: seconds() };
  }
}

function print(row: Row): void {
  const head = row.kind === "honest" ? `HONEST ${row.name}` : `LIE ${row.name} [${row.class}]`;
  const verdict = row.error
    ? `ERROR ${row.error}`
    : row.kind === "lie"
      ? `${row.field}: ${row.verdict}${row.verdict === "refuted" ? ` (${row.detail})` : ""}`
      : `refuted ${row.others.length}`;
  console.log(`${head} (${row.seconds} s, ${row.failedPaths} failed paths)\n  ${verdict}`);
  for (const other of row.others) console.log(`  also refuted ${other.field}: ${other.detail}`);
}

const rows: Row[] = [];
for (const honest of picked(HONEST)) {
  const row = await run(honest, "honest");
  print(row);
  rows.push(row);
}
for (const lie of picked(LIES)) {
  const row = await run(lie, "lie");
  print(row);
  rows.push(row);
}

const lies = rows.filter((r) => r.kind === "lie");
const onTarget = lies.filter((r) => r.verdict === "refuted");
const totals = {
  lies: lies.length,
  refutedOnTarget: onTarget.length,
  refutedOnTargetOnly: onTarget.filter((r) => r.others.length === 0).length,
  refutedOnlyElsewhere: lies.filter((r) => r.verdict !== "refuted" && !r.error && r.others.length > 0).length,
  passing: lies.filter((r) => r.verdict !== "refuted" && !r.error && r.others.length === 0).length,
  errors: lies.filter((r) => r.error).length,
  honest: rows.filter((r) => r.kind === "honest").length,
  honestWithRefutations: rows.filter((r) => r.kind === "honest" && (r.others.length > 0 || r.error)).length,
};

console.log("\nname | target field | verdict | other refuted fields");
for (const row of rows) {
  const others = row.others.map((o) => o.field).join(", ") || "-";
  const verdict = row.error ? `error: ${row.error}` : (row.verdict ?? "-");
  console.log(`${row.name} | ${row.field ?? "-"} | ${verdict} | ${others}`);
}
console.log(
  `\nlies: ${totals.lies}; refuted on the right field: ${totals.refutedOnTarget} ` +
    `(of which nothing else refuted: ${totals.refutedOnTargetOnly}); refuted only elsewhere: ` +
    `${totals.refutedOnlyElsewhere}; passing: ${totals.passing}; errors: ${totals.errors}\n` +
    `honest controls: ${totals.honest}; with any refutation (or error): ${totals.honestWithRefutations}`,
);
await writeFile("/tmp/lie-report.json", JSON.stringify({ totals, rows }, null, 2));
console.log("written to /tmp/lie-report.json");
