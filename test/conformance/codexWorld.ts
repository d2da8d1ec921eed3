import { join } from "node:path";
import { createCodexAdapter } from "../../src/adapters/codex/adapter.js";
import { codexSimulatorOptions, installedCodexBinary } from "../../src/adapters/codex/transport.js";
import type { BehaviourKind, ConformanceWorld, TurnEvidence, WorldRun } from "../../src/conformance/index.js";
import type { ProviderAdapter } from "../../src/adapters/contract.js";
import type { ReplySpec, SimulatorRequest } from "../../src/simulator/index.js";
import { CONTEXT, openSimulatorPath, type RealWorldOptions } from "./simulatorWorld.js";

/**
 * The conformance world of the real Codex binary (the pinned `codex app-server`), offline: each path gets a model
 * simulator on 127.0.0.1 and a temporary HOME and CODEX_HOME, and every adapter of the path (a runtime restart's
 * too) is pointed at both, so it reaches the same threads on disk.
 *
 * Behaviours are keyed by the user text of the turn they are for: every model request is answered from the latest
 * user message Codex sent and from what Codex already did after it (tool outputs, a reply), so a steer's extra request
 * or a resumed thread's replayed history never consumes another turn's reply.
 *
 * The evidence is what Codex sent the model: a request's `x-codex-turn-metadata` names the Codex turn it belongs to;
 * the turn's first request holds its user message (a handoff's context as an earlier part of the same message, under
 * the context header) and the conversation before it; a later request of the same turn holds the steers Codex took
 * in; the request's model and collaboration mode are the turn's.
 */

/** Codex's own user messages (its environment context, AGENTS.md, skills) are wrapped in tags; a user's text is not. */
const CODEX_OWN = /^\s*</;
const APPROVED_COMMAND = "echo conformance";

interface InputItem {
  type?: string;
  role?: string;
  content?: Array<{ type?: string; text?: string }>;
}

/** A user message of the conversation: the user's own text, and the context it carried before it. */
interface UserMessage {
  at: number;
  text: string;
  context: string | null;
}

function inputOf(request: SimulatorRequest): InputItem[] {
  const body = request.body as { input?: unknown } | null;
  return Array.isArray(body?.input) ? (body.input as InputItem[]) : [];
}

/** The user's messages, each with the context that went in before it (in the same message or just before). */
function userMessages(input: InputItem[]): UserMessage[] {
  const out: UserMessage[] = [];
  let context: string | null = null;
  input.forEach((item, at) => {
    if (item.type !== "message" || item.role !== "user") return;
    for (const part of (item.content ?? []).map((c) => c.text ?? "")) {
      if (CODEX_OWN.test(part)) continue;
      if (part.startsWith(CONTEXT)) context = part;
      else {
        out.push({ at, text: part, context });
        context = null;
      }
    }
  });
  return out;
}

/** How many tool outputs Codex sent back after input item `at`: the step the turn is at. */
function stepAfter(input: InputItem[], at: number): number {
  return input.slice(at + 1).filter((i) => i.type?.endsWith("_call_output")).length;
}

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
  const developer = inputOf(request)
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

const isTurnRequest = (r: SimulatorRequest) => r.dialect === "responses" && inputOf(r).length > 0;

const exec = (cmd: string, escalate: boolean): ReplySpec => ({
  tools: [
    {
      name: "exec_command",
      args: {
        cmd,
        sandbox_permissions: escalate ? "require_escalated" : "use_default",
        justification: "conformance",
      },
    },
  ],
});

/** A patch adding `file`: asked for outside every writable root (see `open`), applied unasked inside the cwd. */
const patch = (file: string): ReplySpec => ({
  tools: [
    {
      name: "apply_patch",
      custom: true,
      input: `*** Begin Patch\n*** Add File: ${file}\n+conformance\n*** End Patch\n`,
    },
  ],
});

