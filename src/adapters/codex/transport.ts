import type { ChildProcess } from "node:child_process";
import { createHash } from "node:crypto";
import { existsSync } from "node:fs";
import { createRequire } from "node:module";
import { delimiter, join } from "node:path";
import { HostUnavailableError, InvalidInputError, ProtocolError } from "../../domain/errors.js";
import type { RpcMessage } from "../kit/jsonRpc.js";
import type { HostSpec } from "../kit/hostSpec.js";
import type { FrameRing } from "../kit/ring.js";
import { StdioChannel } from "../kit/stdioChannel.js";
import {
  checkReply,
  parseNotification,
  parseServerRequest,
  whereabouts,
  type CodexNotification,
  type CodexServerAnswer,
  type CodexServerRequest,
  type UnhandledServerRequest,
  type Whereabouts,
} from "./checks.js";
import type { CodexCalls, InitializeResponse } from "./protocol/types.js";

/**
 * The one hand-written boundary of the Codex adapter: where the binary comes from, how
 * `codex app-server` is started (its command line: the model endpoint and config overrides),
 * and the channel to it. The app-server speaks JSON-RPC over stdio as JSON lines without the
 * `"jsonrpc"` field, and sends requests of its own (approvals, user input, tool calls). Calls
 * and answers are typed by the generated bindings (protocol/types.ts); what the app-server sends
 * is untrusted: the notifications the mapper reads, the requests it answers and the replies the
 * adapter reads (`send`) are checked where they arrive (checks.ts).
 */

// ---------------------------------------------------------------------------------------------
// The binary

export function resolveCodexBinary(explicit?: string): string {
  if (explicit) return explicit;
  for (const dir of (process.env.PATH ?? "").split(delimiter)) {
    const candidate = join(dir, "codex");
    if (dir && existsSync(candidate)) return candidate;
  }
  const installed = installedCodexBinary();
  if (installed) return installed;
  throw new HostUnavailableError("no codex binary: pass `binary`, put `codex` on PATH, or install @openai/codex");
}

/** The native binary shipped by the installed `@openai/codex` package (spawned directly: no Node shim in between). */
export function installedCodexBinary(): string | null {
  const arch = process.arch === "x64" ? "x86_64" : process.arch === "arm64" ? "aarch64" : null;
  const os =
    process.platform === "linux" ? "unknown-linux-musl" : process.platform === "darwin" ? "apple-darwin" : null;
  if (!arch || !os) return null;
  try {
    const require = createRequire(import.meta.url);
    const pkg = require.resolve(`@openai/codex-${process.platform}-${process.arch}/package.json`);
    const binary = join(pkg, "..", "vendor", `${arch}-${os}`, "bin", "codex");
    return existsSync(binary) ? binary : null;
  } catch {
    return null;
  }
}

// ---------------------------------------------------------------------------------------------
// The command line

/** An OpenAI-compatible model endpoint Codex talks to instead of its configured provider. */
export interface CodexModelEndpoint {
  /** The API's base URL as OpenAI clients take it (`https://api.openai.com/v1`): Codex POSTs `{baseUrl}/responses`. */
  baseUrl: string;
  /** The environment variable holding the API key: looked up in the adapter's `env`, then in the embedder's. */
  apiKeyEnv: string;
  /** The model's name; omitted: Codex's configured one. */
  name?: string;
  /** Retries of a failed request and of a broken stream; omitted: Codex's defaults. */
  maxRetries?: number;
}

/** A config value of Codex's `-c key=value` (the value is TOML: a string, number, boolean or array of strings). */
export type CodexConfigValue = string | number | boolean | readonly string[];

/** The provider id the endpoint is registered under, in this process's command line only. */
const ENDPOINT_PROVIDER = "tiller_endpoint";
const SHELL_EXCLUDE = "shell_environment_policy.exclude";

/**
 * The app-server's command line: the endpoint as a model provider, and the config overrides,
 * as `-c` flags (nothing is written to a config file). The key itself never appears here: Codex
 * reads it from the variable named by `env_key`, which is in the host's environment only. That
 * variable is also kept out of the environment of the model's commands: Codex's shell snapshot
 * (`$CODEX_HOME/shell_snapshots/*.sh`) would otherwise write it to disk (measured on 0.171.0).
 */
