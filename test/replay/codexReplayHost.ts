import { runReplayHost, type Frame } from "./replayHost.js";

/**
 * Impersonates `codex app-server` from a recorded transcript (test/replay/fixtures/codex/*.jsonl,
 * written by record-codex.ts): started through the `codex-replay` script as the Codex
 * adapter's `binary` (the `app-server` argument is ignored). Environment: CODEX_REPLAY_FIXTURE,
 * CODEX_REPLAY_ROOT (see replayHost.ts).
 *
 * JSON-RPC: a client request or notification matches a recorded one with the same method; an
 * answer to a server request must answer the same request with the same result. Recorded
 * responses go out with the id the client actually used.
 */

const isRequest = (f: Frame) => typeof f.method === "string" && f.id !== undefined && f.id !== null;
const isNotification = (f: Frame) => typeof f.method === "string" && (f.id === undefined || f.id === null);
const isResponse = (f: Frame) => f.method === undefined && f.id !== undefined && ("result" in f || "error" in f);

runReplayHost("codex-replay", "CODEX_REPLAY", {
  mismatch(got, want) {
    if (isRequest(want)) {
      if (!isRequest(got)) return "expected a request";
      return got.method === want.method ? null : `expected request ${String(want.method)}`;
    }
    if (isNotification(want)) {
      if (!isNotification(got)) return "expected a notification";
      return got.method === want.method ? null : `expected notification ${String(want.method)}`;
    }
    if (isResponse(want)) {
      if (!isResponse(got)) return "expected a response to a server request";
      if (got.id !== want.id) return `expected the response to server request ${String(want.id)}`;
      if ("error" in want !== "error" in got) return "expected " + ("error" in want ? "an error" : "a result");
      if (JSON.stringify(got.result ?? got.error) !== JSON.stringify(want.result ?? want.error))
        return "the answer differs";
      return null;
    }
    return "unrecognised recorded frame";
  },
  requestId: (f) => (isRequest(f) ? JSON.stringify(f.id) : undefined),
  answerTo: (f) =>
    isResponse(f)
      ? { id: JSON.stringify(f.id), readdress: (actual) => ({ ...f, id: JSON.parse(actual) as unknown }) }
      : undefined,
});
