import type { ChildProcess } from "node:child_process";
import { createHash } from "node:crypto";
import { existsSync } from "node:fs";
import { createRequire } from "node:module";
import { delimiter, join } from "node:path";
import { z } from "zod";
import { HostUnavailableError, InvalidInputError, ProtocolError } from "../../domain/errors.js";
import type { RpcMessage } from "../kit/jsonRpc.js";
import type { HostSpec } from "../kit/hostSpec.js";
import type { FrameRing } from "../kit/ring.js";
import { StdioChannel } from "../kit/stdioChannel.js";
import { schemaChecks, type SchemaChecks } from "../kit/schemaChecks.js";
import { CODEX_DEFINITIONS, CODEX_VALIDATED_PARAMS } from "./protocol/schemas.js";
import type {
  CodexCalls,
  CodexNotifications,
  CodexServerRequests,
  InitializeResponse,
  ThreadItem,
} from "./protocol/types.js";

/**
 * The one hand-written boundary of the Codex adapter: where the binary comes from, how
 * `codex app-server` is started (its command line: the model endpoint and config overrides),
 * and the channel to it. The app-server speaks JSON-RPC over stdio as JSON lines without the
 * `"jsonrpc"` field, and sends requests of its own (approvals, user input, tool calls). Calls
 * and answers are typed by the generated bindings (protocol/types.ts); what the app-server sends
 * is untrusted: the notifications the mapper reads and the requests it answers are checked
 * against the binary's own schema (protocol/schemas.ts) and come out typed, or as a ProtocolError;
 * so are the replies the adapter reads (`send`): a reply of the wrong shape is a ProtocolError, never
 * a TypeError where the adapter reads it.
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
// The frames

/** A thread item of a type this binary's schema does not name (a newer binary's): its type and id only. */
export interface UnknownThreadItem {
  type: "(unknown)";
  nativeType: string;
  id: string;
}
export type CodexThreadItem = ThreadItem | UnknownThreadItem;

type WithItem<T> = T extends { item: ThreadItem } ? Omit<T, "item"> & { item: CodexThreadItem } : T;

/** A notification the mapper reads, checked against the schema. */
export type CodexNotification = {
  [M in keyof CodexNotifications]: { method: M; params: WithItem<CodexNotifications[M]> };
}[keyof CodexNotifications];

/** A server request the adapter answers, checked against the schema. */
export type CodexServerRequest = {
  [M in keyof CodexServerRequests]: { method: M; params: CodexServerRequests[M]["params"] };
}[keyof CodexServerRequests];

export type CodexServerAnswer = CodexServerRequests[keyof CodexServerRequests]["result"];

/** A server request the adapter does not answer: only where it belongs is read. */
export interface UnhandledServerRequest {
  method: string;
  threadId: string | null;
}

const Located = z.looseObject({ threadId: z.string().optional() });

/** Definitions as the checks read them: the item union left open (see itemChecks). */
const OPEN_DEFINITIONS = {
  ...CODEX_DEFINITIONS,
  ThreadItem: {
    type: "object",
    properties: { type: { type: "string" }, id: { type: "string" } },
    required: ["type", "id"],
  },
};

/**
 * The checks derived from the binary's schema for a definition (the item union left open: see itemChecks): zod's, and
 * the same by hand (kit/schemaChecks.ts) first, since streamed deltas and the items around them pass by the thousand.
 */
export const definitionChecks = (definition: string) =>
  schemaChecks({ $ref: `#/definitions/${definition}` }, OPEN_DEFINITIONS);

const ITEM_VARIANTS = (CODEX_DEFINITIONS.ThreadItem as { oneOf: Array<{ properties: { type: { enum: string[] } } }> })
  .oneOf;

/**
 * Each item type the schema names, and its checks (by hand first, zod for what the hand check leaves); an item of
 * another type is a newer binary's, not an error.
 */
export const itemChecks: ReadonlyMap<string, SchemaChecks> = new Map(
  ITEM_VARIANTS.map((variant) => [variant.properties.type.enum[0]!, schemaChecks(variant, CODEX_DEFINITIONS)]),
);

/** Each validated method's checks. */
const validated = new Map(
  Object.entries(CODEX_VALIDATED_PARAMS).map(([method, definition]) => [method, definitionChecks(definition)]),
);

function invalid(kind: string, method: string, error: z.ZodError): ProtocolError {
  const issues = error.issues.slice(0, 3).map((i) => `${i.path.join(".") || "(params)"}: ${i.message}`);
  return new ProtocolError(`codex ${kind} ${method} does not match its schema: ${issues.join("; ")}`, { method });
}

type Checked = { item?: { type: string; id: string; [field: string]: unknown } };

