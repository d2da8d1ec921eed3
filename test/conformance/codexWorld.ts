import { mkdirSync } from "node:fs";
import { join } from "node:path";
import { createCodexAdapter } from "../../src/adapters/codex/adapter.js";
import { codexSimulatorOptions, installedCodexBinary } from "../../src/adapters/codex/transport.js";
import { simulatorWorld, type ConformanceWorld, type TurnEvidence } from "../../src/conformance/index.js";
import type { ReplySpec, SimulatorRequest, ToolCallSpec } from "../../src/simulator/index.js";
import type { RealWorldOptions } from "./conforms.js";

/**
 * The conformance world of the real Codex binary (the pinned `codex app-server`), offline: a simulator world
 * (`simulatorWorld`) whose adapter is Codex's, given a CODEX_HOME under the path's HOME, told how Codex's model spells
 * its tools (`exec_command`, `apply_patch`, `update_plan`, `request_user_input`), and how to read Codex's requests: its
 * own user messages (environment context, AGENTS.md, skills) are wrapped in tags; a request's
 * `x-codex-turn-metadata` names the Codex turn it belongs to, so a later request of a turn holds the steers Codex took
 * in; the turn's collaboration mode and permissions instructions say the mode it works in.
 */

/** Codex's tools run a command through `exec_command`; an escalated one asks, a default one runs in the sandbox. */
const exec = (cmd: string, escalate: boolean): ToolCallSpec => ({
  name: "exec_command",
  args: { cmd, sandbox_permissions: escalate ? "require_escalated" : "use_default", justification: "conformance" },
});

/** A patch adding `file`: asked for outside every writable root, applied unasked inside the cwd. */
const patch = (file: string): ToolCallSpec => ({
  name: "apply_patch",
  custom: true,
  input: `*** Begin Patch\n*** Add File: ${file}\n+conformance\n*** End Patch\n`,
});

/** Codex's one checklist is update_plan: a todo list is a plan update too (projected as the plan). */
const updatePlan: ReplySpec[] = [
  {
    tools: [
      {
        name: "update_plan",
        args: {
          explanation: "conformance",
          plan: [
            { step: "look", status: "completed" },
            { step: "edit", status: "in_progress" },
          ],
        },
      },
    ],
  },
];

const QUESTION = {
  questions: [
    {
      id: "go",
      header: "Go",
      question: "go on?",
      options: [
        { label: "yes", description: "go on" },
        { label: "no", description: "stop" },
      ],
    },
  ],
};

function turnIdOf(request: SimulatorRequest): string | null {
  try {
    return (JSON.parse(request.headers["x-codex-turn-metadata"] ?? "") as { turn_id?: string }).turn_id ?? null;
  } catch {
    return null;
  }
}

/**
 * The mode Codex told the model the turn works in: the latest collaboration-mode instructions of the request (a mode
 * change adds new ones), and its permissions instructions, which tell the model how to ask for approval only where it
 * may (`# Escalation Requests`).
 */
function modeOf(request: SimulatorRequest): TurnEvidence["runtimeMode"] {
  type Item = { type?: string; role?: string; content?: Array<{ text?: string }> };
  const input = (request.body as { input?: Item[] } | null)?.input ?? [];
  const developer = input
    .filter((i) => i.type === "message" && i.role === "developer")
    .flatMap((i) => (i.content ?? []).map((c) => c.text ?? ""));
  // Default mode says `# Collaboration Mode: Default`, Plan mode `# Plan Mode (Conversational)`.
  const mode = developer
    .flatMap((t) => [...t.matchAll(/<collaboration_mode># (?:Collaboration Mode: )?(\w+)/g)])
    .at(-1)?.[1];
  const permissions = developer.filter((t) => t.startsWith("<permissions instructions>")).at(-1);
  if (!mode || !permissions) return undefined;
  const approvals = permissions.includes("# Escalation Requests") ? "on_request" : "never";
  return { interaction: mode === "Plan" ? "plan" : "default", approvals };
}

export function codexConformanceWorld(options: RealWorldOptions = {}): ConformanceWorld {
  const binary = installedCodexBinary();
  if (!binary) throw new Error("the pinned @openai/codex binary is not installed: run `npm ci` (never skipped)");
  return simulatorWorld({
    name: options.name ?? "codex",
    adapter: ({ baseUrl, home }) => {
      const codexHome = join(home, ".codex");
      mkdirSync(codexHome, { recursive: true });
      const simulator = codexSimulatorOptions(baseUrl);
      const adapter = createCodexAdapter({
        binary,
        home,
        codexHome,
        ...simulator,
        // /tmp is writable under workspace-write by default: the file a file-change approval writes is under it.
        config: {
          ...simulator.config,
          "sandbox_workspace_write.exclude_slash_tmp": true,
          "sandbox_workspace_write.exclude_tmpdir_env_var": true,
        },
      });
      return options.wrap ? options.wrap(adapter) : adapter;
    },
    tools: {
      command: ({ asks, output }) => (asks ? exec("echo conformance", true) : exec(`echo '${output}'`, false)),
      file_change: ({ request, outside }) => patch(join(outside, `change-${request.id}.txt`)),
      // Codex asks no patch approval of its own: a patch in the working directory applies under the sandbox.
      apply_patch: ({ request }) => patch(`patch-${request.id}.txt`),
      plan: () => updatePlan,
      todo: () => updatePlan,
      // Codex takes a proposed plan in Plan mode only; in Default mode the block stays the reply's text.
      proposed_plan: ({ text }) => [{ text: `<proposed_plan>\nbuild, then test\n</proposed_plan>\n${text}` }],
      question: () => [{ tools: [{ name: "request_user_input", args: QUESTION }] }],
    },
    evidence: {
      ownText: /^\s*</,
      turnRequest: (request) => request.dialect === "responses",
      turnKey: turnIdOf,
      runtimeMode: modeOf,
    },
  });
}
