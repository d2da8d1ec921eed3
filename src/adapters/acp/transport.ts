import type { ChildProcess } from "node:child_process";
import { createHash } from "node:crypto";
import { HostUnavailableError, InvalidInputError } from "../../domain/errors.js";
import { readDiagnostics, resolveLimits, type ChannelLimits } from "../kit/frameLimits.js";
import type { SpawnSpec } from "../kit/hostSpec.js";
import { readLines } from "../kit/lines.js";
import type { FrameAnomaly, FrameRing } from "../kit/ring.js";
import { answerDeadline, RpcChannel } from "../kit/rpcChannel.js";
import { z } from "zod";
import type { AnyMessage, ClientApp, ClientConnection, JsonRpcId, SessionNotification } from "./protocol/sdk.js";

/**
 * The one hand-written boundary of the ACP adapter: how an agent is started (its command line and environment, from
 * the target's options) and the channel to it. The agent speaks ACP (JSON-RPC 2.0, newline-delimited over stdio); the
 * ACP SDK's typed client (`client()`, its handlers and `ctx.request`) speaks it for the adapter, over messages this
 * channel reads under the kit's caps (an over-long line cuts the agent off as broken), records in the frame ring
 * (masked) and filters: a line that is not a JSON object, and a reply to no request, are noted in the ring and never
 * reach the SDK.
 */

/** How an ACP agent is started: any agent, named by its command line. */
export interface AcpAgentCommand {
  /** The agent's executable (a path, or a name on the host's PATH). */
  command: string;
  /** Its arguments, e.g. `["--acp"]`. */
  args?: string[];
  /**
   * Environment for the agent beyond the host allowlist (src/runtime/hosts/environment.ts): its home, its settings.
   * Hashed into the host key; never logged.
   */
  env?: Record<string, string>;
  /**
   * Credentials for the agent's environment (an API key...): handed to the agent's environment only, masked in every
   * diagnostic, in the host key as a hash. Never logged, never sent over ACP.
   */
  secretEnv?: Record<string, string>;
  /** Names the agent inherits from the embedder's environment when set (a home variable, never a credential). */
  inherit?: string[];
  /** The agent process's working directory (each ACP session names its own cwd). */
  cwd?: string;
}

const ENV_NAME = /^[A-Za-z_][A-Za-z0-9_]*$/;

/** The agent's spawn spec and what makes two agent hosts interchangeable; bad options are `invalid_input`. */
export function agentLaunch(agent: AcpAgentCommand): {
  spawn: SpawnSpec;
  identity: { executable: string; config: unknown; credentials: string | null };
  secrets: string[];
} {
  if (typeof agent.command !== "string" || agent.command.length === 0)
    throw new InvalidInputError("agent.command", "must name the agent's executable");
  const args = agent.args ?? [];
  if (!Array.isArray(args) || args.some((a) => typeof a !== "string"))
    throw new InvalidInputError("agent.args", "must be a list of strings");
  for (const [field, env] of [
    ["agent.env", agent.env ?? {}],
    ["agent.secretEnv", agent.secretEnv ?? {}],
  ] as const) {
    for (const [name, value] of Object.entries(env)) {
      if (!ENV_NAME.test(name)) throw new InvalidInputError(field, `${name} is not an environment variable name`);
      if (typeof value !== "string") throw new InvalidInputError(field, `${name} must be a string`);
    }
  }
  const secretEnv = agent.secretEnv ?? {};
  const clash = Object.keys(secretEnv).filter((name) => name in (agent.env ?? {}));
  if (clash.length > 0) throw new InvalidInputError("agent.env", `sets ${clash.join(", ")}, also in secretEnv`);
  const secrets = Object.values(secretEnv).filter((v) => v.length > 0);
  return {
    spawn: {
      command: agent.command,
      args,
      env: { ...agent.env, ...secretEnv },
      ...(agent.inherit ? { inherit: agent.inherit } : {}),
      ...(agent.cwd ? { cwd: agent.cwd } : {}),
    },
    identity: {
      executable: agent.command,
      config: { args, env: agent.env ?? {}, cwd: agent.cwd ?? null },
      credentials: secrets.length > 0 ? createHash("sha256").update(JSON.stringify(secretEnv)).digest("hex") : null,
    },
    secrets,
  };
}

