import type { UUID } from "node:crypto";
import type { SDKUserMessage } from "../protocol/sdk.js";

/**
 * Streaming input for one SDK query: user messages pushed here are yielded to Claude in order. A message given a
 * `uuid` keeps it in Claude's session (else Claude picks one).
 */
export function userInbox(): { input: AsyncGenerator<SDKUserMessage>; push(text: string, uuid?: UUID): void } {
  const queued: SDKUserMessage[] = [];
  let wake: (() => void) | null = null;
  async function* input(): AsyncGenerator<SDKUserMessage> {
    for (;;) {
      while (queued.length > 0) yield queued.shift()!;
      await new Promise<void>((resolve) => (wake = resolve));
    }
  }
  return {
    input: input(),
    push(text, uuid) {
      queued.push({
        type: "user",
        ...(uuid ? { uuid } : {}),
        session_id: "",
        message: { role: "user", content: [{ type: "text", text }] },
        parent_tool_use_id: null,
      } as SDKUserMessage);
      wake?.();
    },
  };
}
