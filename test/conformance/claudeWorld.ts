import { writeFile } from "node:fs/promises";
import { join } from "node:path";
import { createClaudeAdapter } from "../../src/adapters/claude/adapter.js";
import type {
  BehaviourKind,
  ConformanceWorld,
  TurnBehaviour,
  TurnEvidence,
  WorldRun,
} from "../../src/conformance/index.js";
import type { ProviderAdapter } from "../../src/adapters/contract.js";
import type { ReplySpec, SimulatorRequest } from "../../src/simulator/index.js";
import { CONTEXT, openSimulatorPath, type RealWorldOptions } from "./simulatorWorld.js";

/**
 * The conformance world of Claude Code (the binary the pinned Agent SDK ships), offline: each path gets a model
 * simulator on 127.0.0.1 (the Messages dialect) and a temporary HOME and CLAUDE_CONFIG_DIR, and every adapter of the
 * path (a runtime restart's too) is pointed at both, so it resumes the same sessions on disk.
 *
 * Behaviours are keyed by the user text of the turn they are for: every model request is answered from the latest
 * user text Claude sent and from what Claude already did after it (tool results), so a side request or a resumed
 * session's replayed history never consumes another turn's reply. A subagent's requests are told apart by their
 * conversation's first user text: the prompt the parent gave it.
 *
 * The evidence is what Claude sent the model in its latest main-conversation request: the user's text is the last
 * user text block (a handoff's context goes before it in the same prompt, under the context header), the
 * conversation before it the earlier ones, the model the request's, the mode what Claude's reminders told the model.
 * Claude takes no steer into a running turn (no native steering), and its requests name no turn a steer could be
 * told apart by, so a turn's steers are always none: an adapter that claimed native steering would be refuted.
 */

