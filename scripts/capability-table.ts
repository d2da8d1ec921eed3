import { readFileSync } from "node:fs";
import { join } from "node:path";
import { pathToFileURL } from "node:url";
import { claudeAgent, codexAgent, geminiAgent } from "../src/adapters/acp/agents.js";
import { acpCapabilities } from "../src/adapters/acp/capabilities.js";
import type { InitializeResponse } from "../src/adapters/acp/protocol/sdk.js";
import { claudeCapabilities } from "../src/adapters/claude/capabilities.js";
import { codexCapabilities } from "../src/adapters/codex/capabilities.js";
import type { ProviderCapabilities } from "../src/capabilities/index.js";

/**
 * The capability table of the README and docs/providers.md: for each group, what each real provider's record lacks
 * (false flags) and its non-boolean values, from the records themselves. An ACP agent's record is the one its
 * `initialize` answer negotiates (the answers of the pinned agents are in test/acp/fixtures, checked against the live
 * agents by test/acp), with what its preset says it does. `npm run docs` writes it and the docs tests check it;
 * `npx tsx scripts/capability-table.ts` prints it.
 */

function acpAgent(target: string, behaviour: Parameters<typeof acpCapabilities>[1]): ProviderCapabilities {
  const file = join(import.meta.dirname, "..", "test", "acp", "fixtures", `${target}.initialize.json`);
  return acpCapabilities(JSON.parse(readFileSync(file, "utf8")) as InitializeResponse, behaviour);
}

const providers: Array<[string, ProviderCapabilities]> = [
  ["Codex 0.171", codexCapabilities("0.171.0")],
  ["Claude Code 2.1", claudeCapabilities()],
  ["Gemini CLI 0.61 (ACP)", acpAgent("gemini", geminiAgent().behaviour)],
  ["claude-agent-acp 0.101 (ACP)", acpAgent("claude-acp", claudeAgent().behaviour)],
  ["codex-acp 0.16 (ACP)", acpAgent("codex-acp", codexAgent().behaviour)],
];

function cell(fields: Record<string, unknown>): string {
  const lacks = Object.entries(fields)
    .filter(([, v]) => v === false)
    .map(([k]) => k);
  const values = Object.entries(fields)
    .filter(([, v]) => typeof v !== "boolean")
    .map(([k, v]) => `${k}: ${String(v)}`);
  const parts = [...values, ...(lacks.length > 0 ? [`lacks ${lacks.join(", ")}`] : [])];
  return parts.length > 0 ? parts.join("; ") : "all";
}

export function capabilityTable(): string {
  const groups = Object.keys(providers[0]![1]).filter(
    (g) => typeof (providers[0]![1] as unknown as Record<string, unknown>)[g] === "object",
  );
  const names = providers.map(([name]) => name).join(" | ");
  const header = `| group | ${names} |\n|---|${providers.map(() => "---|").join("")}`;
  const rows = groups.map((g) => {
    const cells = providers.map(([, caps]) => cell((caps as unknown as Record<string, Record<string, unknown>>)[g]!));
    return `| ${g} | ${cells.join(" | ")} |`;
  });
  return [header, ...rows].join("\n");
}

/**
 * The README's table: the fields where the providers' records differ, one row each, by name (each names one field of
 * the eleven groups), ✓ and ✗ for flags, the value for the rest; fields every provider has alike are left out.
 */
export function capabilityDifferences(): string {
  const records = providers.map(([, caps]) => caps as unknown as Record<string, Record<string, unknown>>);
  const show = (v: unknown) => (v === true ? "✓" : v === false ? "✗" : String(v));
  const rows: string[] = [];
  for (const [group, fields] of Object.entries(records[0]!)) {
    if (typeof fields !== "object" || fields === null) continue;
    for (const field of Object.keys(fields)) {
      const values = records.map((r) => r[group]![field]);
      if (values.every((v) => v === values[0])) continue;
      rows.push(`| ${field} | ${values.map(show).join(" | ")} |`);
    }
  }
  const names = providers.map(([name]) => name.replace(/ [\d.]+/, "").replace(" (ACP)", "")).join(" | ");
  return [`| field | ${names} |`, `|---|${providers.map(() => "---|").join("")}`, ...rows].join("\n");
}

if (import.meta.url === pathToFileURL(process.argv[1]!).href) console.log(capabilityTable());
