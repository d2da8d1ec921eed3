import { createHash } from "node:crypto";
import { z } from "zod";
import { RuntimeModeSchema } from "../../domain/entities.js";
import { InvalidInputError, ProtocolError } from "../../domain/errors.js";
import { ProviderEventSchema, type ProviderEvent } from "../contract.js";
import type { HostSpec, SpawnedHost } from "../kit/hostSpec.js";
import type { FrameRing } from "../kit/ring.js";
import type { RpcChannel } from "../kit/rpcChannel.js";
import { StdioChannel } from "../kit/stdioChannel.js";
import { hostScript } from "../kit/hostBundle.js";
import { malformedTerminal } from "../kit/malformedTerminal.js";

/**
 * How Claude is reached: the Agent SDK runs in a host process (`host/main.ts`) the runtime's registry starts from the
 * spec made here, with Claude's environment; the adapter and the host speak JSON-RPC over its stdio (newline-delimited
 * JSON): the calls below in, `event` notifications out. Both ends are untrusted by the other: the host checks every
 * call's params against these schemas, the adapter every result and event.
 */

/** An Anthropic-compatible model endpoint for Claude Code, instead of Anthropic's own API and the user's login. */
export interface ClaudeModelEndpoint {
  /** The endpoint's base URL, as Claude Code takes it (`ANTHROPIC_BASE_URL`): Claude POSTs `{baseUrl}/v1/messages`. */
  baseUrl: string;
  /**
   * The environment variable holding the endpoint's API key: looked up in the adapter's `env`, then in the embedder's,
   * once, when the adapter is made, and handed to Claude only, as `ANTHROPIC_API_KEY` in its host's environment. Never
   * logged, never sent over RPC, in the host key as a hash only.
   */
  apiKeyEnv: string;
  /** The model's name (`ANTHROPIC_MODEL`); omitted: Claude's default. A turn's own `model` still wins. */
  name?: string;
}

export interface ClaudeHostOptions {
  /** A Claude Code executable to drive instead of the one the SDK ships. */
  executable?: string;
  /** HOME and CLAUDE_CONFIG_DIR for Claude (tests give temporary ones). Omitted: the user's own. */
  home?: string;
  configDir?: string;
  /** The model endpoint Claude talks to. Omitted: Claude's own configuration decides (the user's login...). */
  model?: ClaudeModelEndpoint;
  /**
   * Environment for Claude beyond the host allowlist (src/runtime/hosts/environment.ts). The embedder's own
   * environment is not passed on, so anything else Claude needs goes here. Hashed into the host key; never logged,
   * never sent over RPC.
   */
  env?: Record<string, string>;
}

/** Claude's own opt-outs: no telemetry, no update checks, no traffic beyond the model API. */
const QUIET = {
  DISABLE_TELEMETRY: "1",
  CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC: "1",
  DISABLE_AUTOUPDATER: "1",
  DISABLE_ERROR_REPORTING: "1",
};

/**
 * Not overridable: no background tasks (agents and shells). A background task's end makes
 * Claude start a turn of its own, which, with no turn ids, would pass for the next run's.
 */
const NO_BACKGROUND = { CLAUDE_CODE_DISABLE_BACKGROUND_TASKS: "1" };

/**
 * What the model endpoint option decides in Claude's environment; `env` may not set it too (a bearer token would go
 * to the endpoint beside the key).
 */
const ENDPOINT_VARIABLES = ["ANTHROPIC_BASE_URL", "ANTHROPIC_API_KEY", "ANTHROPIC_AUTH_TOKEN", "ANTHROPIC_MODEL"];

interface EndpointEnvironment {
  ANTHROPIC_BASE_URL: string;
  ANTHROPIC_API_KEY: string;
  ANTHROPIC_MODEL?: string;
}

