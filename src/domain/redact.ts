import { maskCredentials } from "./credentials.js";

/**
 * Masks what looks like a credential before text reaches the log, a warning or an error a
 * caller may persist: the shapes of the one credential table (src/domain/credentials.ts),
 * which the host frame rings and the inspector use too.
 */
export function redact(text: string): string {
  return maskCredentials(text);
}
