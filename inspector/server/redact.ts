/**
 * What the page may see. By default the words people and models wrote (prompts, message
 * text, command output, questions and answers) are replaced by their length, and whatever
 * looks like a credential is masked everywhere, even with `showText`.
 *
 * The credential table is the runtime's own (src/domain/credentials.ts): the inspector's
 * tsconfig compiles that one dependency-free file beside the server, so the page, the log and
 * the host frame rings mask the same shapes.
 */
import { maskCredentials } from "../../src/domain/credentials.js";

export { maskCredentials };

/**
 * Fields whose values are text written by a person or a model: `reason` is a command request's
 * description (Claude's Bash `description`) as well as a run's or request's closing reason;
 * `label` and `description` are a question's options.
 */
const TEXT_FIELDS = new Set([
  "text",
  "delta",
  "output",
  "prompt",
  "content",
  "diff",
  "patch",
  "summary",
  "question",
  "header",
  "answers",
  "input",
  "items",
  "steps",
  "env",
  "reason",
  "label",
  "description",
]);

/**
 * `reason`s the runtime itself names from a fixed vocabulary (why an attempt started, why a
 * handoff was made, why a provider thread closed): shown, since they are how the log tells a
 * degradation happened. Any other `reason` may be a person's or a model's words.
 */
export const RUNTIME_REASONS = new Set([
  "initial",
  "steering_restart",
  "retry",
  "provider_recovery",
  "provider_switch",
  "fork",
  "resume_failed",
  "thread_broken",
  "rollback_divergent",
  "broken",
]);

export const hidden = (value: unknown): string =>
  typeof value === "string" ? `‹hidden: ${value.length} chars›` : "‹hidden›";

/** A deep copy with text hidden (unless `showText`) and credentials masked. */
export function redactValue(value: unknown, showText: boolean, key = ""): unknown {
  const named = key === "reason" && typeof value === "string" && RUNTIME_REASONS.has(value);
  if (!showText && !named && TEXT_FIELDS.has(key) && value !== null && value !== undefined) return hidden(value);
  if (typeof value === "string") return maskCredentials(value);
  if (Array.isArray(value)) return value.map((v) => redactValue(v, showText));
  if (value && typeof value === "object") {
    return Object.fromEntries(Object.entries(value).map(([k, v]) => [k, redactValue(v, showText, k)]));
  }
  return value;
}

/**
 * What a user_input question's id becomes on the page while text is hidden: the Claude adapter
 * keys its questions by their text, so the id is as telling as the question. The page keys its
 * answers by this placeholder; `answersByQuestionId` maps them back before the runtime sees them.
 */
export const questionKey = (index: number): string => `‹question ${index + 1}›`;

type Event = { type: string; payload?: unknown; [key: string]: unknown };
type Question = { id?: unknown; [key: string]: unknown };

const questionsOf = (event: Event): Question[] | null => {
  const payload = event.payload as { kind?: unknown; questions?: unknown } | undefined;
  return event.type === "request.opened" && payload?.kind === "user_input" && Array.isArray(payload.questions)
    ? (payload.questions as Question[])
    : null;
};

/**
 * A log event as the page may see it: `redactValue`, and question ids replaced by `questionKey` unless text is shown.
 */
export function redactEvent<E extends Event>(event: E, showText: boolean): E {
  const questions = showText ? null : questionsOf(event);
  const shown = questions
    ? {
        ...event,
        payload: {
          ...(event.payload as object),
          questions: questions.map((q, i) => (q && typeof q === "object" ? { ...q, id: questionKey(i) } : q)),
        },
      }
    : event;
  return redactValue(shown, showText) as E;
}

/**
 * Answers the page keyed by `questionKey`, keyed again by the question ids of the request's
 * `request.opened` event. A key that is not one of that request's placeholders is refused.
 */
export function answersByQuestionId(opened: Event, answers: Record<string, unknown>): Record<string, unknown> {
  const questions = questionsOf(opened) ?? [];
  const ids = new Map(questions.map((q, i) => [questionKey(i), String(q?.id ?? "")]));
  return Object.fromEntries(
    Object.entries(answers).map(([key, value]) => {
      const id = ids.get(key);
      if (id === undefined) throw new Error(`no question ${JSON.stringify(key)} in this request`);
      return [id, value];
    }),
  );
}