function appServerArgs(model: CodexModelEndpoint | undefined, config: Record<string, CodexConfigValue>) {
  const settings: Array<[string, CodexConfigValue]> = [];
  const overrides = { ...config };
  if (model) {
    const excluded = overrides[SHELL_EXCLUDE];
    overrides[SHELL_EXCLUDE] = [...(Array.isArray(excluded) ? excluded : []), model.apiKeyEnv];
    const provider = `model_providers.${ENDPOINT_PROVIDER}`;
    settings.push(
      ["model_provider", ENDPOINT_PROVIDER],
      [`${provider}.name`, "OpenAI-compatible endpoint (Tiller)"],
      [`${provider}.base_url`, model.baseUrl],
      [`${provider}.env_key`, model.apiKeyEnv],
      [`${provider}.wire_api`, "responses"],
    );
    if (model.maxRetries !== undefined)
      settings.push(
        [`${provider}.request_max_retries`, model.maxRetries],
        [`${provider}.stream_max_retries`, model.maxRetries],
      );
    if (model.name) settings.push(["model", model.name]);
  }
  settings.push(...Object.entries(overrides).sort(([a], [b]) => a.localeCompare(b)));
  return ["app-server", ...settings.flatMap(([key, value]) => ["-c", `${key}=${toml(value)}`])];
}

/** How the app-server is started: which binary, in which homes, against which model, with what config. */
export interface CodexLaunchOptions {
  /** The codex binary; default: `codex` on PATH, else the installed @openai/codex package. */
  binary?: string;
  /** CODEX_HOME for the app-server. Omitted: Codex's own home (read by Codex, never written by Tiller). */
  codexHome?: string;
  /** HOME for the app-server (tests give a temporary one). */
  home?: string;
  /** An OpenAI-compatible Responses endpoint for every session, instead of Codex's configured provider. */
  model?: CodexModelEndpoint;
  /** Codex config overrides (`-c key=value`: a dotted key, a TOML scalar), on top of its config files. */
  config?: Record<string, CodexConfigValue>;
  /**
   * Environment for the app-server beyond the host allowlist (src/runtime/hosts/environment.ts). The
   * embedder's own environment is not passed on, so a key Codex needs goes here, or is named by
   * `model.apiKeyEnv`. Hashed into the host key; never logged, never sent over RPC.
   */
  env?: Record<string, string>;
}

/**
 * The app-server's spawn spec, identity and secrets. Its environment, on top of the allowlist
 * (locale, TMPDIR, proxies): the provider homes, the embedder's variables, the endpoint's key.
 */
export function appServerLaunch(binary: string, options: CodexLaunchOptions) {
  const env: Record<string, string> = {
    ...(options.home ? { HOME: options.home } : {}),
    ...(options.codexHome ? { CODEX_HOME: options.codexHome } : {}),
    ...options.env,
    ...(options.model ? { [options.model.apiKeyEnv]: endpointKey(options.model, options.env) } : {}),
  };
  const args = appServerArgs(options.model, options.config ?? {});
  return {
    // Credentials only as a digest: the spec is reachable from the adapter.
    identity: {
      executable: binary,
      config: { codexHome: options.codexHome ?? null, home: options.home ?? null, args },
      credentials: createHash("sha256").update(JSON.stringify(env)).digest("hex"),
    },
    // A user's relocated Codex home (where `codex login` put the credentials) is inherited.
    spawn: { command: binary, args, env, inherit: ["CODEX_HOME"] },
    secrets: [...Object.values(options.env ?? {}), ...(options.model ? [env[options.model.apiKeyEnv]!] : [])],
  } satisfies Omit<HostSpec, "target" | "connect">;
}

/** A TOML scalar (a JSON string is a valid TOML basic string). */
function toml(value: CodexConfigValue): string {
  if (Array.isArray(value)) return `[${value.map((v) => JSON.stringify(v)).join(", ")}]`;
  return typeof value === "string" ? JSON.stringify(value) : String(value);
}

