import { existsSync } from "node:fs";
import { readdir, rename } from "node:fs/promises";
import { createRequire } from "node:module";
import { delimiter, dirname, join } from "node:path";
import { HostUnavailableError } from "../../domain/errors.js";
import type { AcpAdapterOptions } from "./adapter.js";

/**
 * Known agents as target options: the ACP adapter is generic, and everything one agent needs that another does not
 * (its command line, its environment, its authentication method, what it does that its handshake does not say, its
 * quirks) is here, as data and documented hooks, never as a condition on an agent's name in the adapter.
 */

/** A model endpoint on loopback or elsewhere, and the key the agent sends it (never logged, in no file). */
export interface AgentEndpoint {
  /** The endpoint's base URL as the agent takes it. */
  baseUrl: string;
  apiKey: string;
}

/** Where an agent keeps its state: its HOME (tests give temporary ones; omitted: the user's own). */
export interface AgentHome {
  home?: string;
}

function installed(pkg: string, file: string): string {
  try {
    return join(dirname(createRequire(import.meta.url).resolve(`${pkg}/package.json`)), file);
  } catch {
    throw new HostUnavailableError(`${pkg} is not installed: install it beside tiller-runtime`);
  }
}

/**
 * Gemini CLI (`gemini --acp`, @google/gemini-cli 0.61.0) with a Gemini API key; `baseUrl` goes to
 * `GOOGLE_GEMINI_BASE_URL` (http is allowed for loopback only). Its home needs `.gemini/settings.json` selecting the
 * API key (`security.auth.selectedType: "gemini-api-key"`).
 *
 * Quirk: its `session/load` first re-creates the session's chat file, named by the current minute, then reads it;
 * within the minute the file was written, that clobbers the history and the load fails. `beforeLoad` renames the
 * session's chat files a minute back first. And it replays the history after its reply to the load (ACP has it
 * before), then says its commands (`available_commands_update`): the load completes there.
 */
export function geminiAgent(options: AgentHome & { endpoint?: AgentEndpoint; executable?: string } = {}) {
  const script = options.executable ?? installed("@google/gemini-cli", "bundle/gemini.js");
  const home = options.home;
  return {
    agent: {
      command: process.execPath,
      args: [script, "--acp", "--skip-trust"],
      env: {
        GEMINI_CLI_NO_RELAUNCH: "true",
        ...(home ? { HOME: home } : {}),
        ...(options.endpoint ? { GOOGLE_GEMINI_BASE_URL: options.endpoint.baseUrl } : {}),
      },
      secretEnv: (options.endpoint ? { GEMINI_API_KEY: options.endpoint.apiKey } : {}) as Record<string, string>,
    },
    authMethod: "gemini-api-key",
    // Gemini shares no plan over ACP (its todo tool is off for the preview models it runs), reads unasked, sends no
    // tool output in its tool call updates, and gives its messages no ids.
    behaviour: { plans: false, asksBeforeReads: false, toolOutput: false, messageIds: false },
    replayEndsWith: "available_commands_update",
    beforeLoad: async ({ threadRef }) => {
      if (home) await backdateChats(join(home, ".gemini", "tmp"), threadRef);
    },
  } satisfies AcpAdapterOptions;
}

/** Gemini's chat file of a session: `session-<YYYY-MM-DDTHH-MM>-<first 8 of its id>.jsonl`. */
const CHAT_FILE = /^session-(\d{4})-(\d{2})-(\d{2})T(\d{2})-(\d{2})-([^.]+)\.jsonl$/;

/** Renames each chat file of the session under `tmp/<project>/chats/` to the minute before its own. */
async function backdateChats(tmp: string, sessionId: string): Promise<void> {
  const short = sessionId.slice(0, 8);
  const projects = await readdir(tmp).catch(() => [] as string[]);
  for (const project of projects) {
    const chats = join(tmp, project, "chats");
    for (const file of await readdir(chats).catch(() => [] as string[])) {
      const match = CHAT_FILE.exec(file);
      if (!match || match[6] !== short) continue;
      const [, y, mo, d, h, mi] = match.map(Number) as number[];
      const earlier = new Date(Date.UTC(y!, mo! - 1, d!, h!, mi! - 1));
      const stamp = earlier.toISOString().slice(0, 16).replace(":", "-");
      await rename(join(chats, file), join(chats, `session-${stamp}-${short}.jsonl`));
    }
  }
}

/** Claude Code's own opt-outs: no telemetry, no update checks, no traffic beyond the model API. */
const CLAUDE_QUIET = {
  DISABLE_TELEMETRY: "1",
  CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC: "1",
  DISABLE_AUTOUPDATER: "1",
  DISABLE_ERROR_REPORTING: "1",
  // Not a model request after every turn to guess the user's next prompt.
  CLAUDE_CODE_ENABLE_PROMPT_SUGGESTION: "false",
};

/**
 * Claude Code through claude-agent-acp (@agentclientprotocol/claude-agent-acp 0.101.0, which runs the Claude Code its
 * own Agent SDK ships), with an Anthropic-compatible endpoint: `ANTHROPIC_BASE_URL` and `ANTHROPIC_API_KEY`. It needs
 * no `authenticate`. Its home (`configDir`, Claude's `CLAUDE_CONFIG_DIR`) decides its permission mode: without
 * `permissions.defaultMode` in its `settings.json` its sessions start in `auto`, which never asks.
 *
 * It advertises fork, resume, close and list, and the steering extension (`_session/steering`): its record differs
 * from Gemini's there. Its messages carry ids; it shares its todo list as a plan; it asks before reads outside the
 * working directory.
 */
