/**
 * What the page may see. By default the words people and models wrote (prompts, message
 * text, command output, questions and answers) are replaced by their length, and whatever
 * looks like a credential is masked everywhere, even with `showText`.
 *
 * The credential patterns are the ones of src/domain/redact.ts (the inspector compiles on its
 * own and imports nothing from src/); test/inspector/redact.test.ts checks they agree.
 */
const CREDENTIALS: ReadonlyArray<[RegExp, string]> = [
  [/\b(Bearer|Basic)\s+[A-Za-z0-9._~+/=-]{8,}/gi, "$1 [redacted]"],
  [/\b(sk|pk|rk|ak)-[A-Za-z0-9_-]{12,}/g, "$1-[redacted]"],
  [/\b((?:api[_-]?key|token|secret|password|passwd|authorization)["']?\s*[:=]\s*["']?)[^\s"'&,;]{4,}/gi, "$1[redacted]"],
  [/(\/\/[^/\s:@]+:)[^@\s/]+@/g, "$1[redacted]@"],
];

export function maskCredentials(text: string): string {
  return CREDENTIALS.reduce((out, [pattern, replacement]) => out.replace(pattern, replacement), text);
}

/** Fields whose string values are text written by a person or a model. */
const TEXT_FIELDS = new Set(["text", "delta", "output", "prompt", "content", "diff", "patch", "summary", "question", "header", "answers", "input", "items", "steps", "env"]);

export const hidden = (value: unknown): string =>
  typeof value === "string" ? `‹hidden: ${value.length} chars›` : "‹hidden›";

/** A deep copy with text hidden (unless `showText`) and credentials masked. */
export function redactValue(value: unknown, showText: boolean, key = ""): unknown {
  if (!showText && TEXT_FIELDS.has(key) && value !== null && value !== undefined) return hidden(value);
  if (typeof value === "string") return maskCredentials(value);
  if (Array.isArray(value)) return value.map((v) => redactValue(v, showText));
  if (value && typeof value === "object") {
    return Object.fromEntries(Object.entries(value).map(([k, v]) => [k, redactValue(v, showText, k)]));
  }
  return value;
}