// ---------------------------------------------------------------------------------------------
// What the client takes from the agent

/** The `sessionUpdate` kinds ACP has (the SDK's unstable schema): the mapper projects some, the rest are ignored. */
const UPDATE_KINDS = new Set([
  "agent_message_chunk",
  "agent_thought_chunk",
  "user_message_chunk",
  "tool_call",
  "tool_call_update",
  "plan",
  "plan_update",
  "plan_removed",
  "available_commands_update",
  "current_mode_update",
  "config_option_update",
  "session_info_update",
  "usage_update",
  "notice",
  "compaction_update",
  "compaction_summary_chunk",
  "subagent_update",
  "session_message",
  "session_message_chunk",
]);

const text = z.string();
const optionalText = z.string().nullish();
const ContentBlockCheck = z.looseObject({ type: z.string(), text: z.string().optional() });
const ToolContentCheck = z.union([
  z.looseObject({ type: z.literal("content"), content: ContentBlockCheck }),
  z.looseObject({ type: z.literal("diff"), path: text, oldText: optionalText, newText: text }),
  z.looseObject({ type: z.literal("terminal"), terminalId: text }),
]);
const ToolCheck = z.looseObject({
  toolCallId: text,
  kind: optionalText,
  status: optionalText,
  title: optionalText,
  name: optionalText,
  content: z.array(ToolContentCheck).nullish(),
  locations: z.array(z.looseObject({ path: text })).nullish(),
});
/** What the mapper and the adapter read of each update kind, checked before anything reads it. */
const UPDATE_CHECKS: Record<string, z.ZodType> = {
  agent_message_chunk: z.looseObject({ content: ContentBlockCheck, messageId: optionalText }),
  agent_thought_chunk: z.looseObject({ content: ContentBlockCheck, messageId: optionalText }),
  user_message_chunk: z.looseObject({ content: ContentBlockCheck }),
  tool_call: ToolCheck.extend({ title: text }),
  tool_call_update: ToolCheck,
  plan: z.looseObject({ entries: z.array(z.looseObject({ content: text, status: text })) }),
  config_option_update: z.looseObject({
    configOptions: z.array(z.looseObject({ id: text, type: text, category: optionalText })),
  }),
};
const NotificationCheck = z.looseObject({ sessionId: text, update: z.looseObject({ sessionUpdate: text }) });
const PermissionCheck = z.looseObject({
  sessionId: text,
  toolCall: ToolCheck,
  options: z.array(z.looseObject({ optionId: text, kind: text, name: text })),
});

/** The notifications and requests this client takes: any other is noted (a request is still refused by the SDK). */
const NOTIFICATIONS = new Set(["session/update", "$/cancel_request"]);
const REQUESTS = new Set(["session/request_permission"]);

type Anomaly = { kind: FrameAnomaly; sample?: string; forward: boolean };

/** Why a parsed frame is no message this client takes (null: it is one). */
function inspect(message: unknown): Anomaly | null {
  if (!isObject(message)) return { kind: "not_rpc", forward: false };
  if (message.jsonrpc !== "2.0") return { kind: "not_rpc", forward: false };
  const { method, id } = message;
  if (typeof method !== "string") {
    if (id === undefined || id === null)
      return { kind: "error" in message ? "unknown_reply" : "not_rpc", forward: false };
    return null;
  }
  if (id !== undefined) {
    if (!REQUESTS.has(method))
      return { kind: "unhandled_request", sample: `${method} (id ${JSON.stringify(id)})`, forward: true };
    const checked = PermissionCheck.safeParse(message.params);
    return checked.success
      ? null
      : { kind: "invalid_params", sample: `${method}: ${why(checked.error)}`, forward: true };
  }
  if (!NOTIFICATIONS.has(method)) return { kind: "unknown_notification", sample: method, forward: false };
  if (method !== "session/update") return null;
  const notification = NotificationCheck.safeParse(message.params);
  if (!notification.success)
    return { kind: "invalid_params", sample: `${method}: ${why(notification.error)}`, forward: false };
  const kind = notification.data.update.sessionUpdate;
  if (!UPDATE_KINDS.has(kind))
    return { kind: "invalid_params", sample: `${method}: no update kind ${kind}`, forward: false };
  const update = UPDATE_CHECKS[kind]?.safeParse(notification.data.update);
  if (update && !update.success)
    return { kind: "invalid_params", sample: `${method} ${kind}: ${why(update.error)}`, forward: false };
  return null;
}

