/**
 * Public types of the loopback model simulator: an HTTP server on 127.0.0.1 that speaks
 * the provider wire formats well enough for the real agent binaries to run against it.
 */

export type DialectName = "responses" | "messages" | "gemini";

export interface SimulatorRequest {
  /** 1-based, in arrival order; equals the request's position in `requests` plus one. */
  id: number;
  method: string;
  /** Path plus query string, as received. */
  url: string;
  /** Lower-cased names; credentials are replaced by "[redacted]" so no token is ever kept. */
  headers: Record<string, string>;
  /** Parsed JSON when the body is JSON, the raw text otherwise, undefined when empty. */
  body: unknown;
  dialect: DialectName | "unknown";
  /** True once the client closed the connection before the response finished. */
  aborted: boolean;
  receivedAt: number;
}

export type ToolCallSpec =
  /** `args` is JSON-encoded; a string is sent verbatim as the arguments text (malformed JSON allowed). */
  { name: string; args?: unknown; id?: string } | { name: string; custom: true; input: string; id?: string };

export type ReplySpec =
  /** Streamed assistant text, optionally preceded by reasoning (a summary / thinking block). */
  | { text: string; reasoning?: string }
  /** Tool calls, optionally preceded by text. */
  | { tools: ToolCallSpec[]; text?: string }
  /** Stream opened with a first text delta, then held until the client aborts or releaseHang(). */
  | { hang: true; text?: string }
  /** An HTTP error in the dialect's error shape. */
  | { status: number; error?: string };

export type Reply = ReplySpec | ((request: SimulatorRequest) => ReplySpec);

export interface ModelSimulatorOptions {
  /** Defaults to 0 (an ephemeral port). The server only ever binds 127.0.0.1. */
  port?: number;
  /**
   * Answers out-of-band requests (titles, quota checks) without consuming the queue; null defers to the queue. A
   * dialect's own probes (a model check, Gemini's router) are answered before it is asked.
   */
  sideReply?: (request: SimulatorRequest) => ReplySpec | null;
  /** Used when the queue is empty; otherwise the reply is `{ text: "(simulator: no scripted reply)" }`. */
  defaultReply?: ReplySpec;
  log?: (line: string) => void;
}

export interface ModelSimulator {
  /** http://127.0.0.1:PORT without a trailing slash. */
  readonly url: string;
  readonly port: number;
  /** Appends to the one FIFO queue shared by every dialect. */
  push(...replies: Reply[]): void;
  /** Every request in arrival order, side requests and unrouted ones included (live array). */
  readonly requests: SimulatorRequest[];
  /** Resolves with all requests so far once at least `count` have arrived. */
  waitForRequests(count: number): Promise<SimulatorRequest[]>;
  /** Resolves once that request was aborted by the client; rejects if it finished normally instead. */
  waitForAbort(requestId: number): Promise<void>;
  /** Completes every stream hanging right now, as if the model had finished normally. */
  releaseHang(): void;
  /** Replies still queued. */
  pending(): number;
  /** Completes hanging streams, then closes the server and every socket. */
  close(): Promise<void>;
}
