/**
 * Masks what looks like a credential before text reaches the log, a warning or an error a
 * caller may persist: bearer tokens, API keys, `key=value` secrets, URL passwords.
 */
const PATTERNS: ReadonlyArray<[RegExp, string]> = [
  [/\b(Bearer|Basic)\s+[A-Za-z0-9._~+/=-]{8,}/gi, "$1 [redacted]"],
  [/\b(sk|pk|rk|ak)-[A-Za-z0-9_-]{12,}/g, "$1-[redacted]"],
  [/\b((?:api[_-]?key|token|secret|password|passwd|authorization)["']?\s*[:=]\s*["']?)[^\s"'&,;]{4,}/gi, "$1[redacted]"],
  [/(\/\/[^/\s:@]+:)[^@\s/]+@/g, "$1[redacted]@"],
];

export function redact(text: string): string {
  return PATTERNS.reduce((out, [pattern, replacement]) => out.replace(pattern, replacement), text);
}