/** The params of a validated method, typed; a ProtocolError if they do not match; null for a method not validated. */
function parse(kind: string, method: string, params: unknown): Checked | ProtocolError | null {
  const checks = validated.get(method);
  if (!checks) return null;
  const read = checks.read(params ?? {});
  if (!read.ok) return invalid(kind, method, read.error);
  const value = read.value as Checked;
  if (!value.item) return value;
  const { type, id } = value.item;
  const itemCheck = itemChecks.get(type);
  if (!itemCheck) return { ...value, item: { type: "(unknown)", nativeType: type, id } };
  const item = itemCheck.read(value.item);
  if (!item.ok) return invalid(kind, `${method} (${type} item)`, item.error);
  return item.value === value.item ? value : { ...value, item: item.value as Checked["item"] };
}

/** A notification as the mapper takes it; null for one it does not read (nothing to check). */
export function parseNotification(method: string, params: unknown): CodexNotification | ProtocolError | null {
  const parsed = parse("notification", method, params);
  return parsed === null || parsed instanceof ProtocolError
    ? parsed
    : ({ method, params: parsed } as CodexNotification);
}

/** A server request as the adapter answers it, or what little an unanswered one says of itself. */
export function parseServerRequest(
  method: string,
  params: unknown,
): CodexServerRequest | UnhandledServerRequest | ProtocolError {
  const parsed = parse("request", method, params);
  if (parsed === null) {
    const located = Located.safeParse(params);
    return { method, threadId: located.success ? (located.data.threadId ?? null) : null };
  }
  return parsed instanceof ProtocolError ? parsed : ({ method, params: parsed } as CodexServerRequest);
}

export const isAnswered = (request: CodexServerRequest | UnhandledServerRequest): request is CodexServerRequest =>
  validated.has(request.method);

/** Where a frame that did not match its schema says it belongs, as far as it can be read. */
export interface Whereabouts {
  method: string;
  threadId?: string;
  turnId?: string;
}

const Addressed = z.looseObject({
  threadId: z.string().min(1).optional().catch(undefined),
  turnId: z.string().min(1).optional().catch(undefined),
  turn: z
    .looseObject({ id: z.string().min(1).optional().catch(undefined) })
    .optional()
    .catch(undefined),
});

function whereabouts(method: string, params: unknown): Whereabouts {
  const read = Addressed.safeParse(params);
  if (!read.success) return { method };
  const { threadId, turnId = read.data.turn?.id } = read.data;
  return { method, ...(threadId ? { threadId } : {}), ...(turnId ? { turnId } : {}) };
}

// ---------------------------------------------------------------------------------------------
// The replies

const turnChecks = definitionChecks("Turn");

/** A turn of a reply checked against the schema, with the items the snapshot reads (user and agent messages). */
const CheckedTurn = z.unknown().superRefine((value, ctx) => {
  const read = turnChecks.read(value);
  if (!read.ok) {
    for (const issue of read.error.issues.slice(0, 3))
      ctx.addIssue({ code: "custom", path: issue.path, message: issue.message });
    return;
  }
  const { items } = read.value as { items: Array<{ type: string }> };
  items.forEach((item, i) => {
    if (item.type !== "userMessage" && item.type !== "agentMessage") return;
    const checked = itemChecks.get(item.type)!.read(item);
    if (!checked.ok) ctx.addIssue({ code: "custom", path: ["items", i], message: checked.error.issues[0]!.message });
  });
});

/** What the adapter reads of `thread/start`, `thread/resume` and `thread/fork` (the thread, its model and effort). */
const OpenedThread = z.looseObject({
  thread: z.looseObject({ id: z.string().min(1) }),
  model: z.string(),
  reasoningEffort: z.string().min(1).nullish(),
});

/**
 * The replies the adapter reads, checked where it reads them; calls whose reply it does not read are absent. A
 * policy of `config/read` is handed back to the binary that gave it (a newer one's included): only its kind is checked.
 */
const REPLIES: { readonly [M in keyof CodexCalls]?: z.ZodType } = {
  initialize: z.looseObject({ userAgent: z.string() }),
  "thread/start": OpenedThread,
  "thread/resume": OpenedThread,
  "thread/fork": OpenedThread,
  "turn/start": z.looseObject({ turn: CheckedTurn }),
  "thread/read": z.looseObject({ thread: z.looseObject({ turns: z.array(CheckedTurn) }) }),
  "config/read": z.looseObject({
    config: z.looseObject({
      approval_policy: z.union([z.string().min(1), z.looseObject({ granular: z.looseObject({}) })]).nullish(),
    }),
  }),
};

/** A reply as the adapter reads it, or a ProtocolError naming the call and what did not match. */
export function checkReply(method: string, result: unknown): unknown {
  const schema = Object.hasOwn(REPLIES, method) ? REPLIES[method as keyof CodexCalls] : undefined;
  if (!schema) return result;
  const parsed = schema.safeParse(result);
  if (parsed.success) return result;
  const issues = parsed.error.issues.slice(0, 3).map((i) => `${i.path.join(".") || "(result)"}: ${i.message}`);
  throw new ProtocolError(`codex ${method} answered a reply that does not match its schema: ${issues.join("; ")}`, {
    method,
  });
}

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
