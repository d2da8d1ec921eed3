import type { ProviderCapabilities } from "../index.js";
import type { Harness } from "./harness.js";

/** What a state's check gives a field: whether what it observed agrees with the record, and what it was. */
export interface Finding {
  field: string;
  ok: boolean;
  /** What was observed (for a refutation: what contradicts the record). */
  observed: string;
}

export type Check = (h: Harness, caps: ProviderCapabilities) => Finding[];

/** The declared value of a dotted field. */
export function declared(caps: ProviderCapabilities, field: string): unknown {
  const [group, name] = field.split(".") as [keyof ProviderCapabilities, string];
  return (caps[group] as Record<string, unknown> | undefined)?.[name];
}

/** A field the record claims: true, a strength other than `none`, or a number. */
export function claims(value: unknown): boolean {
  return value === true || value === "strong" || value === "weak" || typeof value === "number";
}

export const finding = (field: string, ok: boolean, yes: string, no: string): Finding => ({
  field,
  ok,
  observed: ok ? yes : no,
});

export function completed(h: Harness, runId: string, field: string): Finding {
  const status = h.terminal(runId)?.status ?? "(not ended)";
  return finding(field, status === "completed", "the run completed", `the run ended ${status}`);
}

/** The refusal policy of the latest step: named by the typed refusal, or recorded in the log. */
export function refusedBy(h: Harness, policies: string[]): string | null {
  if (h.lastError?.code !== "capability_unsupported") return null;
  const named = h.lastError.policy;
  if (named && policies.includes(named)) return named;
  return h.policies().find((p) => policies.includes(p)) ?? null;
}

/** A typed refusal of the step's command, with the degradation policy the seed names for it. */
export function refusal(h: Harness, policy: string, fields: string[]): Finding[] {
  const refused = h.lastError?.code === "capability_unsupported";
  const recorded = refusedBy(h, [policy]) !== null;
  return fields.map((f) =>
    finding(
      f,
      refused && recorded,
      `refused as capability_unsupported (${policy})`,
      `refusal ${h.lastError?.code ?? "none"}, policy ${h.lastError?.policy ?? "none"}, ${policy} expected`,
    ),
  );
}
