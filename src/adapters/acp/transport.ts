import type { ChildProcess } from "node:child_process";
import { createHash } from "node:crypto";
import { HostUnavailableError, InvalidInputError } from "../../domain/errors.js";
import { readDiagnostics, resolveLimits, type ChannelLimits } from "../kit/frameLimits.js";
import type { SpawnSpec } from "../kit/hostSpec.js";
import { readLines } from "../kit/lines.js";
import type { FrameRing } from "../kit/ring.js";
import { RpcChannel } from "../kit/rpcChannel.js";
import type { AnyMessage, ClientApp, ClientConnection, JsonRpcId } from "./protocol/sdk.js";

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
    if ("method" in message && "id" in message) {
      this.#awaiting.add(message.id);
      if (message.method === "session/load") this.#loading.set(message.id, sessionOf(message.params));
    }
    const line = JSON.stringify(message);
    this.ring.push("out", line);
    this.tap?.("out", line);
    this.write(line);
  }

  /** One line from the agent: a JSON object goes to the SDK, anything else is noted. Never throws. */
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
    if (!isObject(message)) return this.ring.note("not_rpc", line);
    if (!("method" in message) && "id" in message) {
      const id = message.id as JsonRpcId;
      if (!this.#awaiting.delete(id)) return this.ring.note("unknown_reply", `id ${String(id)}`);
      this.#loading.delete(id);
    } else if (message.method === "session/update" && this.#replaying(sessionOf(message.params))) return;
    try {
      this.#inbound.enqueue(message as AnyMessage);
    } catch {
      // The connection is closed: nothing is read any more.
    }
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
    this.connection.close(error);
  }
}

/** A reply, or `host_unavailable` once the agent has not answered within `timeoutMs`: never a hang. */
export async function bounded<T>(reply: Promise<T>, timeoutMs: number, method: string): Promise<T> {
  let timer: NodeJS.Timeout | undefined;
  const timeout = new Promise<never>((_, reject) => {
    timer = setTimeout(
      () => reject(new HostUnavailableError(`host did not answer ${method} within ${timeoutMs} ms`)),
      timeoutMs,
    );
    timer.unref();
  });
  try {
    return await Promise.race([reply, timeout]);
  } finally {
    clearTimeout(timer);
  }
}
