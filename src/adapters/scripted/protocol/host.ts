import { z } from "zod";
import { ScriptStepSchema } from "../host/script.js";

/**
 * The scripted host's protocol: JSON-RPC 2.0 (see adapters/kit/jsonRpc.ts) over stdio, a
 * loopback WebSocket, or a WebSocket on a unix socket. The host runs the in-process scripted
 * adapter and relays its calls and events, so the out-of-process provider is driven by the same
 * scripts.
 *
 * Host -> client notifications:
 *   `host.ready` { pid, protocol }  first message on every connection (stdio: on start)
 *   `event` { seq, sessionId, event } every provider event, seq increasing per host
 * Client -> host requests: `init`, then the adapter methods by name (`startSession`,
 * `stopSession`, `ensureProviderThread`, `sendRun`, `steerRun`, `interrupt`,
 * `respondToRequest`, `readThreadSnapshot`, `rollbackThread`, `forkThread`), `openGate`,
 * `resume` { afterSeq } (after a reconnect: replays buffered events, returns the host's state),
 * `attach` (a client that never talked to this running host takes it up: live from the seq it
 * returns, nothing replayed), `reattach` { sessionId } (what the session still runs: null when
 * the host does not know it),
 * and test hooks `debug.dropConnections`, `debug.stopListening`, `debug.flood` { stream:
 * stdout | stderr | websocket, bytes } (after its reply: that many bytes and no newline, a broken
 * host for the runtime's caps) and `debug.emitRaw` { sessionId, events: JSON texts } (each
 * spliced verbatim into an `event` notification, not kept for `resume`: hostile events for
 * the runtime's pump), `debug.emitRawParams` { params: JSON texts } (each spliced verbatim as
 * an `event` notification's params: envelopes of the wrong shape) and `debug.replyOnce`
 * { method, result } (the next reply to `method` is `result`: replies of the wrong shape).
 * The WebSocket host prints `{"listening":{"port":N}}` on stdout and accepts only
 * connections that present its token (`?token=`), given to it in `TILLER_HOST_TOKEN`.
 * The socket host (`--socket=PATH`) listens on a unix socket in a private directory (0700, made
 * for it; the socket 0600): its permissions admit the runtime's user, no token is involved. It
 * prints `{"listening":{"socket":PATH}}`, outlives its parent, and exits once it has had no
 * connection for `--orphan-ttl-ms` (nobody adopted it); on a clean exit it removes its socket
 * and that directory.
 */
export const HOST_PROTOCOL_VERSION = 1;

export const InitParamsSchema = z.strictObject({
  /** A full capability record, or overrides of the full one. */
  capabilities: z.record(z.string(), z.unknown()),
  /** Steps by prompt marker (as `keyedScript`); other prompts are echoed. */
  scripts: z.record(z.string(), z.array(ScriptStepSchema)),
  chunkDelayMs: z.number().int().nonnegative().optional(),
});
export type InitParams = z.infer<typeof InitParamsSchema>;

export const ReadyParamsSchema = z.strictObject({ pid: z.number().int(), protocol: z.literal(HOST_PROTOCOL_VERSION) });
export const EventParamsSchema = z.strictObject({
  seq: z.number().int().positive(),
  sessionId: z.string(),
  event: z.unknown(),
});
export const ResumeResultSchema = z.strictObject({
  replayed: z.number().int(),
  /** Sessions alive in the host, with the threads that have a turn in flight. */
  sessions: z.array(z.strictObject({ sessionId: z.string(), activeThreads: z.array(z.string()) })),
});
export type ResumeResult = z.infer<typeof ResumeResultSchema>;

export const AttachResultSchema = z.strictObject({ seq: z.number().int().nonnegative() });
export type AttachResult = z.infer<typeof AttachResultSchema>;

/** A session's turns still running in the host, with the requests each waits on (as `respondToRequest` takes them). */
export const ReattachResultSchema = z
  .strictObject({
    turns: z.array(
      z.strictObject({
        threadRef: z.string().nullable(),
        turnRef: z.string().nullable(),
        pendingRequests: z.array(
          z.strictObject({ requestRef: z.string().nullable(), ordinal: z.number().int().positive() }),
        ),
      }),
    ),
  })
  .nullable();
export type ReattachResult = z.infer<typeof ReattachResultSchema>;

/** How the host process is started: `transport` and test behaviours (argv flags). */
export interface HostLaunchOptions {
  transport: "stdio" | "websocket";
  /** Test behaviour: never send `host.ready` (a startup timeout). */
  neverReady?: boolean;
}

export const HOST_FLAGS = { websocket: "--websocket", neverReady: "--never-ready" } as const;
