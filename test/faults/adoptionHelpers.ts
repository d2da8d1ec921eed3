import { hosted } from "./helpers.js";

/**
 * The scripted provider in a socket host, with a record that says pending requests survive a
 * restart: what the crashed runtime (adoptionChild.ts) and the next one both run, so both
 * compute the same host key.
 */
export const adoptable = (options: { orphanTtlMs?: number } = {}) =>
  hosted({ transport: "socket", capabilities: { sessions: { pendingRequestsSurviveRestart: true } }, ...options });
