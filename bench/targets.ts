/**
 * The targets of issue 16, by results.json key, and the table `npm run bench` prints: each key,
 * its value, its target, met or not. A key missing from the results (not measured in this run)
 * is shown as such and never counts as met.
 */

export interface Target {
  key: string;
  /** `max`: the value must be at most `limit`; `min`: at least. */
  bound: "min" | "max";
  limit: number;
  what: string;
}

export const TARGETS: readonly Target[] = [
  { key: "ratio", bound: "min", limit: 0.25, what: "scripted pipeline frames/s / raw frames/s" },
  { key: "codex_replay_ratio", bound: "min", limit: 0.2, what: "Codex replay frames/s / raw frames/s" },
  { key: "log_bytes_per_content_byte", bound: "max", limit: 3, what: "log bytes / streamed content bytes" },
  { key: "reopen_ratio", bound: "max", limit: 0.1, what: "reopen / JSON.parse of every log line" },
  { key: "concurrent_p99_ratio", bound: "max", limit: 2, what: "p99 delta latency / (window + fdatasync p99)" },
  { key: "claude_start_ratio", bound: "max", limit: 1.15, what: "Claude start + first turn / bare SDK" },
  { key: "codex_start_ratio", bound: "max", limit: 1.05, what: "Codex start / bare" },
  { key: "codex_turn_ratio", bound: "max", limit: 1.05, what: "Codex warm turn / bare" },
  { key: "heap_bytes_per_idle_thread", bound: "max", limit: 8 * 1024, what: "heap bytes per idle thread" },
];

export const met = (t: Target, value: number): boolean => (t.bound === "min" ? value >= t.limit : value <= t.limit);

const number = (n: number) => (Math.abs(n) >= 1000 ? Math.round(n).toLocaleString("en-US") : String(n));

/** The table of the targets, then the context lines given (label, value). */
export function printTable(results: Record<string, unknown>, context: Array<[string, string]>): void {
  const rows = TARGETS.map((t) => {
    const value = results[t.key];
    const target = `${t.bound === "min" ? ">=" : "<="} ${number(t.limit)}`;
    if (typeof value !== "number") return [t.key, "not measured", target, "-", t.what];
    return [t.key, number(value), target, met(t, value) ? "met" : "NOT met", t.what];
  });
  const header = ["key", "value", "target", "status", "what"];
  const widths = header.map((h, i) => Math.max(h.length, ...rows.map((r) => r[i]!.length)));
  const line = (cells: string[]) =>
    cells.map((c, i) => (i === 1 ? c.padStart(widths[i]!) : c.padEnd(widths[i]!))).join("  ");
  console.log(line(header).trimEnd());
  for (const row of rows) console.log(line(row).trimEnd());
  const metCount = rows.filter((r) => r[3] === "met").length;
  console.log(`\n${metCount} of ${TARGETS.length} targets met\n`);
  const width = Math.max(...context.map(([label]) => label.length));
  for (const [label, value] of context) console.log(`${label.padEnd(width)}  ${value}`);
}
