import type { ProviderCapabilities } from "../index.js";
import type { Harness } from "./harness.js";

/** What a state's check gives a field: whether what it observed agrees with the record, and what it was. */
export interface Finding {
  field: string;
  ok: boolean;
  /** What was observed (for a refutation: what contradicts the record). */
  observed: string;
  /** Not a finding: the step that would have exercised the field was not run (`observed` says why). */
  skipped?: boolean;
  /**
   * A refutation one observation cannot pin on one field alone: it stands unless the named field was verified
   * (`unlessVerified`: then the fault is narrower) or refuted (`unlessRefuted`: then the fault is that field's).
   */
  unlessVerified?: string;
  unlessRefuted?: string;
}

/** Fields whose verdict may rest on others' (the `unlessVerified`/`unlessRefuted` the checks give them). */
export const VERDICT_RESTS_ON: Readonly<Record<string, string[]>> = {
  "context.canConsumeHandoffSummaries": ["context.supportsDeltaHandoff"],
  "context.supportsFullThreadHandoff": ["context.supportsDeltaHandoff", "context.canConsumeHandoffSummaries"],
  "context.supportsDeltaHandoff": ["context.canConsumeHandoffSummaries"],
};

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

/** The user text of the thread's `index`th run (its conversation's, in the order sent). */
export const textOfRun = (h: Harness, index: number) => h.userTexts.get(h.runIds[index] ?? "") ?? "";

const DELIVERY_FIELD = {
  system: "context.acceptsSystemContext",
  developer: "context.acceptsDeveloperContext",
  synthetic_user: "context.acceptsSyntheticUserContext",
} as const;

/** A fresh provider thread was told the whole conversation: the provider's turn carried it, as the record says. */
export function told(threadOf: (h: Harness) => string): Check {
  return (h, caps) => {
    const threadId = threadOf(h);
    const handoff = h.events("handoff.created", (e) => e.threadId === threadId).at(-1);
    const context = h.latestTurnOn(threadId)?.context ?? null;
    const flat = (text: string) => text.replace(/\s+/g, " ").trim();
    // The provider's turn carried the summary the runtime handed over; the summary told the whole conversation.
    const consumed = !!context && !!handoff && flat(context.text).includes(flat(handoff.text));
    const covers = !!handoff && handoff.text.includes(textOfRun(h, 0));
    const byProvider = handoff?.summarizedBy === "provider";
    const how = context
      ? `${context.delivery} context, ${consumed ? "the handoff's summary" : "not the handoff's summary"}`
      : "none";
    const seen = `handoff ${handoff?.strategy ?? "none"}; the provider's turn carried ${how}`;
    const isFull = handoff?.strategy === "full_thread_summary";
    const out: Finding[] = [];
    if (consumed || !handoff) out.push(finding("context.canConsumeHandoffSummaries", consumed, seen, seen));
    else {
      // A summary not taken in: the provider takes none, or none of this kind (where it took a delta, this one).
      const FULL = "context.supportsFullThreadHandoff";
      const narrower = isFull ? { unlessVerified: "context.supportsDeltaHandoff" } : {};
      out.push({ field: "context.canConsumeHandoffSummaries", ok: false, observed: seen, ...narrower });
      if (isFull)
        out.push({ field: FULL, ok: false, observed: seen, unlessRefuted: "context.canConsumeHandoffSummaries" });
    }
    if (consumed && isFull) {
      const full = covers || byProvider;
      out.push(finding("context.supportsFullThreadHandoff", full, seen, `${seen}, not telling the conversation`));
    }
    // The way the runtime chose to deliver it is the way the provider took it.
    const chosen = (
      h.callsOf("sendRun").findLast((c) => (c.input as { context?: unknown }).context) as
        { input: { context: { delivery: keyof typeof DELIVERY_FIELD } } } | undefined
    )?.input.context.delivery;
    if (consumed && chosen && context && context.delivery !== chosen)
      out.push(
        finding(
          DELIVERY_FIELD[chosen],
          false,
          "",
          `sent as ${chosen} context, the provider took it as ${context.delivery}`,
        ),
      );
    const delivery = context ? DELIVERY_FIELD[context.delivery] : null;
    if (delivery) out.push(finding(delivery, claims(declared(caps, delivery)), seen, `${seen}, not declared`));
    const max = caps.context.maxRecommendedHandoffChars;
    if (max !== null && handoff) {
      const size = `a ${handoff.text.length}-character summary`;
      out.push(finding("context.maxRecommendedHandoffChars", handoff.text.length <= max, size, `${size}, over ${max}`));
    }
    // Neither system nor developer context: the seed's fallback is synthetic user context, recorded as such.
    if (!caps.context.acceptsSystemContext && !caps.context.acceptsDeveloperContext) {
      const asUser = h.policies((e) => e.threadId === threadId).includes("handoff_as_user_context");
      const ok = asUser && context?.delivery === "synthetic_user";
      out.push(
        finding("context.acceptsDeveloperContext", ok, "handoff_as_user_context", `${seen}, as user: ${asUser}`),
      );
    }
    const local = h.policies((e) => e.threadId === threadId).includes("summary_by_local_summariser");
    const by = `summarized by ${handoff?.summarizedBy ?? "nobody"}`;
    const field = "context.canGenerateSummaries";
    if (caps.context.canGenerateSummaries) {
      // The provider's own summary, as it wrote it (before the runtime bounds it): within its bound, telling the runs.
      const asked = h.callsOf("summarize").at(-1);
      const written = typeof asked?.result === "string" ? asked.result : null;
      const max = (asked?.input as { maxChars?: number } | undefined)?.maxChars ?? Infinity;
      const problem = !byProvider
        ? by
        : written !== null && written.length > max
          ? `the provider's summary ran to ${written.length} characters, over the ${max} asked`
          : !covers
            ? "the provider's summary does not tell the conversation it was given"
            : null;
      out.push(finding(field, problem === null, by, problem ?? ""));
      // A summary over the bound its own record recommends breaks that bound too.
      if (written !== null && written.length > max && max === caps.context.maxRecommendedHandoffChars)
        out.push(finding("context.maxRecommendedHandoffChars", false, "", problem!));
    } else {
      out.push(finding(field, handoff?.summarizedBy === "runtime" && local, `${by} (summary_by_local_summariser)`, by));
    }
    return out;
  };
}

export const UNTOLD = ["handoff_summary_unsupported", "full_handoff_unsupported", "handoff_unsupported"];

/** A fresh provider thread that cannot be told the conversation: the run is refused, typed, with its policy. */
export function untold(fields: (caps: ProviderCapabilities) => string[]): Check {
  return (h, caps) => {
    const refused = h.lastError?.code === "capability_unsupported";
    const policy = refusedBy(h, UNTOLD);
    const seen = `refusal ${h.lastError?.code ?? "none"}, policy ${policy ?? "none"}`;
    const context = ["context.canConsumeHandoffSummaries", "context.supportsFullThreadHandoff"];
    const absent = context.filter((f) => !claims(declared(caps, f)));
    return [...fields(caps), ...absent].map((f) => finding(f, refused && !!policy, seen, seen));
  };
}