export function codexConformanceWorld(options: RealWorldOptions = {}): ConformanceWorld {
  const wrap = options.wrap ?? ((adapter: ProviderAdapter) => adapter);
  const binary = installedCodexBinary();
  if (!binary) throw new Error("the pinned @openai/codex binary is not installed: run `npm ci` (never skipped)");
  const scripts: BehaviourKind[] = [
    "text",
    "hold",
    "approval:command",
    "approval:file_change",
    "approval:apply_patch",
    "plan",
    "todo",
    "tool",
    "proposed_plan",
    "question",
  ];
  return {
    name: options.name ?? "codex",
    scripts: new Set(scripts),
    async open(): Promise<WorldRun> {
      const path = await openSimulatorPath("codex", ["home", "codex-home", "outside"]);
      const { behaviours, released } = path;
      const { home, "codex-home": codexHome, outside } = path.dirs;

      function replyFor(request: SimulatorRequest): ReplySpec {
        const input = inputOf(request);
        const user = userMessages(input).at(-1);
        const behaviour = user && behaviours.get(user.text);
        if (!user || !behaviour) return { text: "(no behaviour for this turn)" };
        const step = stepAfter(input, user.at);
        const answered = input.slice(user.at + 1).some((i) => i.type === "message" && i.role === "assistant");
        switch (behaviour.kind) {
          case "hold":
            // A released gate (or a stream already answered once) is not held again.
            return released.has(behaviour.gate) || answered
              ? { text: behaviour.text }
              : { hang: true, text: behaviour.text };
          case "approval":
            if (step > 0) return { text: behaviour.text };
            if (behaviour.approval === "command") return exec(APPROVED_COMMAND, true);
            if (behaviour.approval === "file_change") return patch(join(outside, `change-${request.id}.txt`));
            // Codex asks no patch approval of its own: a patch in the working directory applies under the sandbox.
            if (behaviour.approval === "apply_patch") return patch(`patch-${request.id}.txt`);
            return { text: `(codex world: no ${behaviour.approval} approval)` };
          // Codex's one checklist is update_plan: a todo list is a plan update too (projected as the plan).
          case "plan":
          case "todo":
            if (step > 0) return { text: behaviour.text };
            return {
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
            };
          case "proposed_plan":
            // Codex takes a proposed plan in Plan mode only; in Default mode the block stays the reply's text.
            return { text: `<proposed_plan>\nbuild, then test\n</proposed_plan>\n${behaviour.text}` };
          case "question":
            return step > 0 ? { text: behaviour.text } : { tools: [{ name: "request_user_input", args: QUESTION }] };
          case "tool":
            return step > 0
              ? { reasoning: "thinking it over", text: behaviour.text }
              : exec(`echo '${behaviour.output}'`, false);
          default:
            return { text: behaviour.text };
        }
      }

      const { sim, shared } = await path.start(replyFor);
      const simulator = codexSimulatorOptions(sim.url);
      return {
        ...shared,
        adapter: () =>
          wrap(
            createCodexAdapter({
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
            }),
          ),
        lastTurn(): TurnEvidence | null {
          const requests = sim.requests.filter(isTurnRequest);
          const latest = requests.at(-1);
          if (!latest) return null;
          const turnId = turnIdOf(latest);
          const first = requests.find((r) => turnId !== null && turnIdOf(r) === turnId) ?? latest;
          const opening = userMessages(inputOf(first));
          const own = opening.at(-1);
          if (!own) return null;
          const steers = userMessages(inputOf(latest))
            .filter((m) => m.at > own.at)
            .map((m) => m.text);
          const body = first.body as { model?: string };
          const mode = modeOf(first);
          return {
            text: own.text,
            priorUserTexts: opening.slice(0, -1).map((m) => m.text),
            steers,
            context: own.context ? { text: own.context, delivery: "synthetic_user" } : null,
            model: body.model ?? null,
            ...(mode ? { runtimeMode: mode } : {}),
          };
        },
      };
    },
  };
}