const why = (error: z.ZodError): string => {
  const issue = error.issues[0];
  return issue ? `${issue.path.map(String).join(".") || "(params)"}: ${issue.message}` : "invalid";
};

/**
 * The session updates the channel let through: checked (above) for what the adapter reads, so the SDK is not asked
 * to parse them again (a frame its schema refuses would be printed, by the SDK, to the console).
 */
export const checkedNotification = (params: unknown): SessionNotification => params as SessionNotification;

/** The `sessionId` of a message's params (empty where there is none). */
function sessionOf(params: unknown): string {
  const id = isObject(params) ? params.sessionId : undefined;
  return typeof id === "string" ? id : "";
}

const isObject = (value: unknown): value is Record<string, unknown> =>
  typeof value === "object" && value !== null && !Array.isArray(value);

/**
 * An ACP agent's stdio as the kit's channel (what the host registry watches: its failure, its liveness probe) and as
 * the SDK's message stream (what the adapter's client speaks ACP over). Calls through the kit's interface (the
 * registry's probe) go through the SDK's connection too: one id space, one writer.
 */
export class AcpChannel extends RpcChannel {
  readonly connection: ClientConnection;
  #inbound!: ReadableStreamDefaultController<AnyMessage>;
  /** Ids of the requests the client sent that await a reply: a reply to any other id is noted, never delivered. */
  #awaiting = new Set<JsonRpcId>();
  /**
   * Sessions being loaded, by the id of their `session/load`: the updates the agent sends of such a session before
   * the load's reply are its history replayed, and are dropped here, where the order of the lines is still exact (the
   * SDK dispatches notifications and replies on separate paths, so past this point a reply may overtake them).
   */
  #loading = new Map<JsonRpcId, string>();
  /** Session updates handed to the SDK, and those its handler has taken (`taken`): a reply waits on the difference. */
  #updatesIn = 0;
  #updatesTaken = 0;
  #untilTaken: Array<{ count: number; resolve: () => void }> = [];
  /** The agent's requests the client owes a reply, and who waits for it to be written (`replied`). */
  #owed = new Map<string, Array<() => void>>();

