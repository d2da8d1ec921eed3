import { z } from "zod";
import { CapabilityUnsupportedError, ConflictError, InvalidInputError, ProtocolError } from "../../../domain/errors.js";
import { errorResponse, notification, result, RpcMessageSchema, type RpcMessage } from "../../kit/jsonRpc.js";
import type { ProviderAdapter, ProviderEvent, SendRunInput } from "../../contract.js";
import { createScriptedAdapter, type ScriptedAdapterOptions } from "./provider.js";
import { ScriptedBackend } from "./backend.js";
import { keyedScript } from "./script.js";
import { Flights } from "./flights.js";
import { HOST_PROTOCOL_VERSION, InitParamsSchema, type AttachResult, type ResumeResult } from "../protocol/host.js";
import { resolveCapabilities } from "../capabilities.js";

/**
 * The scripted host's relay, independent of the transport: one scripted adapter (created by
 * `init`), its calls by name, and its events as numbered `event` notifications kept in a
 * bounded buffer so a client that reconnects can `resume` without losing any.
 *
 * Live events go to the current connection only once it is in sync, i.e. after it called
 * `init` or `resume`; a fresh connection to a running host gets the events it missed (and
 * every later one) through `resume`, in order and without duplicates. A client that takes up a
 * host it never talked to (a new life of the runtime adopting it) calls `attach` instead: live
 * from the host's current seq on, nothing replayed (its log has what the host sent before), and
 * `reattach` tells it what a session still runs and waits on.
 */

/** How many sent `event` notifications the host keeps for `resume`. */
export const EVENT_BUFFER_LIMIT = 10_000;

/** One client connection. `send` must enqueue synchronously, in call order. */
export interface HostConnection {
  /** Resolves once the transport has taken the message (never rejects). */
  send(message: RpcMessage): Promise<void>;
  /** Sends one frame as it is (`debug.emitRaw`). */
  sendText(text: string): Promise<void>;
}

export interface HostHooks {
  /** `debug.dropConnections`; absent when the transport has no connections to drop (stdio). */
  dropConnections?: () => void;
  /** `debug.stopListening`; absent on stdio. */
  stopListening?: () => void;
  /** The event pump failed: the host cannot go on. */
  onFatal?: (error: unknown) => void;
  /** `debug.flood`: writes `bytes` without a newline on a stream (a broken host, for the runtime's caps). */
  flood?: (stream: FloodStream, bytes: number) => void;
}

export type FloodStream = "stdout" | "stderr" | "websocket";

const JSONRPC_PARSE_ERROR = -32700;
const JSONRPC_INVALID_REQUEST = -32600;
const JSONRPC_METHOD_NOT_FOUND = -32601;

const REQUIRED_METHODS = [
  "startSession",
  "stopSession",
  "ensureProviderThread",
  "sendRun",
  "interrupt",
  "isTurnAlive",
  "respondToRequest",
] as const;
/** Optional adapter methods and the capability that makes them exist. */
const OPTIONAL_METHODS = {
  steerRun: "turns.supportsActiveSteering",
  readThreadSnapshot: "threads.canReadThreadSnapshot",
  rollbackThread: "threads.canRollbackThread",
  forkThread: "threads.canForkThread",
  summarize: "context.canGenerateSummaries",
} as const;
type AdapterMethod = (typeof REQUIRED_METHODS)[number] | keyof typeof OPTIONAL_METHODS;

const isAdapterMethod = (method: string): method is AdapterMethod =>
  (REQUIRED_METHODS as readonly string[]).includes(method) || Object.hasOwn(OPTIONAL_METHODS, method);

const ResumeParamsSchema = z.strictObject({ afterSeq: z.number().int().nonnegative() });
const ReattachParamsSchema = z.strictObject({ sessionId: z.string().min(1) });
const OpenGateParamsSchema = z.strictObject({ name: z.string().min(1) });
/** `thenOpenGate`: a gate opened once the connections are cut, so the turn goes on while nobody listens. */
const DropParamsSchema = z.strictObject({ thenOpenGate: z.string().min(1).optional() });
const FloodParamsSchema = z.strictObject({
  stream: z.enum(["stdout", "stderr", "websocket"]),
  bytes: z.number().int().positive(),
});
/**
 * Events given as JSON texts, spliced verbatim into `event` notifications: hostile events for
 * the runtime's pump, including what this host could not serialize itself (nesting deeper
 * than JSON.stringify can walk). Not kept for `resume`.
 */