/** The API key of an endpoint, from the adapter's `env`, then the embedder's environment: held in memory only. */
function endpointKey(model: CodexModelEndpoint, env: Record<string, string> | undefined): string {
  const key = env?.[model.apiKeyEnv] ?? process.env[model.apiKeyEnv];
  if (!key) throw new InvalidInputError("model.apiKeyEnv", `the variable ${model.apiKeyEnv} is not set`);
  return key;
}

/**
 * Options that run Codex against the model simulator (src/simulator/) with no network beyond it:
 * the simulator's endpoint, no retries, no plugin sync, no analytics, no update check.
 */
export function codexSimulatorOptions(simulatorUrl: string, options: { model?: string } = {}) {
  return {
    model: {
      baseUrl: `${simulatorUrl}/v1`,
      apiKeyEnv: "SIMULATOR_API_KEY",
      name: options.model ?? "gpt-5.5",
      maxRetries: 0,
    } satisfies CodexModelEndpoint,
    config: {
      check_for_update_on_startup: false,
      "features.plugins": false,
      "features.apps": false,
      "features.remote_plugin": false,
      "analytics.enabled": false,
    } satisfies Record<string, CodexConfigValue>,
    // The simulator takes any key.
    env: { SIMULATOR_API_KEY: "simulator" },
  };
}

// ---------------------------------------------------------------------------------------------
// The frames and the replies, checked: checks.ts

export {
  definitionChecks,
  isAnswered,
  itemChecks,
  parseNotification,
  parseServerRequest,
  type CodexNotification,
  type CodexServerAnswer,
  type CodexServerRequest,
  type CodexThreadItem,
  type UnhandledServerRequest,
  type UnknownThreadItem,
  type Whereabouts,
} from "./checks.js";

// ---------------------------------------------------------------------------------------------
// The channel

export class CodexChannel extends StdioChannel {
  constructor(child: ChildProcess, ring: FrameRing) {
    super(child, ring);
  }

  protected override encode(message: RpcMessage): string {
    const { jsonrpc: _omitted, ...rest } = message as RpcMessage & { jsonrpc?: string };
    return JSON.stringify(rest);
  }

  /** A call of the protocol, typed by its method; what the adapter reads of the reply is checked (`checkReply`). */
  async send<M extends keyof CodexCalls>(
    method: M,
    params: CodexCalls[M]["params"],
    options?: { timeoutMs?: number },
  ): Promise<CodexCalls[M]["result"]> {
    const result = checkReply(method, await this.call(method, params, options));
    return result as CodexCalls[M]["result"];
  }

  /**
   * The handshake's call (`initialized` follows once the adapter has read the version): the
   * experimental API, since a turn's collaboration mode and a thread's dynamic tools are experimental fields.
   */
  initialize(): Promise<InitializeResponse> {
    return this.send("initialize", {
      clientInfo: { name: "tiller", title: null, version: "0.1.0" },
      capabilities: { experimentalApi: true },
    });
  }

  /**
   * The notifications the mapper reads, checked; one that does not match is counted and reported, with where it says
   * it belongs.
   */
  onCodexNotification(
    listener: (notification: CodexNotification) => void,
    rejected: (error: ProtocolError, where: Whereabouts) => void,
  ) {
    this.onNotification((method, params) => {
      const parsed = parseNotification(method, params);
      if (parsed === null) return;
      if (parsed instanceof ProtocolError) {
        this.ring.note("invalid_params", parsed.message);
        return rejected(parsed, whereabouts(method, params));
      }
      listener(parsed);
    });
  }

  /** The app-server's requests, checked (answer with `answer`, or refuse with `respondError`). */
  onCodexRequest(
    handler: (request: CodexServerRequest | UnhandledServerRequest, id: number) => void,
    rejected: (error: ProtocolError, id: number) => void,
  ) {
    this.onRequest((method, params, id) => {
      const parsed = parseServerRequest(method, params);
      if (!(parsed instanceof ProtocolError)) return handler(parsed, id);
      this.ring.note("invalid_params", parsed.message);
      rejected(parsed, id);
    });
  }

  answer(id: number, result: CodexServerAnswer): void {
    this.respond(id, result);
  }
}
