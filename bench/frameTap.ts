import type { ProviderAdapter, ProviderAdapterEvent } from "../src/index.js";

/**
 * The same adapter, with a listener told of every frame its `streamEvents()` yields, as the
 * runtime takes it (before the runtime validates or normalizes it). The adapter's own methods
 * are reused as they are (its optional methods stay present or absent).
 */
export function tapFrames(adapter: ProviderAdapter, onFrame: (frame: ProviderAdapterEvent) => void): ProviderAdapter {
  // A plain iterator rather than an async generator: one promise per frame, not a generator's hops.
  const streamEvents = (): AsyncIterable<ProviderAdapterEvent> => ({
    [Symbol.asyncIterator]() {
      const inner = adapter.streamEvents()[Symbol.asyncIterator]();
      return {
        next: () =>
          inner.next().then((item) => {
            if (!item.done) onFrame(item.value);
            return item;
          }),
        return: async (value?: unknown) => (await inner.return?.(value)) ?? { done: true, value: undefined },
      };
    },
  });
  return { ...adapter, streamEvents };
}

/** Characters of streamed content a frame carries (the text of its delta), 0 for any other frame. */
export const deltaText = (frame: ProviderAdapterEvent): string =>
  frame.event.type === "item.delta" ? frame.event.delta : "";