/** The model endpoint as Claude Code reads it from its environment, the key from `env`, else the embedder's. */
export function endpointEnvironment(
  model: ClaudeModelEndpoint,
  env: Record<string, string> = {},
  from: NodeJS.ProcessEnv = process.env,
): EndpointEnvironment {
  let url: URL;
  try {
    url = new URL(model.baseUrl);
  } catch {
    throw new InvalidInputError("model.baseUrl", "is not a URL");
  }
  if (url.protocol !== "http:" && url.protocol !== "https:")
    throw new InvalidInputError("model.baseUrl", "is not an http(s) URL");
  if (!/^[A-Za-z_][A-Za-z0-9_]*$/.test(model.apiKeyEnv))
    throw new InvalidInputError("model.apiKeyEnv", "is not an environment variable name");
  const key = env[model.apiKeyEnv] ?? from[model.apiKeyEnv];
  // Never the key itself in a message: only the name it was looked up under.
  if (!key) throw new InvalidInputError("model.apiKeyEnv", `the variable ${model.apiKeyEnv} is not set`);
  const clash = ENDPOINT_VARIABLES.filter((name) => name in env);
  if (clash.length > 0) throw new InvalidInputError("env", `sets ${clash.join(", ")}, which the model option decides`);
  return {
    ANTHROPIC_BASE_URL: model.baseUrl,
    ANTHROPIC_API_KEY: key,
    ...(model.name ? { ANTHROPIC_MODEL: model.name } : {}),
  };
}

// The host's calls. Each call's params are checked by the host, each result by the adapter.

const SandboxPolicySchema = z.enum(["read-only", "workspace-write", "full-access"]);
const HostRuntimeModeSchema = RuntimeModeSchema.required();

export const HOST_CALLS = {
  /** Claude's environment is the host's own (set at spawn), never a call's. */
  init: { params: z.strictObject({ executable: z.string().optional() }), result: z.null() },
  /**
   * `resume` a session, `fork` one (into a new session), or start a new one; `id`: a new session's id (default: a
   * fresh one). The thread starts in `runtimeMode`; each turn then names its own.
   */
  openThread: {
    params: z.strictObject({
      sessionId: z.string(),
      cwd: z.string(),
      model: z.string().nullable(),
      sandbox: SandboxPolicySchema,
      runtimeMode: HostRuntimeModeSchema,
      resume: z.string().optional(),
      fork: z.string().optional(),
      id: z.string().optional(),
    }),
    result: z.strictObject({ cursor: z.string() }),
  },
  send: {
    params: z.strictObject({
      cursor: z.string(),
      text: z.string(),
      model: z.string().nullish(),
      runtimeMode: HostRuntimeModeSchema,
    }),
    result: z.null(),
  },
  interrupt: { params: z.strictObject({ cursor: z.string() }), result: z.null() },
  turnAlive: { params: z.strictObject({ cursor: z.string() }), result: z.strictObject({ alive: z.boolean() }) },
  /** A permission answer: allow (with the user's answers, for AskUserQuestion) or deny. */
  respond: {
    params: z.strictObject({
      requestRef: z.string(),
      allow: z.boolean(),
      message: z.string().optional(),
      answers: z.record(z.string(), z.union([z.string(), z.array(z.string())])).optional(),
    }),
    result: z.null(),
  },
  rollback: {
    params: z.strictObject({ cursor: z.string(), turns: z.number().int().positive() }),
    result: z.strictObject({ cursor: z.string() }),
  },
  closeThreads: { params: z.strictObject({ sessionId: z.string() }), result: z.null() },
} as const;

export type HostMethod = keyof typeof HOST_CALLS;
export type HostParams<M extends HostMethod> = z.input<(typeof HOST_CALLS)[M]["params"]>;
export type HostResult<M extends HostMethod> = z.output<(typeof HOST_CALLS)[M]["result"]>;

/** What the host says on its own: each event of a provider session, and once that it is ready. */
export const HOST_NOTIFICATIONS = ["host.ready", "event"] as const;
export const EventParamsSchema = z.strictObject({ sessionId: z.string(), event: ProviderEventSchema });

