import { join } from "node:path";
import { createClaudeAdapter } from "../../src/adapters/claude/adapter.js";
import { simulatorWorld, type ConformanceWorld, type TurnEvidence } from "../../src/conformance/index.js";
import type { SimulatorRequest, ToolCallSpec } from "../../src/simulator/index.js";
import type { RealWorldOptions } from "./conforms.js";

/**
 * The conformance world of Claude Code (the binary the pinned Agent SDK ships), offline: a simulator world
 * (`simulatorWorld`, the Messages dialect) whose adapter is Claude's, with its CLAUDE_CONFIG_DIR under the path's HOME,
 * told how Claude's model spells its tools (`Bash`, `Write`, `Read`, `TodoWrite`, plan mode, `AskUserQuestion`,
 * `Agent`) and how to read Claude's requests: its own user texts (reminders, local command records) are wrapped in
 * tags; its side requests carry no tools; the mode is what its reminders told the model.
 *
 * Claude takes no steer into a running turn (no native steering), and its requests name no turn a steer could be
 * told apart by, so the world reads no steers: an adapter that claimed native steering would be refuted.
 */

/** Under the runtime's default sandbox (workspace-write, Claude's `acceptEdits`) a `node` command asks; `echo` not. */
const ASKING_COMMAND = "node -e \"console.log('conformance')\"";

const tool = (name: string, args: unknown): ToolCallSpec => ({ name, args });
const bash = (command: string) => tool("Bash", { command, description: "conformance" });

/** In plan mode Claude tells the model where its plan goes. */
const planFileOf = (request: SimulatorRequest) =>
  /create your plan at (\S+?\.md)/.exec(JSON.stringify(request.body))?.[1] ?? "missing-plan-path.md";

/**
 * The mode Claude told the model the turn works in: plan mode where its latest word on plan mode is that it is
 * active. Claude tells the model nothing of the approval policy (the host refuses prompts itself under `never`): the
 * world reports the one the harness runs every turn under, `on_request`.
 */
function modeOf(request: SimulatorRequest): TurnEvidence["runtimeMode"] {
  const all = JSON.stringify(request.body);
  const active = all.lastIndexOf("Plan mode is active");
  const exited = Math.max(all.lastIndexOf("Exited Plan Mode"), all.lastIndexOf("exited plan mode"));
  return { interaction: active > exited ? "plan" : "default", approvals: "on_request" };
}

/** Claude keys a question by its text: the question `go` is answered as `go`. */
const QUESTION = {
  question: "go",
  header: "Go",
  options: [
    { label: "yes", description: "go on" },
    { label: "no", description: "stop" },
  ],
  multiSelect: false,
};

export function claudeConformanceWorld(options: RealWorldOptions = {}): ConformanceWorld {
  return simulatorWorld({
    name: options.name ?? "claude",
    adapter: ({ baseUrl, apiKeyEnv, env, home }) => {
      const adapter = createClaudeAdapter({
        home,
        configDir: join(home, ".claude"),
        model: { baseUrl, apiKeyEnv },
        env,
      });
      return options.wrap ? options.wrap(adapter) : adapter;
    },
    tools: {
      command: ({ asks, output }) => bash(asks ? ASKING_COMMAND : `echo '${output}'`),
      // Outside the working directory: a write and a read there ask under workspace-write.
      file_change: ({ request, outside }) =>
        tool("Write", { file_path: join(outside, `change-${request.id}.txt`), content: "conformance" }),
      file_read: ({ outside }) => tool("Read", { file_path: join(outside, "read.txt") }),
      todo: () => [
        { tools: [tool("TodoWrite", { todos: [{ content: "edit", status: "in_progress", activeForm: "Editing" }] })] },
      ],
      // The model's own plan mode: it enters it, writes its plan to the file Claude names, and proposes it.
      proposed_plan: ({ request }) => [
        { tools: [tool("EnterPlanMode", {})] },
        { tools: [tool("Write", { file_path: planFileOf(request), content: "build, then test\n" })] },
        { tools: [tool("ExitPlanMode", {})] },
      ],
      question: () => [{ tools: [tool("AskUserQuestion", { questions: [QUESTION] })] }],
      subagent: (prompt) => tool("Agent", { description: "conformance", prompt, subagent_type: "general-purpose" }),
    },
    evidence: {
      ownText: /^\s*(<|\[Request interrupted)/,
      turnRequest: (request) => !!(request.body as { tools?: unknown[] } | null)?.tools?.length,
      runtimeMode: modeOf,
    },
  });
}
