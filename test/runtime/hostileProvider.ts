import type { ProviderAdapter, ProviderAdapterEvent, ProviderCapabilities } from "../../src/index.js";
import { override } from "../support/runtime.js";

/**
 * Doubles at the provider's boundary for the capability tests: a provider whose stream says more (or other) than its
 * record declares, and a provider that announces a record other than the one it runs with.
 */

/** The adapter's event stream, each frame replaced by what `rewrite` makes of it (none, itself, or more). */
export function rewriteEvents(
  adapter: ProviderAdapter,
  rewrite: (frame: ProviderAdapterEvent) => ProviderAdapterEvent[],
): ProviderAdapter {
  return override(adapter, {
    streamEvents: () => ({
      async *[Symbol.asyncIterator]() {
        for await (const frame of adapter.streamEvents()) yield* rewrite(frame);
      },
    }),
  });
}

/** The adapter, announcing `declared` as its record (at construction and at every session start) whatever it does. */
export function declaring(adapter: ProviderAdapter, declared: ProviderCapabilities): ProviderAdapter {
  return override(adapter, {
    getCapabilities: () => declared,
    startSession: async (input) => ({ ...(await adapter.startSession(input)), capabilities: declared }),
  });
}
