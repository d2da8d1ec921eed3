import { mkdirSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { createAcpAdapter } from "../../src/adapters/acp/adapter.js";
import { claudeAgent, codexAgent, geminiAgent } from "../../src/adapters/acp/agents.js";
import type { ProviderAdapter } from "../../src/adapters/contract.js";
import { simulatorWorld, type ConformanceWorld } from "../../src/conformance/index.js";
import type { ToolCallSpec } from "../../src/simulator/index.js";
import { GEMINI_SETTINGS } from "./harness.js";

/**
 * The conformance worlds of the real ACP agents, offline: simulator worlds whose adapter is the one ACP adapter with
 * each agent's preset, told how each agent's model spells its tools and how to read its requests.
 */

export interface AgentWorldOptions {
  name?: string;
  /** Wraps each adapter the world makes (an adapter that lies, over the same agent). */
  wrap?: (adapter: ProviderAdapter) => ProviderAdapter;
}

const tool = (name: string, args: unknown): ToolCallSpec => ({ name, args });

/** A policy rule of Gemini's (its `policies/` folder): `echo` runs unasked; every other command still asks. */
const ECHO_ALLOWED = `[[rule]]
toolName = "run_shell_command"
commandPrefix = "echo"
decision = "allow"
priority = 100
`;

/**
 * Gemini CLI: its shell (`run_shell_command`) asks before every command in its default approval mode but those a
 * policy rule allows (a plain `echo` here); `write_file` asks with its diff, in the working directory (it
 * writes nowhere else); it reads unasked and shares no plan. Its own user texts are tagged (`<session_context>`); its
 * router asks `:generateContent` (a probe, the simulator's), its turns `:streamGenerateContent`.
 */
export function geminiConformanceWorld(options: AgentWorldOptions = {}): ConformanceWorld {
  return simulatorWorld({
    name: options.name ?? "gemini",
    adapter: ({ baseUrl, env, apiKeyEnv, home }) => {
      mkdirSync(join(home, ".gemini", "policies"), { recursive: true });
      writeFileSync(join(home, ".gemini", "settings.json"), JSON.stringify(GEMINI_SETTINGS));
      writeFileSync(join(home, ".gemini", "policies", "conformance.toml"), ECHO_ALLOWED);
      const adapter = createAcpAdapter(geminiAgent({ home, endpoint: { baseUrl, apiKey: env[apiKeyEnv]! } }));
      return options.wrap ? options.wrap(adapter) : adapter;
    },
    tools: {
      command: ({ asks, output }) =>
        tool("run_shell_command", {
          command: asks ? "touch asked.txt" : `echo ${output}`,
          description: "conformance",
        }),
      file_change: ({ request }) =>
        tool("write_file", { file_path: `change-${request.id}.txt`, content: "conformance" }),
    },
    evidence: {
      ownText: /^\s*</,
      turnRequest: (request) => request.url.includes(":streamGenerateContent"),
      model: (request) => /\/models\/([^/:]+):/.exec(request.url)?.[1] ?? null,
    },
  });
}

/** Under Claude's `default` permission mode a `node` command asks; `echo` does not. */
const CLAUDE_ASKING = "node -e \"console.log('conformance')\"";

/**
 * Claude Code through claude-agent-acp: its home's settings set the `default` permission mode (asks before commands
 * other than read-only ones, and before writes and reads outside the working directory); its tools are Claude's own
 * (`Bash`, `Write`, `Read`, `TodoWrite`, shown as a plan whose step in progress is named by its active form); its own
 * user texts are tagged; its side requests (the session's title) carry no tools; its model selector takes `sonnet`,
 * which Claude names in full in its requests.
 */
export function claudeConformanceWorld(options: AgentWorldOptions = {}): ConformanceWorld {
  return simulatorWorld({
    name: options.name ?? "claude-acp",
    otherModel: "sonnet",
    adapter: ({ baseUrl, env, apiKeyEnv, home }) => {
      const configDir = join(home, ".claude");
      mkdirSync(configDir, { recursive: true });
      writeFileSync(join(configDir, "settings.json"), JSON.stringify({ permissions: { defaultMode: "default" } }));
      const adapter = createAcpAdapter(
        claudeAgent({ home, configDir, endpoint: { baseUrl, apiKey: env[apiKeyEnv]! } }),
      );
      return options.wrap ? options.wrap(adapter) : adapter;
    },
    tools: {
      command: ({ asks, output }) =>
        tool("Bash", { command: asks ? CLAUDE_ASKING : `echo '${output}'`, description: "conformance" }),
      file_change: ({ request, outside }) =>
        tool("Write", { file_path: join(outside, `change-${request.id}.txt`), content: "conformance" }),
      file_read: ({ outside }) => tool("Read", { file_path: join(outside, "read.txt") }),
      plan: () => [
        {
          tools: [
            tool("TodoWrite", {
              todos: [
                { content: "look", status: "completed", activeForm: "look" },
                { content: "edit", status: "in_progress", activeForm: "edit" },
              ],
            }),
          ],
        },
      ],
    },
    evidence: {
      ownText: /^\s*(<|\[Request interrupted)/,
      turnRequest: (request) => !!(request.body as { tools?: unknown[] } | null)?.tools?.length,
      // A steer goes into the running turn (`_session/steering`); a turn Claude stopped is marked in its history.
      steersAfterHeldReply: { interrupted: /^\s*\[Request interrupted/ },
      model: (request) => {
        const model = (request.body as { model?: unknown } | null)?.model;
        return typeof model !== "string" ? null : model.includes("sonnet") ? "sonnet" : model;
      },
    },
  });
}

/** Codex's tools run a command through `exec_command`: an escalated one asks, a default one runs in the sandbox. */
const exec = (cmd: string, escalate: boolean): ToolCallSpec =>
  tool("exec_command", {
    cmd,
    sandbox_permissions: escalate ? "require_escalated" : "use_default",
    justification: "conformance",
  });

const addFilePatch = (file: string) => `*** Begin Patch\n*** Add File: ${file}\n+conformance\n*** End Patch\n`;

/**
 * Codex through codex-acp: `exec_command` (escalated: asks), `apply_patch` (outside the working directory: asks),
 * `update_plan`; its own user texts are tagged; its model selector takes `gpt-5.4`.
 */
export function codexConformanceWorld(options: AgentWorldOptions = {}): ConformanceWorld {
  return simulatorWorld({
    name: options.name ?? "codex-acp",
    otherModel: "gpt-5.4",
    adapter: ({ baseUrl, env, apiKeyEnv, home }) => {
      const codexHome = join(home, ".codex");
      mkdirSync(codexHome, { recursive: true });
      const endpoint = { baseUrl: `${baseUrl}/v1`, apiKey: env[apiKeyEnv]! };
      const adapter = createAcpAdapter(codexAgent({ home, codexHome, endpoint }));
      return options.wrap ? options.wrap(adapter) : adapter;
    },
    tools: {
      command: ({ asks, output }) => (asks ? exec("echo conformance", true) : exec(`echo '${output}'`, false)),
      file_change: ({ request, outside }) => ({
        name: "apply_patch",
        custom: true,
        input: addFilePatch(join(outside, `change-${request.id}.txt`)),
      }),
      plan: () => [
        {
          tools: [
            tool("update_plan", {
              explanation: "conformance",
              plan: [
                { step: "look", status: "completed" },
                { step: "edit", status: "in_progress" },
              ],
            }),
          ],
        },
      ],
    },
    evidence: {
      ownText: /^\s*</,
      turnRequest: (request) => request.dialect === "responses",
    },
  });
}
