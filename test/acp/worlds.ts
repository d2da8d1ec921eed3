import { mkdirSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { createAcpAdapter } from "../../src/adapters/acp/adapter.js";
import { geminiAgent } from "../../src/adapters/acp/agents.js";
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
