import type { ProviderCapabilities } from "../capabilities/schema.js";
import type { RunContext } from "../adapters/contract.js";
import type { RunView } from "./projections.js";

/**
 * Portable context: a deterministic, bounded summary of an app thread's runs, built from
 * the projection (never from a provider's memory). Used for provider switches, portable
 * forks and rebuilding a provider thread that could not be resumed.
 */

const DEFAULT_MAX_CHARS = 8_000;

function runText(run: RunView): string {
  const assistant = run.items
    .filter((i) => i.kind === "assistant_message" && i.text)
    .map((i) => i.text)
    .join("");
  return `[run ${run.ordinal}, ${run.status}] user: ${run.text}\nassistant: ${assistant || "(no reply)"}`;
}

/**
 * Oldest runs are dropped first when over the bound; the newest run is truncated last.
 * Same runs in, same text out.
 */
export function summarizeRuns(runs: readonly RunView[], maxChars: number | null): string {
  const limit = maxChars ?? DEFAULT_MAX_CHARS;
  const header = "Context from earlier in this conversation:\n";
  const parts = runs.map(runText);
  while (parts.length > 1 && header.length + parts.join("\n\n").length > limit) parts.shift();
  const omitted = runs.length - parts.length;
  const body = (omitted > 0 ? `(${omitted} earlier runs omitted)\n\n` : "") + parts.join("\n\n");
  return (header + body).slice(0, limit);
}

/** How a provider can receive explicit context; null when it cannot at all. */
export function contextDelivery(caps: ProviderCapabilities): RunContext["delivery"] | null {
  if (caps.context.acceptsDeveloperContext) return "developer";
  if (caps.context.acceptsSystemContext) return "system";
  if (caps.context.acceptsSyntheticUserContext) return "synthetic_user";
  return null;
}
