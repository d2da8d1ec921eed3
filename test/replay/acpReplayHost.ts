import { runReplayHost, type Frame } from "./replayHost.js";

/**
 * Impersonates an ACP agent (Gemini CLI, claude-agent-acp, codex-acp) from a recorded transcript
 * (test/replay/fixtures/acp/<agent>/*.jsonl, written by record-acp.ts): started by node with tsx as the ACP adapter's
 * `agent` command (acp.replay.test.ts). Environment: ACP_REPLAY_FIXTURE, ACP_REPLAY_ROOT (see replayHost.ts).
 *
 * JSON-RPC over stdio: a client request or notification matches a recorded one with the same method and the same
 * params (the session ids are the recorded agent's, the paths the same under the replay's root); an answer to an
 * agent's request (a permission) must answer the same request with the same result. Recorded responses go out with
 * the id the client actually used. The runtime's liveness probe (`$/tiller/ping`, which the recorder leaves out) is
 * answered here, as an agent answers a method it does not know.
 */

const PROBE = "$/tiller/ping";

const isRequest = (f: Frame) => typeof f.method === "string" && f.id !== undefined && f.id !== null;
const isNotification = (f: Frame) => typeof f.method === "string" && (f.id === undefined || f.id === null);
const isResponse = (f: Frame) => f.method === undefined && f.id !== undefined && ("result" in f || "error" in f);
const same = (a: unknown, b: unknown) => JSON.stringify(a ?? null) === JSON.stringify(b ?? null);

runReplayHost("acp-replay", "ACP_REPLAY", {
  mismatch(got, want) {
    if (isRequest(want) || isNotification(want)) {
      const kind = isRequest(want) ? "request" : "notification";
      if (isRequest(got) !== isRequest(want) || isNotification(got) !== isNotification(want))
        return `expected a ${kind}`;
      if (got.method !== want.method) return `expected ${kind} ${String(want.method)}`;
      return same(got.params, want.params) ? null : `the params of ${String(want.method)} differ`;
    }
    if (isResponse(want)) {
      if (!isResponse(got)) return "expected a response to an agent request";
      if (got.id !== want.id) return `expected the response to agent request ${String(want.id)}`;
      if ("error" in want !== "error" in got) return "expected " + ("error" in want ? "an error" : "a result");
      return same(got.result ?? got.error, want.result ?? want.error) ? null : "the answer differs";
    }
    return "unrecognised recorded frame";
  },
  requestId: (f) => (isRequest(f) ? JSON.stringify(f.id) : undefined),
  answerTo: (f) =>
    isResponse(f)
      ? { id: JSON.stringify(f.id), readdress: (actual) => ({ ...f, id: JSON.parse(actual) as unknown }) }
      : undefined,
  aside: (f) =>
    f.method === PROBE
      ? isRequest(f)
        ? { jsonrpc: "2.0", id: f.id, error: { code: -32601, message: `Method not found: ${PROBE}` } }
        : null
      : undefined,
});
