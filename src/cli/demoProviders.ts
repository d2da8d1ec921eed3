import { mkdir, writeFile } from "node:fs/promises";
import { join } from "node:path";
import { createAcpAdapter } from "../adapters/acp/adapter.js";
import { claudeAgent, codexAgent, geminiAgent } from "../adapters/acp/agents.js";
import { createClaudeAdapter } from "../adapters/claude/adapter.js";
import { createCodexAdapter } from "../adapters/codex/adapter.js";
import { codexSimulatorOptions } from "../adapters/codex/transport.js";
import type { ProviderAdapter } from "../adapters/contract.js";
import {
  startModelSimulator,
  type ModelSimulator,
  type ModelSimulatorOptions,
  type Reply,
  type ReplySpec,
  type SimulatorRequest,
} from "../simulator/index.js";

/**
 * The demo on a real provider binary or ACP agent: the provider in a temporary home under the demo's data directory,
 * talking to the model simulator on 127.0.0.1 (no account, no network). The simulator's replies script the same story
 * as the scripted demo: a todo plan where the provider shares one, a command that needs approval, a long answer that
 * gets interrupted, a one-line summary.
 */

export interface DemoProvider {
  adapter: ProviderAdapter;
  workspace: string;
  close(): Promise<void>;
}

const TESTS_PASS = "3 date tests pass";
const afterTests = (req: { body: unknown }) => ({
  text: JSON.stringify(req.body).includes(TESTS_PASS)
    ? "Fixed: today() now formats the date in UTC, and the date tests pass."
    : "The tests did not run.",
});
const changelog: Reply = {
  hang: true,
  text: "## Changelog\n  - today() formats dates in UTC\n  - the date tests run in every timezone\n  - ",
};
const summary: Reply = { text: "One line: today() is now timezone-proof." };

/** The scripted demo's plan (each step with its active form): before the tests run, their step is in progress. */
const PLAN = [
  ["Reproduce the failing test", "Reproducing the failing test"],
  ["Use UTC in today()", "Using UTC in today()"],
  ["Re-run the tests", "Re-running the tests"],
] as const;
const planStatus = (i: number, done: boolean) => (done || i < PLAN.length - 1 ? "completed" : "in_progress");

/**
 * The first turn: the plan where the provider shares one (the tests' step in progress), the command that needs
 * approval, the plan done, the answer; then the interrupted changelog and the summary.
 */
function story(sim: ModelSimulator, command: ReplySpec, plan?: (done: boolean) => ReplySpec): void {
  const planned = (done: boolean) => (plan ? [plan(done)] : []);
  sim.push(...planned(false), command, ...planned(true), afterTests, changelog, summary);
}

/** Claude Code names each session with a side request of its own (a JSON title): answered aside, off the story. */
const claudeTitle = (request: SimulatorRequest): ReplySpec | null =>
  JSON.stringify((request.body as { system?: unknown } | null)?.system ?? "").includes("naming a coding session")
    ? { text: '{"title":"Demo: fix a date bug"}' }
    : null;

/** Claude's todo list (TodoWrite): a step in progress is shown by its active form. */
const todoWrite = (done: boolean): ReplySpec => ({
  tools: [
    {
      name: "TodoWrite",
      args: {
        todos: PLAN.map(([content, activeForm], i) => ({ content, status: planStatus(i, done), activeForm })),
      },
    },
  ],
});

/** Codex's plan (update_plan). */
const updatePlan = (done: boolean): ReplySpec => ({
  tools: [
    {
      name: "update_plan",
      args: { explanation: "Fix the date bug", plan: PLAN.map(([step], i) => ({ step, status: planStatus(i, done) })) },
    },
  ],
});

/** Claude asks before a command that writes a file; a plain echo would run unasked. */
const claudeBash: ReplySpec = {
  tools: [
    {
      name: "Bash",
      args: { command: `echo '${TESTS_PASS}' | tee test-results.txt`, description: "Re-run the date tests" },
    },
  ],
};

/** Codex asks before an escalated command (its sandbox runs the others unasked). */
const codexEscalated: ReplySpec = {
  tools: [
    {
      name: "exec_command",
      args: {
        cmd: `echo '${TESTS_PASS}'`,
        sandbox_permissions: "require_escalated",
        justification: "Re-run the date tests",
      },
    },
  ],
};