const EmitRawParamsSchema = z.strictObject({ sessionId: z.string(), events: z.array(z.string()) });
/** `debug.emitRawParams`: whole `event` params as JSON texts, spliced verbatim (an envelope of the wrong shape). */
const EmitRawParamsParamsSchema = z.strictObject({ params: z.array(z.string()) });
/** `debug.replyOnce`: the next reply to `method` is `result` instead of its own (a reply of the wrong shape). */
const ReplyOnceParamsSchema = z.strictObject({ method: z.string().min(1), result: z.unknown() });

class MethodNotFound extends Error {}

interface Initialized {
  adapter: ProviderAdapter;
  backend: ScriptedBackend;
}

function parseParams<T>(schema: z.ZodType<T>, params: unknown, what: string): T {
  const parsed = schema.safeParse(params ?? {});
  if (parsed.success) return parsed.data;
  const issue = parsed.error.issues[0];
  const field = issue ? issue.path.map(String).join(".") : "";
  throw new InvalidInputError(field || what, issue?.message ?? "invalid params", { method: what });
}

function asInput(params: unknown, method: string): Record<string, unknown> {
  if (typeof params !== "object" || params === null || Array.isArray(params)) {
    throw new InvalidInputError("params", `${method} takes the adapter method's input object`, { method });
  }
  return params as Record<string, unknown>;
}

const rpcError = (id: number | null, code: number, message: string): RpcMessage => ({
  jsonrpc: "2.0",
  id,
  error: { code, message },
});

export class ScriptedHost {
  readonly #hooks: HostHooks;
  readonly #bufferLimit: number;
  #state: Initialized | null = null;
  #seq = 0;
  #buffer: { seq: number; message: RpcMessage }[] = [];
  /** Sessions started and not stopped, with their threads that have a turn in flight. */
  #flights = new Flights();
  #current: { connection: HostConnection; live: boolean } | null = null;
  #pump: Promise<void> | null = null;
  /** Replies to give once instead of a call's own (`debug.replyOnce`), by method. */
  #replyOnce = new Map<string, unknown>();

  constructor(hooks: HostHooks = {}, bufferLimit = EVENT_BUFFER_LIMIT) {
    this.#hooks = hooks;
    this.#bufferLimit = bufferLimit;
  }

  /** A new client: it replaces the previous one and is greeted with `host.ready`. */
  connect(connection: HostConnection): void {
    this.#current = { connection, live: false };
    void connection.send(notification("host.ready", { pid: process.pid, protocol: HOST_PROTOCOL_VERSION }));
  }

