import type { SDKUserMessage } from "@anthropic-ai/claude-agent-sdk";

/** Streaming input for one SDK query: user messages pushed here are yielded to Claude in order. */
export function userInbox(): { input: AsyncGenerator<SDKUserMessage>; push(text: string): void } {
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
    push(text) {
      queued.push({
        type: "user",
        session_id: "",
        message: { role: "user", content: [{ type: "text", text }] },
        parent_tool_use_id: null,
      } as SDKUserMessage);
      wake?.();
    },
  };
}
