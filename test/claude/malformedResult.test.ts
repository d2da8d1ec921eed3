import { describe, expect, it } from "vitest";
import { ProviderEventSchema } from "../../src/adapters/contract.js";
import { ClaudeThreadMapper } from "../../src/adapters/claude/mapper.js";
import type { SDKMessage } from "../../src/adapters/claude/protocol/sdk.js";

/**
 * A `result` message of the wrong shape still ends Claude's turn: the mapper gives a terminal the adapter accepts
 * (a `protocol_error` failure), never one the adapter's event check drops, which would leave the run to the watchdog.
 */
describe("claude result messages of the wrong shape", () => {
  const terminalOf = (message: object) => {
    const events = new ClaudeThreadMapper("session-1").map(message as SDKMessage);
    expect(events).toHaveLength(1);
    const parsed = ProviderEventSchema.safeParse(events[0]);
    expect(parsed.success, JSON.stringify(events[0])).toBe(true);
    return parsed.data!;
  };

  it.each([
    ["a numeric subtype", { type: "result", subtype: 5 }],
    ["no subtype", { type: "result" }],
    ["a null subtype", { type: "result", subtype: null, result: "done" }],
  ])("%s fails the turn at once as protocol_error", (_what, message) => {
    expect(terminalOf(message)).toMatchObject({
      type: "turn.terminal",
      threadRef: "session-1",
      status: "failed",
      failureClass: "protocol_error",
    });
  });
});
