import { fullCapabilities } from "../src/capabilities/index.js";
import { capabilityDifferences, capabilityTable } from "./capability-table.js";

/**
 * docs/providers.md, generated parts: what each real provider's record lacks, and the scripted provider's default
 * record.
 */

export function providerGapsBlock(): string {
  return capabilityTable();
}

/** The README's: the fields where the providers' records differ. */
export function providerDifferencesBlock(): string {
  return capabilityDifferences();
}

/** `fullCapabilities()`, group by group: ✓ and ✗ for flags, values for the rest. */
export function defaultRecordBlock(): string {
  const record = fullCapabilities() as unknown as Record<string, unknown>;
  const rows = ["| group | fields (default) |", "|---|---|"];
  for (const [group, fields] of Object.entries(record)) {
    if (typeof fields !== "object" || fields === null) continue;
    const cells = Object.entries(fields).map(([name, value]) =>
      typeof value === "boolean" ? `${name} ${value ? "✓" : "✗"}` : `${name}: ${String(value)}`,
    );
    rows.push(`| ${group} | ${cells.join(", ")} |`);
  }
  return [`Record version ${String(record.version)}.`, "", ...rows].join("\n");
}