  disconnect(connection: HostConnection): void {
    if (this.#current?.connection === connection) this.#current = null;
  }

  /** Handles one incoming frame or line; never rejects (failures become error responses). */
  async receive(connection: HostConnection, text: string): Promise<void> {
    let raw: unknown;
    try {
      raw = JSON.parse(text);
    } catch {
      await connection.send(rpcError(null, JSONRPC_PARSE_ERROR, "parse error: not JSON"));
      return;
    }
    const parsed = RpcMessageSchema.safeParse(raw);
    if (!parsed.success) {
      const id = (raw as { id?: unknown } | null)?.id;
      await connection.send(
        rpcError(Number.isInteger(id) ? (id as number) : null, JSONRPC_INVALID_REQUEST, "invalid JSON-RPC message"),
      );
      return;
    }
    const message = parsed.data;
    if (!("method" in message)) return; // a response: the host never sends requests
    if (!("id" in message)) {
      process.stderr.write(`scripted host: ignoring notification ${message.method}\n`);
      return;
    }
    const { id, method, params } = message;
    if (method === "resume") {
      // Replay, state and response in one synchronous step: no live event can slip in between.
      this.#resume(connection, id, params);
      return;
    }
    if (method === "attach") {
      // The seq and going live in one synchronous step: every later event is past that seq.
      this.#attach(connection, id);
      return;
    }
    let response: RpcMessage;
    let after: (() => void) | undefined;
    try {
      response = result(id, this.#reply(method, await this.#call(connection, method, params)));
      if (method === "debug.dropConnections") {
        const { thenOpenGate } = parseParams(DropParamsSchema, params, method);
        const drop = this.#hooks.dropConnections;
        after = () => {
          drop?.();
          if (thenOpenGate) this.#state?.backend.openGate(thenOpenGate);
        };
      }
      if (method === "debug.stopListening") after = this.#hooks.stopListening;
      if (method === "debug.flood") {
        const { stream, bytes } = parseParams(FloodParamsSchema, params, method);
        after = () => this.#hooks.flood?.(stream, bytes);
      }
    } catch (error) {
      response =
        error instanceof MethodNotFound
          ? rpcError(id, JSONRPC_METHOD_NOT_FOUND, error.message)
          : errorResponse(id, error);
    }
    await connection.send(response);
    after?.();
  }

  /** Stops every session and ends the event stream. */
  async close(): Promise<void> {
    if (!this.#state) return;
    await this.#state.adapter.close();
    await this.#pump;
  }

  async #call(connection: HostConnection, method: string, params: unknown): Promise<unknown> {
    switch (method) {
      case "init":
        return this.#init(connection, params);
      case "reattach":
        this.#initialized();
        return this.#flights.reattach(parseParams(ReattachParamsSchema, params, method).sessionId);
      case "openGate": {
        const { name } = parseParams(OpenGateParamsSchema, params, method);
        this.#initialized().backend.openGate(name);
        return null;
      }
      case "debug.dropConnections":
      case "debug.stopListening": {
        const hook = method === "debug.dropConnections" ? this.#hooks.dropConnections : this.#hooks.stopListening;
        if (!hook) throw new ProtocolError(`${method} needs the websocket transport`, { method });
        return null; // the hook runs once the response is out
      }
      case "debug.flood": {
        const { stream } = parseParams(FloodParamsSchema, params, method);
        if (!this.#hooks.flood) throw new ProtocolError(`${method} is not available in this host`, { method });
        if (stream === "websocket" && !this.#hooks.dropConnections)
          throw new ProtocolError(`${method} on websocket needs the websocket transport`, { method });
        return null; // the flood starts once the response is out
      }
      case "debug.emitRaw": {
        const { sessionId, events } = parseParams(EmitRawParamsSchema, params, method);
        this.#initialized();
        for (const json of events) {
          this.#seq += 1;
          void connection.sendText(
            `{"jsonrpc":"2.0","method":"event","params":{"seq":${this.#seq},` +
              `"sessionId":${JSON.stringify(sessionId)},"event":${json}}}`,
          );
        }
        return { sent: events.length };
      }
      case "debug.emitRawParams": {
        const texts = parseParams(EmitRawParamsParamsSchema, params, method).params;
        this.#initialized();
        for (const json of texts) void connection.sendText(`{"jsonrpc":"2.0","method":"event","params":${json}}`);
        return { sent: texts.length };
      }
      case "debug.replyOnce": {
        const once = parseParams(ReplyOnceParamsSchema, params, method);
        this.#replyOnce.set(once.method, once.result ?? null);
        return null;
      }
    }
    if (isAdapterMethod(method)) return this.#adapterCall(method, params);
    throw new MethodNotFound(`method not found: ${method}`);
  }

  /** A call's reply, or the one `debug.replyOnce` set for its method (given once). */
  #reply(method: string, value: unknown): unknown {
    if (!this.#replyOnce.has(method)) return value;
    const once = this.#replyOnce.get(method);
    this.#replyOnce.delete(method);
    return once;
  }

  #initialized(): Initialized {
    if (!this.#state) throw new ProtocolError("the host is not initialized: call init first");
    return this.#state;
  }

  #init(connection: HostConnection, params: unknown): null {
    if (this.#state) throw new ConflictError("the host is already initialized");
    const { capabilities, scripts, chunkDelayMs } = parseParams(InitParamsSchema, params, "init");
    const backend = new ScriptedBackend();
    // A full record or overrides: validated (invalid_input when wrong). The host serves re-attach itself (its
    // `reattach` call, from the turns it keeps): the provider in it is not asked to.
    const record = resolveCapabilities(capabilities as ScriptedAdapterOptions["capabilities"]);
    const adapter = createScriptedAdapter({
      capabilities: { ...record, sessions: { ...record.sessions, pendingRequestsSurviveRestart: false } },
      script: keyedScript(scripts),
      backend,
      ...(chunkDelayMs === undefined ? {} : { chunkDelayMs }),
    });
    this.#state = { adapter, backend };
    if (this.#current?.connection === connection) this.#current.live = true;
    this.#pump = this.#runPump(adapter).catch((error: unknown) => {
      if (this.#hooks.onFatal) this.#hooks.onFatal(error);
      else throw error;
    });
    return null;
  }

  async #adapterCall(method: AdapterMethod, params: unknown): Promise<unknown> {
    const { adapter } = this.#initialized();
    const input = asInput(params, method);
    if (method === "sendRun") {
      const run = input as unknown as SendRunInput;
      if (typeof run.thread?.resumeCursor !== "string")
        throw new InvalidInputError("thread.resumeCursor", "sendRun needs a thread handle");
      return this.#flights.sendRun(run, () => adapter.sendRun(run));
    }
    const fn = adapter[method] as ((input: unknown) => Promise<unknown>) | undefined;
    if (!fn) {
      const capability = OPTIONAL_METHODS[method as keyof typeof OPTIONAL_METHODS];
      throw new CapabilityUnsupportedError(
        capability,
        `the scripted provider declares no ${capability}, so it has no ${method}`,
      );
    }
    const value = await fn.call(adapter, input);
    const sessionId = typeof input.sessionId === "string" ? input.sessionId : null;
    if (method === "startSession" && sessionId !== null) this.#flights.started(sessionId);
    if (method === "stopSession" && sessionId !== null) this.#flights.stopped(sessionId);
    if (method === "respondToRequest" && sessionId !== null) this.#flights.answered(sessionId, input);
    return value ?? null;
  }

  async #runPump(adapter: ProviderAdapter): Promise<void> {
    for await (const { sessionId, event } of adapter.streamEvents()) {
      this.#flights.track(sessionId, event);
      this.#relay(sessionId, event);
    }
  }

  /** Numbers an event, keeps it for `resume` and sends it to a live connection. */
  #relay(sessionId: string, event: ProviderEvent): void {
    this.#seq += 1;
    const message = notification("event", { seq: this.#seq, sessionId, event });
    this.#buffer.push({ seq: this.#seq, message });
    if (this.#buffer.length > this.#bufferLimit) this.#buffer.shift();
    if (this.#current?.live) void this.#current.connection.send(message);
  }

  /** A client taking up this running host: live from the current seq on, nothing replayed. */
  #attach(connection: HostConnection, id: number): void {
    let value: AttachResult;
    try {
      this.#initialized();
      value = { seq: this.#seq };
    } catch (error) {
      void connection.send(errorResponse(id, error));
      return;
    }
    void connection.send(result(id, this.#reply("attach", value)));
    if (this.#current?.connection === connection) this.#current.live = true;
  }

  #resume(connection: HostConnection, id: number, params: unknown): void {
    let value: ResumeResult;
    try {
      this.#initialized();
      const { afterSeq } = parseParams(ResumeParamsSchema, params, "resume");
      const missed = this.#buffer.filter((entry) => entry.seq > afterSeq);
      const oldest = this.#buffer[0]?.seq;
      if (oldest !== undefined && oldest > afterSeq + 1) {
        process.stderr.write(
          `scripted host: resume after ${afterSeq}: events up to ${oldest - 1} are no longer buffered\n`,
        );
      }
      for (const entry of missed) void connection.send(entry.message);
      value = {
        replayed: missed.length,
        sessions: this.#flights.sessions(),
      };
    } catch (error) {
      void connection.send(errorResponse(id, error));
      return;
    }
    void connection.send(result(id, this.#reply("resume", value)));
    if (this.#current?.connection === connection) this.#current.live = true;
  }
}