export function claudeAgent(
  options: AgentHome & { configDir?: string; endpoint?: AgentEndpoint; executable?: string } = {},
) {
  const script = options.executable ?? installed("@agentclientprotocol/claude-agent-acp", "dist/index.js");
  return {
    agent: {
      command: process.execPath,
      args: [script],
      env: {
        ...CLAUDE_QUIET,
        ...(options.home ? { HOME: options.home } : {}),
        ...(options.configDir ? { CLAUDE_CONFIG_DIR: options.configDir } : {}),
        ...(options.endpoint ? { ANTHROPIC_BASE_URL: options.endpoint.baseUrl } : {}),
      },
      secretEnv: (options.endpoint ? { ANTHROPIC_API_KEY: options.endpoint.apiKey } : {}) as Record<string, string>,
      inherit: ["CLAUDE_CONFIG_DIR"],
    },
    behaviour: { plans: true, asksBeforeReads: true, toolOutput: true, messageIds: true },
  } satisfies AcpAdapterOptions;
}

/** The key variable codex-acp's endpoint provider reads (set in its environment only). */
const CODEX_KEY_ENV = "TILLER_CODEX_ACP_KEY";

/**
 * Codex through codex-acp (@zed-industries/codex-acp 0.16.0, its native binary), against an OpenAI Responses endpoint:
 * the endpoint is a model provider of its own in codex's config, given on the command line (`-c`), its key in the
 * agent's environment only; no plugin sync, analytics or update check. Its home is `CODEX_HOME`. Without a provider in
 * its config it refuses `session/new` until authenticated, which writes the key to its home: this preset never does.
 *
 * Its sandbox needs bubblewrap: `bwrapDir` puts a directory holding `bwrap` first on its PATH (the one @openai/codex
 * ships, where installed, by default). It advertises resume, close and list, no fork, no steering.
 */
export function codexAgent(
  options: AgentHome & {
    codexHome?: string;
    endpoint?: AgentEndpoint & { model?: string };
    executable?: string;
    bwrapDir?: string | null;
  } = {},
) {
  const binary =
    options.executable ?? installed(`@zed-industries/codex-acp-${process.platform}-${process.arch}`, "bin/codex-acp");
  const bwrapDir = options.bwrapDir === undefined ? shippedBwrapDir() : options.bwrapDir;
  const endpoint = options.endpoint;
  const config: Array<[string, string | number | boolean]> = [
    ["check_for_update_on_startup", false],
    ["features.plugins", false],
    ["features.apps", false],
    ["features.remote_plugin", false],
    ["analytics.enabled", false],
    ...(endpoint
      ? ([
          ["model_provider", "tiller"],
          ["model_providers.tiller.name", "OpenAI-compatible endpoint (Tiller)"],
          ["model_providers.tiller.base_url", endpoint.baseUrl],
          ["model_providers.tiller.env_key", CODEX_KEY_ENV],
          ["model_providers.tiller.wire_api", "responses"],
          ["model_providers.tiller.request_max_retries", 0],
          ["model_providers.tiller.stream_max_retries", 0],
          ["model", endpoint.model ?? "gpt-5.5"],
        ] as Array<[string, string | number | boolean]>)
      : []),
  ];
  return {
    agent: {
      command: binary,
      args: config.flatMap(([key, value]) => [
        "-c",
        `${key}=${typeof value === "string" ? JSON.stringify(value) : value}`,
      ]),
      env: {
        ...(options.home ? { HOME: options.home } : {}),
        ...(options.codexHome ? { CODEX_HOME: options.codexHome } : {}),
        ...(bwrapDir ? { PATH: [bwrapDir, process.env.PATH ?? ""].join(delimiter) } : {}),
      },
      secretEnv: (endpoint ? { [CODEX_KEY_ENV]: endpoint.apiKey } : {}) as Record<string, string>,
      inherit: ["CODEX_HOME"],
    },
    // Codex shares its plan (update_plan) and never asks before reads; its tool updates carry their output (in the raw
    // output: `aggregated_output`, `exit_code`); its messages have no ids.
    behaviour: { plans: true, asksBeforeReads: false, toolOutput: true, messageIds: false },
    rawOutput: { text: "aggregated_output", exitCode: "exit_code" },
  } satisfies AcpAdapterOptions;
}

/** The directory of the bubblewrap @openai/codex ships for its sandbox, where that package is installed. */
function shippedBwrapDir(): string | null {
  const arch = process.arch === "x64" ? "x86_64" : process.arch === "arm64" ? "aarch64" : null;
  if (process.platform !== "linux" || !arch) return null;
  try {
    const pkg = createRequire(import.meta.url).resolve(`@openai/codex-linux-${process.arch}/package.json`);
    const dir = join(dirname(pkg), "vendor", `${arch}-unknown-linux-musl`, "codex-resources");
    return existsSync(join(dir, "bwrap")) ? dir : null;
  } catch {
    return null;
  }
}