/** Calls the host; a result not of the call's shape is a protocol error. */
export async function callHost<M extends HostMethod>(
  channel: RpcChannel,
  method: M,
  params: HostParams<M>,
  options: { timeoutMs?: number } = {},
): Promise<HostResult<M>> {
  const parsed = HOST_CALLS[method].result.safeParse(await channel.call(method, params, options));
  if (!parsed.success)
    throw new ProtocolError(`claude host: ${method} answered ${parsed.error.issues[0]?.message ?? "invalid"}`);
  return parsed.data as HostResult<M>;
}

/**
 * The spec of the Claude host: how it starts (Claude's environment), what makes two interchangeable, and the
 * handshake. `onEvent` gets every well-formed event the host sends; a malformed one is noted in the frame ring (and
 * dropped, but for a turn's end that names its thread: that turn ends, failed as a protocol error).
 */
export function claudeHostSpec(
  options: ClaudeHostOptions,
  onEvent: (sessionId: string, event: ProviderEvent) => void,
): HostSpec {
  const endpoint: Partial<EndpointEnvironment> = options.model ? endpointEnvironment(options.model, options.env) : {};
  // Set at spawn and read by the host from its own environment, never sent in a call: a frame
  // ring's dump of the init call would otherwise put the key in the log.
  const claudeEnv: Record<string, string> = {
    ...QUIET,
    ...(options.home ? { HOME: options.home } : {}),
    ...(options.configDir ? { CLAUDE_CONFIG_DIR: options.configDir } : {}),
    ...endpoint,
    ...options.env,
    ...NO_BACKGROUND,
  };
  const credentials = { ...options.env, ...endpoint };
  const { script, execArgs } = hostScript("./host/main.js", import.meta.url);

  const connect = async (host: SpawnedHost, ring: FrameRing): Promise<StdioChannel> => {
    const channel = new StdioChannel(host.child, ring);
    channel.expectNotifications([...HOST_NOTIFICATIONS]);
    // A host that breaks before it is ready (an over-long line...) fails the start at once, not at the startup timeout.
    const ready = channel.nextNotification("host.ready");
    channel.onNotification((method, params) => {
      if (method !== "event") return;
      const parsed = EventParamsSchema.safeParse(params);
      if (!parsed.success) {
        const issue = parsed.error.issues[0];
        const why = issue ? `${issue.path.map(String).join(".") || "(params)"}: ${issue.message}` : "invalid";
        channel.ring.note("invalid_params", `event: ${why}`);
        // A turn's end of the wrong shape that names its thread still ends that turn (failed: protocol_error).
        const { sessionId, event } = (params ?? {}) as { sessionId?: unknown; event?: unknown };
        const ended = typeof sessionId === "string" ? malformedTerminal(event, "the claude host", why) : null;
        return ended && onEvent(sessionId as string, ended);
      }
      onEvent(parsed.data.sessionId, parsed.data.event as ProviderEvent);
    });
    await ready;
    await callHost(channel, "init", options.executable ? { executable: options.executable } : {});
    return channel;
  };

  return {
    target: "claude",
    identity: {
      executable: options.executable ?? script,
      config: {
        home: options.home ?? null,
        configDir: options.configDir ?? null,
        baseUrl: options.model?.baseUrl ?? null,
        modelName: options.model?.name ?? null,
      },
      credentials: createHash("sha256").update(JSON.stringify(credentials)).digest("hex"),
    },
    // The host reads Claude's session store too (resume checks): it runs in Claude's environment,
    // and Claude inherits the host's. A user's relocated Claude config directory is inherited.
    spawn: { command: process.execPath, args: [...execArgs, script], env: claudeEnv, inherit: ["CLAUDE_CONFIG_DIR"] },
    connect,
    // The key is one, whatever its length; the endpoint's URL is none.
    secrets: [
      ...(endpoint.ANTHROPIC_API_KEY ? [endpoint.ANTHROPIC_API_KEY] : []),
      ...Object.values(options.env ?? {}).filter((v) => v.length >= 8),
    ],
  };
}
