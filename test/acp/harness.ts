import { mkdir, writeFile } from "node:fs/promises";
import { join } from "node:path";
import { createAcpAdapter, type AcpAdapter, type AcpAdapterOptions } from "../../src/adapters/acp/adapter.js";
import { claudeAgent, codexAgent, geminiAgent } from "../../src/adapters/acp/agents.js";
import type { RuntimeOptions } from "../../src/index.js";
import { startModelSimulator, type Reply, type ReplySpec, type SimulatorRequest } from "../../src/simulator/index.js";
import * as conformance from "../providers/conformance.js";
import { simulatedWorld, type SimulatedWorld } from "../providers/world.js";

/**
 * Real ACP agents (the pinned Gemini CLI, claude-agent-acp, codex-acp) under Tiller's one ACP adapter, against the
 * model simulator on 127.0.0.1, with a temporary HOME and workspace per world. What differs between the agents is here
 * as data (the preset of src/adapters/acp/agents.ts, the home each needs, how its model spells a shell command): the
 * scenarios are the same.
 */

export type AcpWorld = SimulatedWorld<AcpAdapter>;
export type { AcpAdapter };

export interface AgentUnderTest {
  /** The provider target's id (and the temporary directory's prefix). */
  target: string;
  /** Writes what the agent needs in its temporary home. */
  prepare(home: string): Promise<void>;
  /** The adapter's options for the agent, against the simulator. */
  options(home: string, simulatorUrl: string): AcpAdapterOptions;
  /** The model's reply that runs a shell command (one the agent asks permission for). */
  shell(command: string): Reply;
  /** Answers the agent's side requests (titles...) so they take no scripted reply. */
  sideReply?(request: SimulatorRequest): ReplySpec | null;
  /** How a turn ends after a refused permission: the agent goes on (`completed`), or it cancels the turn itself. */
  refusalEnds: "completed" | "cancelled";
}

/** Gemini's settings in its home: the API key as its authentication, and no telemetry or update checks. */
export const GEMINI_SETTINGS = {
  security: { auth: { selectedType: "gemini-api-key" } },
  privacy: { usageStatisticsEnabled: false },
  telemetry: { enabled: false },
  general: { disableAutoUpdate: true, disableUpdateNag: true },
};

export const gemini: AgentUnderTest = {
  target: "gemini",
  async prepare(home) {
    await mkdir(join(home, ".gemini"), { recursive: true });
    await writeFile(join(home, ".gemini", "settings.json"), JSON.stringify(GEMINI_SETTINGS));
  },
  options: (home, url) => geminiAgent({ home, endpoint: { baseUrl: url, apiKey: "dummy" } }),
  // Gemini's shell refuses command substitution: plain commands only.
  shell: (command) => ({ tools: [{ name: "run_shell_command", args: { command, description: "for the test" } }] }),
  refusalEnds: "completed",
};

/** Claude Code names each session with a side request of its own (a JSON title). */
const claudeTitle = (request: SimulatorRequest): ReplySpec | null =>
  JSON.stringify((request.body as { system?: unknown } | null)?.system ?? "").includes("naming a coding session")
    ? { text: '{"title":"a session"}' }
    : null;

export const claude: AgentUnderTest = {
  target: "claude-acp",
  async prepare(home) {
    // Claude's permission mode: `default` asks before writes and commands (its own default, `auto`, never asks).
    await mkdir(join(home, ".claude"), { recursive: true });
    await writeFile(
      join(home, ".claude", "settings.json"),
      JSON.stringify({ permissions: { defaultMode: "default" } }),
    );
  },
  options: (home, url) =>
    claudeAgent({ home, configDir: join(home, ".claude"), endpoint: { baseUrl: url, apiKey: "dummy" } }),
  shell: (command) => ({ tools: [{ name: "Bash", args: { command, description: "for the test" } }] }),
  sideReply: claudeTitle,
  refusalEnds: "completed",
};

export const codex: AgentUnderTest = {
  target: "codex-acp",
  async prepare(home) {
    await mkdir(join(home, ".codex"), { recursive: true });
  },
  options: (home, url) =>
    codexAgent({ home, codexHome: join(home, ".codex"), endpoint: { baseUrl: `${url}/v1`, apiKey: "dummy" } }),
  // An escalated command asks (the sandbox's own run unasked).
  shell: (cmd) => ({
    tools: [
      {
        name: "exec_command",
        args: { cmd, sandbox_permissions: "require_escalated", justification: "needed for the test" },
      },
    ],
  }),
  // codex-acp's one refusal is "abort": the turn ends, cancelled by the agent.
  refusalEnds: "cancelled",
};

export function acpWorld(
  agent: AgentUnderTest,
  options: { runtime?: Partial<RuntimeOptions>; adapter?: Partial<AcpAdapterOptions> } = {},
): Promise<AcpWorld> {
  return simulatedWorld({
    target: agent.target,
    ...(options.runtime ? { runtime: options.runtime } : {}),
    prepare: ({ home }) => agent.prepare(home),
    ...(agent.sideReply ? { simulator: () => startModelSimulator({ sideReply: agent.sideReply! }) } : {}),
    makeAdapter: ({ home }, sim) => createAcpAdapter({ ...agent.options(home, sim.url), ...options.adapter }),
  });
}

/** The world as the shared provider scenarios (test/providers/conformance.ts) see it. */
export function asProvider(w: AcpWorld, target: string): conformance.ProviderWorld {
  return {
    get rt() {
      return w.rt;
    },
    sim: w.sim,
    workspace: w.workspace,
    target,
    hostPid: (id) => w.adapter.hostPid(id),
    get adapter() {
      return w.adapter;
    },
    reopen: () => w.reopen(),
  };
}

export { until } from "../support/runtime.js";
export { sawInNextRequest } from "../codex/harness.js";

/** claude-agent-acp's model writes a todo list (`TodoWrite`): the agent shares it as a plan. */
export const todoWrite: ReplySpec = {
  tools: [
    {
      name: "TodoWrite",
      args: {
        todos: [
          { content: "look", status: "completed", activeForm: "Looking" },
          { content: "edit", status: "in_progress", activeForm: "Editing" },
        ],
      },
    },
  ],
};

/** codex-acp's model updates its plan (`update_plan`): the agent shares it as a plan. */
export const updatePlan: ReplySpec = {
  tools: [
    {
      name: "update_plan",
      args: {
        explanation: "the plan",
        plan: [
          { step: "look", status: "completed" },
          { step: "edit", status: "in_progress" },
        ],
      },
    },
  ],
};
