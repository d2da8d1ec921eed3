import type { ProviderAdapter } from "../adapters/contract.js";
import { prewarmTargets, type RuntimeFailure, type RuntimeOptions } from "./options.js";

/**
 * The `prewarm` option: each named target's host is started in the background once the runtime is open, so the first
 * session finds it running. Nothing waits on it: open is neither slower nor failed by it. A host that could not start
 * is reported (`prewarm_failed`) and left to the registry, which starts one again when a session asks; one that went
 * unused stops after the registry's idle TTL; `close` stops it like any host (a prewarm it cut short is no failure).
 */
export function startPrewarm(
  options: RuntimeOptions,
  report: (failure: RuntimeFailure) => void,
  closed: () => boolean,
): void {
  for (const target of prewarmTargets(options)) {
    const adapter: ProviderAdapter = options.providers[target]!;
    void Promise.resolve()
      .then(() => adapter.prewarm!())
      .catch((error: unknown) => {
        if (!closed()) report({ kind: "prewarm_failed", target, error });
      });
  }
}
