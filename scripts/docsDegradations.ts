import { claudeCapabilities } from "../src/adapters/claude/capabilities.js";
import { codexCapabilities } from "../src/adapters/codex/capabilities.js";
import { fullCapabilities, type ProviderCapabilities } from "../src/capabilities/index.js";
import { DEGRADATIONS } from "../src/machines/policies.js";

/**
 * docs/degradations.md, generated from `DEGRADATIONS` (src/machines/policies.ts): each policy,
 * the capability its guard reads, what it does, and what each provider's record says for
 * that capability (so a reader sees which ones a provider will meet).
 */

const RECORDS: Array<[string, ProviderCapabilities]> = [
  ["Codex 0.171", codexCapabilities("0.171.0")],
  ["Claude Code 2.1", claudeCapabilities()],
  ["scripted (default)", fullCapabilities()],
];

/** The value at a capability path such as `turns.supportsInterrupt`. */
function valueAt(record: ProviderCapabilities, path: string): string {
  const [group, field] = path.split(".");
  const value = (record as unknown as Record<string, Record<string, unknown> | undefined>)[group!]?.[field!];
  if (value === undefined)
    throw new Error(`DEGRADATIONS names capability ${path}, which the capability record has not`);
  return String(value);
}

export function degradationsBlock(): string {
  const entries = Object.entries(DEGRADATIONS);
  const rows = [
    `| policy | outcome | capability read | what happens | ${RECORDS.map(([name]) => name).join(" | ")} |`,
    `|---|---|---|---|${RECORDS.map(() => "---|").join("")}`,
  ];
  for (const [policy, { capability, outcome, summary }] of entries) {
    const values = RECORDS.map(([, record]) => `\`${valueAt(record, capability)}\``).join(" | ");
    rows.push(`| \`${policy}\` | ${outcome} | \`${capability}\` | ${summary} | ${values} |`);
  }
  const refused = entries.filter(([, d]) => d.outcome === "refused").length;
  return [`${entries.length} policies: ${entries.length - refused} fallbacks, ${refused} refusals.`, "", ...rows].join(
    "\n",
  );
}