/** Gemini, like Claude, runs a plain echo unasked; it refuses command substitution (`$(...)`). */
const geminiShell: ReplySpec = {
  tools: [
    {
      name: "run_shell_command",
      args: { command: `echo '${TESTS_PASS}' | tee test-results.txt`, description: "Re-run the date tests" },
    },
  ],
};

/** Gemini's settings in its home: the API key as its authentication, and no telemetry or update checks. */
const GEMINI_SETTINGS = {
  security: { auth: { selectedType: "gemini-api-key" } },
  privacy: { usageStatisticsEnabled: false },
  telemetry: { enabled: false },
  general: { disableAutoUpdate: true, disableUpdateNag: true },
};

interface Setup {
  root: string;
  home: string;
  sim: ModelSimulator;
}

interface DemoSetup {
  /** The simulator's options (side replies the provider needs answered off the story). */
  simulator?: ModelSimulatorOptions;
  /** Scripts the story in the provider's own tools, and makes its adapter in the temporary home. */
  adapter(setup: Setup): Promise<ProviderAdapter>;
}

/** Per provider: the story's plan and command in that provider's own tools, and its adapter in the temporary home. */
const SETUPS = {
  codex: {
    async adapter({ root, home, sim }) {
      await mkdir(join(root, "codex-home"), { recursive: true });
      story(sim, codexEscalated);
      return createCodexAdapter({
        codexHome: join(root, "codex-home"),
        home,
        ...codexSimulatorOptions(sim.url),
        approvalPolicy: "untrusted",
      });
    },
  },
  claude: {
    async adapter({ home, sim }) {
      story(sim, claudeBash);
      return createClaudeAdapter({
        home,
        configDir: join(home, ".claude"),
        // The simulator takes any key: it is read from the adapter's env, handed to Claude only.
        model: { baseUrl: sim.url, apiKeyEnv: "SIMULATOR_API_KEY" },
        env: { SIMULATOR_API_KEY: "demo" },
      });
    },
  },
  /** Gemini CLI over ACP: it shares no plan over ACP, so its story has none (as the native demos). */
  gemini: {
    async adapter({ home, sim }) {
      await mkdir(join(home, ".gemini"), { recursive: true });
      await writeFile(join(home, ".gemini", "settings.json"), JSON.stringify(GEMINI_SETTINGS));
      story(sim, geminiShell);
      return createAcpAdapter(geminiAgent({ home, endpoint: { baseUrl: sim.url, apiKey: "demo" } }));
    },
  },
  /** Claude Code through claude-agent-acp: its TodoWrite is its plan. */
  "claude-acp": {
    simulator: { sideReply: claudeTitle },
    async adapter({ home, sim }) {
      // Its permission mode `default` asks before writes and commands (without it: `auto`, which never asks).
      await mkdir(join(home, ".claude"), { recursive: true });
      await writeFile(
        join(home, ".claude", "settings.json"),
        JSON.stringify({ permissions: { defaultMode: "default" } }),
      );
      story(sim, claudeBash, todoWrite);
      const endpoint = { baseUrl: sim.url, apiKey: "demo" };
      return createAcpAdapter(claudeAgent({ home, configDir: join(home, ".claude"), endpoint }));
    },
  },
  /** Codex through codex-acp: its update_plan is its plan. A refused permission ends its turn. */
  "codex-acp": {
    async adapter({ home, sim }) {
      await mkdir(join(home, ".codex"), { recursive: true });
      story(sim, codexEscalated, updatePlan);
      const endpoint = { baseUrl: `${sim.url}/v1`, apiKey: "demo" };
      return createAcpAdapter(codexAgent({ home, codexHome: join(home, ".codex"), endpoint }));
    },
  },
} satisfies Record<string, DemoSetup>;

export type DemoProviderName = keyof typeof SETUPS;
export const DEMO_PROVIDERS = Object.keys(SETUPS) as DemoProviderName[];

export async function demoProvider(name: DemoProviderName, dataDir: string): Promise<DemoProvider> {
  const setup: DemoSetup = SETUPS[name];
  const sim = await startModelSimulator(setup.simulator);
  const root = join(dataDir, name);
  const workspace = join(root, "workspace");
  const home = join(root, "home");
  await Promise.all([mkdir(workspace, { recursive: true }), mkdir(home, { recursive: true })]);
  const adapter = await setup.adapter({ root, home, sim });
  return { adapter, workspace, close: () => sim.close() };
}
