import { runReplayHost, type Frame } from "./replayHost.js";

/**
 * Impersonates the Claude Code binary from a recorded stream-json transcript
 * (test/replay/fixtures/claude/*.jsonl, written by record-claude.ts): started through the
 * `claude-replay` script as the Claude adapter's `executable` (its arguments are ignored).
 * Environment: CLAUDE_REPLAY_FIXTURE, CLAUDE_REPLAY_ROOT (see replayHost.ts).
 *
 * A control request matches one with the same subtype and fields (a model switch to the same
 * model); a user message one with the same content; an answer to a permission prompt must
 * answer the same prompt the same way.
 * Recorded control responses go out with the request id the SDK actually used.
 */

type Control = { subtype?: string; request_id?: string; response?: unknown };
const request = (f: Frame) => (f.request ?? {}) as Control;
const response = (f: Frame) => (f.response ?? {}) as Control;

runReplayHost("claude-replay", "CLAUDE_REPLAY", {
  mismatch(got, want) {
    if (got.type !== want.type) return `expected a ${String(want.type)} frame`;
    switch (want.type) {
      case "control_request":
        if (request(got).subtype !== request(want).subtype)
          return `expected control request ${String(request(want).subtype)}`;
        return JSON.stringify(got.request) === JSON.stringify(want.request)
          ? null
          : `the ${String(request(want).subtype)} request differs`;
      case "user":
        return JSON.stringify((got.message as Frame | undefined)?.content) ===
          JSON.stringify((want.message as Frame | undefined)?.content)
          ? null
          : "the user message differs";
      case "control_response":
        if (response(got).request_id !== response(want).request_id)
          return `expected the answer to ${String(response(want).request_id)}`;
        return JSON.stringify(response(got).response) === JSON.stringify(response(want).response)
          ? null
          : "the answer differs";
      default:
        return null;
    }
  },
  requestId: (f) => (f.type === "control_request" && typeof f.request_id === "string" ? f.request_id : undefined),
  answerTo: (f) => {
    const id = f.type === "control_response" ? response(f).request_id : undefined;
    return id === undefined
      ? undefined
      : { id, readdress: (actual) => ({ ...f, response: { ...response(f), request_id: actual } }) };
  },
});