/** Claude's own user text blocks (reminders, local command records) are wrapped in tags; a user's text is not. */
const CLAUDE_OWN = /^\s*(<|\[Request interrupted)/;
const KEY_ENV = "TILLER_CONFORMANCE_SIMULATOR_KEY";
/** Under the runtime's default sandbox (workspace-write, Claude's `acceptEdits`) a `node` command asks; `echo` not. */
const ASKING_COMMAND = "node -e \"console.log('conformance')\"";

type Block = { type?: string; text?: string; content?: unknown };
interface Message {
  role?: string;
  content?: string | Block[];
}
interface UserText {
  at: number;
  text: string;
  context: string | null;
}

function messagesOf(request: SimulatorRequest): Message[] {
  const body = request.body as { messages?: unknown } | null;
  return Array.isArray(body?.messages) ? (body.messages as Message[]) : [];
}

const blocksOf = (m: Message): Block[] =>
  typeof m.content === "string" ? [{ type: "text", text: m.content }] : (m.content ?? []);

/** The user's texts, in order; a prompt that carried context is split at the paragraph its text starts. */
function userTexts(messages: Message[]): UserText[] {
  const out: UserText[] = [];
  messages.forEach((message, at) => {
    if (message.role !== "user") return;
    for (const block of blocksOf(message)) {
      const text = block.type === "text" ? (block.text ?? "") : "";
      if (!text || CLAUDE_OWN.test(text)) continue;
      if (!text.startsWith(CONTEXT)) out.push({ at, text, context: null });
      else {
        const cut = text.lastIndexOf("\n\n");
        out.push({ at, text: text.slice(cut + 2), context: text.slice(0, cut) });
      }
    }
  });
  return out;
}

/** How many tool results Claude sent back after message `at`: the step the turn is at. */
function stepAfter(messages: Message[], at: number): number {
  return messages
    .slice(at + 1)
    .filter((m) => m.role === "user")
    .flatMap(blocksOf)
    .filter((b) => b.type === "tool_result").length;
}

const tool = (name: string, args: unknown): ReplySpec => ({ tools: [{ name, args }] });
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

export function claudeConformanceWorld(options: RealWorldOptions = {}): ConformanceWorld {
  const wrap = options.wrap ?? ((adapter: ProviderAdapter) => adapter);
  const scripts: BehaviourKind[] = [
    "text",
    "hold",
    "approval:command",
    "approval:file_change",
    "approval:file_read",
    "tool",
    "todo",
    "proposed_plan",
    "question",
    "subagent",
  ];
  return {
    name: options.name ?? "claude",
    scripts: new Set(scripts),
    async open(): Promise<WorldRun> {
      const path = await openSimulatorPath("claude", ["home", "outside"]);
      const { behaviours, released } = path;
      const { home, outside } = path.dirs;
      await writeFile(join(outside, "read.txt"), "conformance\n");
      /** The subagent behaviours, by the prompt their subagent is given. */
      const subagents = new Map<string, Extract<TurnBehaviour, { kind: "subagent" }>>();

      function subagentReply(behaviour: Extract<TurnBehaviour, { kind: "subagent" }>, step: number): ReplySpec {
        const said = "the subagent works";
        if (behaviour.ask) return step > 0 ? { text: said } : { ...bash(ASKING_COMMAND), text: said };
        if (!behaviour.gate) return { text: said };
        // Claude forwards a subagent's messages whole, never streamed: it says something in a message that ends (with
        // a command that asks nothing), then holds its next one at the gate.
        if (step === 0) return { ...bash("echo waiting"), text: said };
        return released.has(behaviour.gate) || step > 1 ? { text: "done" } : { hang: true, text: "done" };
      }

      function replyFor(request: SimulatorRequest): ReplySpec {
        const messages = messagesOf(request);
        const texts = userTexts(messages);
        const sub = texts[0] && subagents.get(texts[0].text);
        const user = texts.at(-1);
        if (sub && user) return subagentReply(sub, stepAfter(messages, user.at));
        const behaviour = user && behaviours.get(user.text);
        if (!user || !behaviour) return { text: "(no behaviour for this turn)" };
        const step = stepAfter(messages, user.at);
        const answered = messages.slice(user.at + 1).some((m) => m.role === "assistant");
        const reply = { text: behaviour.text };
        switch (behaviour.kind) {
          case "hold":
            return released.has(behaviour.gate) || answered ? reply : { hang: true, text: behaviour.text };
          case "approval":
            if (step > 0) return reply;
            if (behaviour.approval === "command") return bash(ASKING_COMMAND);
            // Outside the working directory: a write and a read there ask under workspace-write.
            if (behaviour.approval === "file_change")
              return tool("Write", { file_path: join(outside, `change-${request.id}.txt`), content: "conformance" });
            if (behaviour.approval === "file_read") return tool("Read", { file_path: join(outside, "read.txt") });
            return { text: `(claude world: no ${behaviour.approval} approval)` };
          case "tool":
            return step > 0
              ? { reasoning: "thinking it over", text: behaviour.text }
              : bash(`echo '${behaviour.output}'`);
          case "todo":
            if (step > 0) return reply;
            return tool("TodoWrite", { todos: [{ content: "edit", status: "in_progress", activeForm: "Editing" }] });
          case "proposed_plan":
            // The model's own plan mode: it enters it, writes its plan to the file Claude names, and proposes it.
            if (step === 0) return tool("EnterPlanMode", {});
            if (step === 1) return tool("Write", { file_path: planFileOf(request), content: "build, then test\n" });
            return step === 2 ? tool("ExitPlanMode", {}) : reply;
          case "question": {
            // Claude keys a question by its text: the question `go` is answered as `go`.
            const question = {
              question: "go",
              header: "Go",
              options: [
                { label: "yes", description: "go on" },
                { label: "no", description: "stop" },
              ],
              multiSelect: false,
            };
            return step > 0 ? reply : tool("AskUserQuestion", { questions: [question] });
          }
          case "subagent":
            if (step > 0) return reply;
            subagents.set(behaviour.prompt, behaviour);
            return tool("Agent", {
              description: "conformance",
              prompt: behaviour.prompt,
              subagent_type: "general-purpose",
            });
          default:
            return reply;
        }
      }

      const { sim, shared } = await path.start(replyFor);
      const isMain = (r: SimulatorRequest) => {
        const first = userTexts(messagesOf(r))[0];
        const body = r.body as { tools?: unknown[] } | null;
        return r.dialect === "messages" && !!body?.tools?.length && !!first && !subagents.has(first.text);
      };
      return {
        ...shared,
        adapter: () =>
          wrap(
            createClaudeAdapter({
              home,
              configDir: join(home, ".claude"),
              model: { baseUrl: sim.url, apiKeyEnv: KEY_ENV },
              env: { [KEY_ENV]: "sk-simulator" },
            }),
          ),
        lastTurn(): TurnEvidence | null {
          const latest = sim.requests.filter(isMain).at(-1);
          if (!latest) return null;
          const texts = userTexts(messagesOf(latest));
          const own = texts.at(-1)!;
          return {
            text: own.text,
            priorUserTexts: texts.slice(0, -1).map((t) => t.text),
            steers: [],
            context: own.context ? { text: own.context, delivery: "synthetic_user" } : null,
            model: (latest.body as { model?: string }).model ?? null,
            runtimeMode: modeOf(latest),
          };
        },
      };
    },
  };
}
