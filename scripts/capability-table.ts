import { pathToFileURL } from "node:url";
import { claudeCapabilities } from "../src/adapters/claude/capabilities.js";
import { codexCapabilities } from "../src/adapters/codex/capabilities.js";
import type { ProviderCapabilities } from "../src/capabilities/index.js";

/**
 * The capability table of docs/providers.md: for each group, what each real provider's record
 * lacks (false flags) and its non-boolean values, from the records themselves. `npm run docs`
 * writes it there and the docs tests check it; `npx tsx scripts/capability-table.ts` prints it.
 */

const providers: Array<[string, ProviderCapabilities]> = [
  ["Codex 0.171", codexCapabilities("0.171.0")],
  ["Claude Code 2.1", claudeCapabilities()],
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

if (import.meta.url === pathToFileURL(process.argv[1]!).href) console.log(capabilityTable());