  constructor(
    private readonly child: ChildProcess,
    ring: FrameRing,
    app: ClientApp,
    limits: ChannelLimits = {},
  ) {
    super(ring);
    const { frameBytes, stderrLineBytes } = resolveLimits(limits);
    const readable = new ReadableStream<AnyMessage>({ start: (controller) => void (this.#inbound = controller) });
    const writable = new WritableStream<AnyMessage>({ write: (message) => this.#send(message) });
    this.connection = app.connect({ readable, writable });
    readLines(child.stdout!, {
      maxLineBytes: frameBytes,
      onLine: (line) => this.receive(line),
      onOverflow: (overflow) => this.overflowed("stdout", overflow),
    });
    readDiagnostics(child.stderr!, ring, "stderr", stderrLineBytes, (error) => this.fail(error));
    child.stdin!.on("error", () => undefined); // a dead agent: calls fail through the exit path
    void this.connection.closed.then(() => this.fail(new HostUnavailableError("the ACP connection closed")));
  }

  protected write(line: string): void {
    this.child.stdin!.write(`${line}\n`);
  }

  #send(message: AnyMessage): void {
    if (this.failed) return;
    if (!("method" in message) && "id" in message) {
      const key = JSON.stringify(message.id);
      for (const waiter of this.#owed.get(key) ?? []) waiter();
      this.#owed.delete(key);
    }
    if ("method" in message && "id" in message) {
      this.#awaiting.add(message.id);
      if (message.method === "session/load") this.#loading.set(message.id, sessionOf(message.params));
    }
    const line = JSON.stringify(message);
    this.ring.push("out", line);
    this.tap?.("out", line);
    this.write(line);
  }

  /**
   * One line from the agent: a message this client takes goes to the SDK; anything else is noted in the ring (by kind,
   * sampled) and goes nowhere: not JSON, not a JSON-RPC message, a reply to no request, an error with no id, a
   * notification it does not take, an update of the wrong shape. A request it does not serve still goes to the SDK,
   * which refuses it (noted too). Never throws.
   */
  protected override receive(line: string): void {
    this.ring.push("in", line);
    this.tap?.("in", line);
    if (line.trim() === "") return;
    let message: unknown;
    try {
      message = JSON.parse(line);
    } catch {
      return this.ring.note("not_json", line);
    }
    const anomaly = inspect(message);
    if (anomaly) {
      this.ring.note(anomaly.kind, anomaly.sample ?? line);
      if (!anomaly.forward) return;
    }
    const frame = message as Record<string, unknown>;
    if (!("method" in frame)) {
      const id = frame.id as JsonRpcId;
      if (!this.#awaiting.delete(id)) return this.ring.note("unknown_reply", `id ${JSON.stringify(id)}`);
      this.#loading.delete(id);
    } else if (frame.method === "session/update" && this.#replaying(sessionOf(frame.params))) return;
    else if ("id" in frame) this.#owed.set(JSON.stringify(frame.id), []);
    else if (frame.method === "session/update") this.#updatesIn += 1;
    try {
      this.#inbound.enqueue(frame as AnyMessage);
    } catch {
      // The connection is closed: nothing is read any more.
    }
  }

  /**
   * Resolves once the client's replies to these agent requests are written (the SDK writes a handler's answer a few
   * turns of the event loop after it settles; one written already is not waited for), or `timeoutMs` passes.
   */
  replied(ids: JsonRpcId[], timeoutMs: number): Promise<void> {
    const written = ids.flatMap((id) => {
      const waiters = this.#owed.get(JSON.stringify(id));
      return waiters ? [new Promise<void>((resolve) => waiters.push(resolve))] : [];
    });
    return bounded(
      Promise.all(written).then(() => undefined),
      timeoutMs,
      "the replies",
    ).catch(() => undefined);
  }

  /** The adapter's handler took a session update (every one the channel handed over is taken, once). */
  taken(): void {
    this.#updatesTaken += 1;
    this.#untilTaken = this.#untilTaken.filter((w) => (w.count <= this.#updatesTaken ? void w.resolve() : true));
  }

  /**
   * Resolves once every session update read so far has been taken by the adapter's handler. The SDK dispatches
   * notifications and replies on separate paths, so a reply (a prompt's response) may reach the adapter before the
   * updates the agent sent ahead of it: the turn's end waits on this, so that none of its own updates comes after it.
   */
  updatesTaken(): Promise<void> {
    if (this.#updatesTaken >= this.#updatesIn || this.failed) return Promise.resolve();
    return new Promise((resolve) => this.#untilTaken.push({ count: this.#updatesIn, resolve }));
  }

  #replaying(sessionId: string): boolean {
    for (const loading of this.#loading.values()) if (loading === sessionId) return true;
    return false;
  }

  /**
   * A call through the kit's interface (the registry's liveness probe) goes through the SDK's connection, bounded: an
   * agent that does not answer within `timeoutMs` (default 30 s) gets `host_unavailable`, never a hang.
   */
  override async call(
    method: string,
    params?: unknown,
    options: { bypassGate?: boolean; timeoutMs?: number } = {},
  ): Promise<unknown> {
    if (this.failed) throw new HostUnavailableError(`the ACP agent is gone; ${method} was not sent`);
    return bounded(this.connection.agent.request(method, params), options.timeoutMs ?? 30_000, method);
  }

  override notify(method: string, params?: unknown): void {
    if (this.failed) throw new HostUnavailableError(`the ACP agent is gone; ${method} was not sent`);
    void this.connection.agent.notify(method, params).catch(() => undefined);
  }

  override fail(error: Error): void {
    if (this.failed) return;
    super.fail(error);
    for (const waiter of this.#untilTaken.splice(0)) waiter.resolve();
    this.connection.close(error);
  }
}

/** A reply, or `host_unavailable` once the agent has not answered within `timeoutMs`: never a hang. */
export async function bounded<T>(reply: Promise<T>, timeoutMs: number, method: string): Promise<T> {
  const { expired, clear } = answerDeadline(method, timeoutMs);
  try {
    return await Promise.race([reply, expired]);
  } finally {
    clear();
  }
}
